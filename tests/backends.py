"""Backends to parametrize a test over, Ray ones on one local cluster per test module.

``make(name, fns, **kwargs)`` builds the VecEnv for ``dummy``, ``subproc``,
``ray-auto`` (same-node actors over shared memory) or ``ray-ray`` (Ray calls only).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import marl_vec as mv

BACKENDS = ("dummy", "subproc", "ray-auto", "ray-ray")
PROCESS_BACKENDS = ("subproc", "ray-auto", "ray-ray")


def make(name: str, fns: list, num_workers: int = 2, **kwargs: Any) -> mv.VecEnv:
    """``num_workers`` processes or actors (ignored by dummy), as even blocks of ``fns``."""
    if name == "dummy":
        return mv.DummyVecEnv(fns, **kwargs)
    if name == "subproc":
        return mv.SubprocVecEnv(fns, num_workers=num_workers, **kwargs)
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
    return mv.RayVecEnv(fns, num_workers=num_workers, transport=name.split("-")[1], **kwargs)


def ray_cluster(tmp_path_factory):
    """Generator for a module-scoped fixture: one local cluster, started only if a Ray test runs."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # pragma: no cover - another module left one open
        ray.shutdown()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp_path_factory.mktemp("ray")),
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    yield
    ray.shutdown()

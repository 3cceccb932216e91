"""Every backend by one name, for tests that must hold on each of them.

``BACKENDS`` names DummyVecEnv, SubprocVecEnv (two workers, so a worker hosts
several envs) and RayVecEnv over both transports ("ray-auto": same-machine
actors step in shared memory; "ray-ray": every actor answers Ray calls).

A test module that uses the Ray backends imports the ``ray_cluster`` fixture: one
local cluster per module, started at the first Ray test only (starting Ray costs
~5 s), as in tests/test_ray.py.

Example:
    >>> from tests.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
    >>> @pytest.mark.parametrize("backend", BACKENDS)  # doctest: +SKIP
    ... def test_x(backend, request):
    ...     with make_backend(backend, fns, request, env_seed=0) as venv: ...
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import pytest

import marl_vec as mv

BACKENDS = ["dummy", "subproc", "ray-auto", "ray-ray"]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
    if ray.is_initialized():  # pragma: no cover - another module left one open
        ray.shutdown()
    temp_dir = str(tmp_path_factory.mktemp("ray"))
    # Actors import test helpers by module name (tests.scripted_envs): give them the repo root.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp_dir, runtime_env={"env_vars": {"PYTHONPATH": root}})
    yield
    ray.shutdown()


def make_backend(backend: str, env_fns: Sequence[Callable[[], Any]], request: pytest.FixtureRequest,
                 **kwargs: Any) -> mv.VecEnv:
    """A VecEnv of ``backend`` (a name of BACKENDS) over ``env_fns``; two workers or actors
    (one for a single env) where the backend has them."""
    workers = min(2, len(env_fns))
    if backend == "dummy":
        return mv.DummyVecEnv(env_fns, **kwargs)
    if backend == "subproc":
        return mv.SubprocVecEnv(env_fns, num_workers=workers, **kwargs)
    if backend in ("ray-auto", "ray-ray"):
        request.getfixturevalue("ray_cluster")
        from marl_vec.vec.ray import RayVecEnv

        return RayVecEnv(env_fns, num_workers=workers, transport=backend.split("-")[1], **kwargs)
    raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")

"""Every backend by one name, for tests that must hold on each of them.

``BACKENDS`` names DummyVecEnv, SubprocVecEnv (two workers, so a worker hosts
several envs) and RayVecEnv over both transports ("ray-auto": same-machine
actors step in shared memory; "ray-ray": every actor answers Ray calls);
``PROCESS_BACKENDS`` the ones whose envs run in other processes; ``MAIN_BLOCK``
("subproc-main") a SubprocVecEnv that steps its last block in this process
(``step_in_main``); ``POOL_BACKENDS`` the process backends and it, for the async
pool's tests (the block in this process is one more member of the pool).

Ray backends run on one local cluster per test module, started at the first Ray
test only (starting Ray costs ~5 s), as in tests/backends/test_ray.py: import the
``ray_cluster`` fixture and build with ``make_backend(name, fns, request, ...)``,
or define a module fixture that yields from ``start_ray_cluster`` and use ``make``.

Example:
    >>> from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
    >>> @pytest.mark.parametrize("backend", BACKENDS)  # doctest: +SKIP
    ... def test_x(backend, request):
    ...     with make_backend(backend, fns, request, env_seed=0) as venv: ...
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Sequence

import pytest

import marl_vec as mv

BACKENDS = ("dummy", "subproc", "ray-auto", "ray-ray")
PROCESS_BACKENDS = ("subproc", "ray-auto", "ray-ray")
MAIN_BLOCK = "subproc-main"  # SubprocVecEnv whose last block steps in this process
POOL_BACKENDS = PROCESS_BACKENDS + (MAIN_BLOCK,)


def start_ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Generator for a module-scoped fixture: one local cluster, shut down after the module."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
    if ray.is_initialized():  # pragma: no cover - another module left one open
        ray.shutdown()
    # Actors import test helpers by module name (tests.helpers.scripted_envs): give them the repo root.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp_path_factory.mktemp("ray")),
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    yield from start_ray_cluster(tmp_path_factory)


def backend_fixture(names: Sequence[str]) -> Any:
    """A fixture over backend ``names`` that starts the module's Ray cluster (the
    ``ray_cluster`` fixture, which the module must import) before a Ray backend:
    ``backend = backend_fixture(PROCESS_BACKENDS)``."""

    @pytest.fixture(params=list(names))
    def backend(request: pytest.FixtureRequest) -> str:
        if request.param.startswith("ray-"):
            request.getfixturevalue("ray_cluster")
        return request.param

    return backend


def make(name: str, fns: Sequence[Callable[[], Any]], num_workers: int = 2, **kwargs: Any) -> mv.VecEnv:
    """A VecEnv of backend ``name``: ``num_workers`` processes or actors (ignored by dummy),
    as even blocks of ``fns``. Ray needs a running cluster (see the module docstring)."""
    if name == "dummy":
        return mv.DummyVecEnv(list(fns), **kwargs)
    if name == "subproc":
        return mv.SubprocVecEnv(list(fns), num_workers=num_workers, **kwargs)
    if name == "subproc-main":  # num_workers blocks: this process steps the last (step_in_main)
        return mv.SubprocVecEnv(list(fns), num_workers=max(1, num_workers - 1), step_in_main=True, **kwargs)
    if name in ("ray-auto", "ray-ray"):
        pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
        return mv.RayVecEnv(list(fns), num_workers=num_workers, transport=name.split("-")[1], **kwargs)
    raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")


def make_backend(backend: str, env_fns: Sequence[Callable[[], Any]], request: pytest.FixtureRequest | None,
                 **kwargs: Any) -> mv.VecEnv:
    """``make`` with two workers or actors (one for a single env), starting the module's
    Ray cluster first when ``backend`` is a Ray one."""
    if backend.startswith("ray-"):
        assert request is not None, "Ray backends need the test's request (for the ray_cluster fixture)"
        request.getfixturevalue("ray_cluster")
    return make(backend, env_fns, num_workers=min(2, len(env_fns)), **kwargs)

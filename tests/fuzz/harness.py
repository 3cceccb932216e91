"""Building the fuzzed VecEnvs, keeping them between examples, and checking that close() leaves nothing.

A SubprocVecEnv costs ~0.5 s to build on a loaded 2-core machine and a RayVecEnv
~3 s, so an example does not build its own: :class:`VenvCache` keeps one per
configuration, and each example starts it with a seeded full reset (which sets every
native env's whole state, see tests/fuzz/envs.py). A configuration marked ``fresh``
is built for its example and closed at its end: those examples also see never-reset
envs, partial first resets and ``close()`` itself.

Example:
    >>> cache = VenvCache("dummy")
    >>> venv = cache.get(CONFIGS["dummy"][0])   # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import marl_vec as mv
from tests.helpers import backends
from tests.fuzz.envs import box_env, dict_env

SHM = Path("/dev/shm")
TIMEOUT = 60.0  # seconds: every wait of a process backend is bounded by it
POOL_BACKENDS = ("subproc", "ray-auto", "ray-ray")


@dataclass(frozen=True)
class Config:
    """One fuzzed batch: ``num_envs`` envs on two workers (blocks as tests/helpers/backends.py
    cuts them), ``batch_size`` envs per ``recv()``, Dict or Box observations, ``copy``."""

    num_envs: int
    batch_size: int | None = None
    dict_obs: bool = False
    copy: bool = True
    fresh: bool = False
    env_seed: int = 7

    @property
    def env_fn(self) -> Callable[[], Any]:
        return dict_env if self.dict_obs else box_env

    def __str__(self) -> str:  # shown in Hypothesis' failing example
        return (f"Config(num_envs={self.num_envs}, batch_size={self.batch_size}, dict_obs={self.dict_obs}, "
                f"copy={self.copy}, fresh={self.fresh})")


# ray-ray actors step their whole block: num_envs even, batch_size a multiple of the block.
CONFIGS: dict[str, list[Config]] = {
    "dummy": [Config(3), Config(4, dict_obs=True), Config(2, dict_obs=True, copy=False), Config(3, fresh=True)],
    "subproc": [Config(4, 3), Config(5, 2, dict_obs=True), Config(3, 1, dict_obs=True, copy=False),
                Config(5, 5), Config(4, 2, dict_obs=True, fresh=True)],
    "subproc-main": [Config(3), Config(4, dict_obs=True), Config(2, dict_obs=True, copy=False), Config(5, fresh=True)],
    # Building a RayVecEnv costs seconds: a batch built for its example comes up 1 time in 5.
    "ray-auto": [Config(4, 3, dict_obs=True), Config(5, 1), Config(4, 3, dict_obs=True), Config(5, 1),
                 Config(3, 2, copy=False, fresh=True)],
    "ray-ray": [Config(4, 2, dict_obs=True), Config(6, 6), Config(4, 2, dict_obs=True), Config(6, 6),
                Config(4, 4, fresh=True)],
}


def build(backend: str, cfg: Config) -> mv.VecEnv:
    kwargs: dict[str, Any] = {"env_seed": cfg.env_seed, "copy": cfg.copy}
    if backend in POOL_BACKENDS:
        kwargs.update(batch_size=cfg.batch_size, timeout=TIMEOUT)
    if backend.startswith("ray-"):
        kwargs["num_cpus_per_worker"] = 0  # several batches' actors at once on a 2-CPU cluster
    return backends.make(backend, [cfg.env_fn] * cfg.num_envs, num_workers=2, **kwargs)


def blocks_of(venv: mv.VecEnv) -> list[tuple[int, int]]:
    """Each worker's (start, stop) block of envs (one block for DummyVecEnv)."""
    return list(getattr(venv, "_pool_blocks", [(0, venv.num_envs)]))


def whole_blocks(venv: mv.VecEnv) -> list[bool]:
    """Per worker: whether it steps only its whole block in the pool (Ray calls)."""
    return list(getattr(venv, "_pool_whole", [False]))


def arm(venv: mv.VecEnv, env: int) -> None:
    """Reset ``venv`` with env ``env`` armed to raise at its next step (tests/fuzz/envs.py).

    The unseeded reset after set_attr starts a new pool round, every env ready, and
    keeps the env armed (only a seeded reset disarms it)."""
    venv.reset()
    venv.set_attr("fail_in", 1, indices=[env])
    venv.reset()


def footprint(venv: mv.VecEnv) -> tuple[list[int], list[str]]:
    """The processes (other than this one) and /dev/shm segments that ``venv`` uses."""
    pids = sorted({int(p) for p in venv.call("pid")} - {os.getpid()})
    name = getattr(getattr(venv, "buffers", None), "shm_name", None)
    return pids, [name] if name else []


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_left_nothing(pids: list[int], segments: list[str], wait: float = 15.0) -> None:
    """After close(): every process gone and every segment unlinked (within ``wait`` s)."""
    deadline = time.monotonic() + wait
    while True:
        alive = [p for p in pids if _running(p)]
        left = [s for s in segments if (SHM / s.lstrip("/")).exists()]
        if not (alive or left):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"after close(): processes {alive} still run, /dev/shm segments {left} remain")
        time.sleep(0.05)


def close_and_check(venv: mv.VecEnv) -> None:
    """Close ``venv`` (twice: that is fine) and check that it left nothing behind."""
    pids, segments = footprint(venv)
    venv.close()
    venv.close()
    assert_left_nothing(pids, segments)


def closing(*caches: "VenvCache") -> Any:
    """A module-scoped autouse fixture that closes the ``caches``' batches after the module,
    checking that each leaves nothing behind: ``_batches = closing(CACHE)``."""
    import pytest

    @pytest.fixture(scope="module", autouse=True)
    def batches() -> Any:
        yield
        for cache in caches:
            cache.close_all()

    return batches


class VenvCache:
    """One VecEnv per configuration of ``backend``, kept across examples."""

    def __init__(self, backend: str):
        self.backend = backend
        self._venvs: dict[Config, mv.VecEnv] = {}

    def get(self, cfg: Config) -> mv.VecEnv:
        if cfg.fresh:
            return build(self.backend, cfg)
        venv = self._venvs.get(cfg)
        if venv is None or venv.closed:
            venv = self._venvs[cfg] = build(self.backend, cfg)
        return venv

    def drop(self, cfg: Config) -> None:
        """Forget (and close) the batch of ``cfg``: an example failed with it in an unknown state."""
        venv = self._venvs.pop(cfg, None)
        if venv is not None:
            venv.close()

    def close_all(self) -> None:
        """Close every kept batch, checking that each leaves nothing behind."""
        venvs, self._venvs = list(self._venvs.values()), {}
        for venv in venvs:
            if not venv.closed:
                close_and_check(venv)

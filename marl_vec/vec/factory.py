"""make_vec: pick a backend by name.

Examples:
    >>> import gymnasium as gym
    >>> venv = make_vec([lambda: gym.make("CartPole-v1")] * 2, backend="dummy")
    >>> type(venv).__name__
    'DummyVecEnv'
    >>> venv.close()
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

from marl_vec.core.state import with_state
from marl_vec.envs.registry import adapter_fns
from marl_vec.vec.base import VecEnv

# backend name -> (module, class); modules are imported only when chosen.
BACKENDS: dict[str, tuple[str, str]] = {
    "dummy": ("marl_vec.vec.dummy", "DummyVecEnv"),
    "subproc": ("marl_vec.vec.subproc.vec_env", "SubprocVecEnv"),
    "ray": ("marl_vec.vec.ray.vec_env", "RayVecEnv"),
}


def backend_class(name: str) -> Callable[..., VecEnv]:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise NotImplementedError(f"the {name!r} backend is not available in this version of marl_vec") from None
        raise
    return getattr(module, class_name)


def make_vec(
    env_fns: Sequence[Callable[[], Any]],
    backend: str = "dummy",
    env_seed: int | None = 0,
    autoreset: str = "same_step",
    copy: bool = True,
    state: str = "auto",
    **backend_kwargs: Any,
) -> VecEnv:
    """Run ``env_fns`` as one batch on ``backend`` (dummy, subproc or ray).

    ``state``: what ``StepResult.state`` holds, ``auto`` (default), ``env``, ``concat``
    or ``none`` (see `marl_vec.core.state`); every backend applies it where it makes
    its envs. ``backend_kwargs`` go to the backend (``num_workers``, ``start_method``, ...).
    """
    if backend != "dummy" and ("array_backend" in backend_kwargs or "device" in backend_kwargs):
        from marl_vec.vec.device_arrays import refuse_device

        refuse_device(backend_class(backend).__name__, backend_kwargs.pop("array_backend", None),
                      backend_kwargs.pop("device", None))
    cls = backend_class(backend)
    return cls(with_state(adapter_fns(env_fns), state), env_seed=env_seed, autoreset=autoreset, copy=copy, **backend_kwargs)

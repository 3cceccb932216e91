"""The arguments every backend shares are checked alike, before anything starts.

DummyVecEnv, SubprocVecEnv and RayVecEnv check ``env_fns``, ``state``, ``autoreset``,
``restart_on_error`` and ``reward_dtype`` with one function
(:func:`marl_vec.vec.base.check_backend_args`): the same mistake gets the same
message on each, before an env is built, a worker started or a Ray cluster joined.
"""

from __future__ import annotations

import importlib.util

import pytest

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv

BACKENDS = ["dummy", "subproc"] + (["ray"] if importlib.util.find_spec("ray") else [])

MISTAKES = [
    (dict(env_fns=[]), ValueError, r"^{name} needs at least one env_fn$"),
    (dict(env_fns=[DyingAgentEnv, "CartPole-v1"]), TypeError,
     r"^env_fns\[1\] is a str, not a zero-argument callable$"),
    (dict(restart_on_error=-1), ValueError, r"^restart_on_error must be an integer >= 0, got -1$"),
    (dict(restart_on_error=True), ValueError, r"^restart_on_error must be an integer >= 0, got True$"),
    (dict(reward_dtype="int8"), ValueError, r"^reward_dtype must be one of float32, float64 .*got 'int8'$"),
    (dict(autoreset="sometimes"), ValueError, r"^unknown autoreset mode 'sometimes'; allowed: same_step"),
    (dict(state="global"), ValueError, r"^unknown state mode 'global'; allowed: auto, env, concat, none"),
]


def _backend(name: str) -> type:
    if name == "ray":
        from marl_vec.vec.ray.vec_env import RayVecEnv

        return RayVecEnv
    return {"dummy": mv.DummyVecEnv, "subproc": mv.SubprocVecEnv}[name]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kwargs, error, message", MISTAKES, ids=[m[2][1:30] for m in MISTAKES])
def test_a_mistake_is_named_alike_by_every_backend_before_anything_starts(backend, kwargs, error, message,
                                                                           monkeypatch):
    cls = _backend(backend)
    built = []
    kwargs = {"env_fns": [DyingAgentEnv] * 2, **kwargs}
    kwargs["env_fns"] = [fn if not callable(fn) else _counting(fn, built) for fn in kwargs["env_fns"]]
    if backend == "ray":  # the check comes before a session: starting one would fail the test
        import marl_vec.vec.ray.vec_env as ray_backend

        monkeypatch.setattr(ray_backend, "acquire_session", _no_session)
    with pytest.raises(error, match=message.format(name=cls.__name__)):
        cls(**kwargs)
    assert built == []  # no env was built (the check came first)


def _counting(fn, built):
    def make():
        built.append(fn)
        return fn()

    return make


def _no_session(*args, **kwargs):
    raise AssertionError("a Ray session was started before the arguments were checked")


def test_an_integer_of_numpy_is_a_restart_budget():
    import numpy as np

    with mv.DummyVecEnv([DyingAgentEnv], restart_on_error=np.int64(2)) as venv:
        assert venv.group.restart_on_error == 2

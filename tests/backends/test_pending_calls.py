"""Calls while a step is pending (step_async done, step_wait not yet) raise
AlreadyPendingCallError naming the call; the pending step stays collectable."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import AlreadyPendingCallError
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.scripted_envs import SlowRecordingEnv

FNS = [functools.partial(SlowRecordingEnv, delay=0.05)] * 2

CALLS = {
    "get_attr": lambda v: v.get_attr("seen"),
    "set_attr": lambda v: v.set_attr("delay", 0.0),
    "call": lambda v: v.call("render"),
    "render": lambda v: v.render(),
    "reset": lambda v: v.reset(),
    "step_async": lambda v: v.step_async(np.array([[0], [0]])),
}


backend = backends.backend_fixture(backends.BACKENDS)


def test_calls_while_a_step_is_pending_raise_and_the_step_stays_collectable(backend):
    with backends.make(backend, FNS, env_seed=0) as venv, mv.DummyVecEnv(FNS, env_seed=0) as ref:
        venv.reset(), ref.reset()
        venv.step_async(np.array([[1], [2]]))
        for name, call in CALLS.items():
            what = "twice without step_wait\\(\\)" if name == "step_async" else "while a step is pending"
            with pytest.raises(AlreadyPendingCallError, match=rf"^{name}\(\) called {what} "
                                                               r"\(step_async\(\) was called, step_wait\(\) not yet\); "
                                                               r"call step_wait\(\) first to collect the pending step$"):
                call(venv)
        r, d = venv.step_wait(), ref.step(np.array([[1], [2]]))
        for field in ("obs", "reward", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(r, field), getattr(d, field))
        assert venv.get_attr("seen") == [[1], [2]]
        # After step_wait every call works again.
        venv.set_attr("delay", 0.0)
        assert venv.get_attr("delay") == [0.0, 0.0]
        venv.step(np.array([[0], [0]]))
        assert venv.get_attr("seen") == [[1, 0], [2, 0]]


def test_the_error_is_a_runtime_error():
    assert issubclass(AlreadyPendingCallError, RuntimeError)

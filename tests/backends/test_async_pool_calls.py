"""call(), get_attr(), set_attr() and render() in the middle of an async pool round
(docs/backends/async_pool.md): they wait for the envs in flight and keep the pool, so
the round goes on: results and errors read stay for the next recv() calls, envs received
stay owed, and the call sees each env after its step in flight. reset() and step() still
start a new round (their drops are tested in tests/backends/test_async_pool_faults.py).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from marl_vec.core.errors import PoolNotReadyError, WorkerError
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.pool_driver import policy
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv

backend = backends.backend_fixture(backends.BACKENDS + (backends.MAIN_BLOCK,))

CALLS = {
    "call": lambda venv: venv.call("render"),
    "get_attr": lambda venv: venv.get_attr("t"),
    "set_attr": lambda venv: venv.set_attr("label", 1),
    "render": lambda venv: venv.render(),
}


def _fns(n: int = 4) -> list:
    return [functools.partial(DyingAgentEnv, render_mode="rgb_array")] * n


def _actions(r, step: int) -> np.ndarray:
    return np.stack([policy(r.avail_actions[k], i, step) for k, i in enumerate(r.env_ids)])


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_call_keeps_the_envs_in_flight_for_recv(backend, call):
    with backends.make(backend, _fns(), num_workers=2, batch_size=4) as venv:
        venv.reset()
        r = venv.recv()
        venv.send(_actions(r, 0), r.env_ids)
        CALLS[call](venv)  # waits for the four steps in flight, keeps their results
        assert venv.get_attr("t") == [1, 1, 1, 1]
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [0, 1, 2, 3]
        assert r.obs[:, 0, 0].tolist() == [1.0] * 4  # the results of the steps sent before the call


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_call_keeps_ready_and_owed_envs(backend, call):
    # ray-ray actors step whole blocks of 2: batch_size 2 keeps every backend on one rule.
    with backends.make(backend, _fns(), num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()  # envs 0 and 1; 2 and 3 stay ready from the reset
        CALLS[call](venv)
        venv.send(_actions(r, 0), r.env_ids)  # still owed: the call did not take them back
        r2 = venv.recv()
        assert r2.env_ids.tolist() == [2, 3] and r2.obs[:, 0, 0].tolist() == [0.0, 0.0]
        venv.send(_actions(r2, 0), r2.env_ids)
        seen = sorted(venv.recv().env_ids.tolist() + venv.recv().env_ids.tolist())
        assert seen == [0, 1, 2, 3]


def test_set_attr_applies_from_the_next_step_of_an_env_in_flight(backend):
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=3), DyingAgentEnv]
    with backends.make(backend, fns, num_workers=2, batch_size=4) as venv:
        venv.reset()
        r = venv.recv()
        venv.send(_actions(r, 0), r.env_ids)  # env 2's first step
        venv.set_attr("fail_at", 2, indices=[2])  # after that step: the next one (its second) raises
        assert venv.get_attr("steps_taken", indices=[2]) == [1]
        r = venv.recv()
        venv.send(_actions(r, 1), r.env_ids)
        with pytest.raises(_error_types(backend)) as err:
            for _ in range(4):
                venv.recv()
        assert _env_of(err.value) == 2


def _error_types(backend: str) -> tuple[type[BaseException], ...]:
    if backend == "dummy":
        return (RuntimeError,)
    if backend.startswith("ray"):
        from marl_vec.vec.ray.vec_env import RayWorkerError

        return (RayWorkerError,)
    return (WorkerError,)


def _env_of(exc: BaseException) -> int | None:
    """The env an env's error names (DummyVecEnv: the env's own exception, marked)."""
    return getattr(exc, "env_index", getattr(exc, "marl_vec_env_index", None))


def test_an_error_read_by_a_call_is_raised_by_the_next_recv(backend):
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with backends.make(backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        for _ in range(2):
            r = venv.recv()
            venv.send(_actions(r, 0), r.env_ids)  # env 2 raises in its first step
        assert venv.get_attr("t") == [1, 1, 0, 1]  # env 2 raised before stepping
        with pytest.raises(_error_types(backend)) as err:
            venv.recv()  # the error the call read, before any batch
        assert _env_of(err.value) == 2
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) in ([0, 1], [0, 3], [1, 3])  # the others go on
        with pytest.raises(PoolNotReadyError, match=r"envs \[2\] raised and wait for reset"):
            venv.recv()  # one env is left, batch_size is 2: env 2 stays out until reset()

"""A KeyboardInterrupt in step_wait: the step goes on in the workers with its own
actions; the next call collects it first (so no worker ever reads the next
step's actions), and step_wait() may still collect it whole.

Process backends only: DummyVecEnv steps inside step_async, in this process.
"""

from __future__ import annotations

import functools
import signal

import numpy as np
import pytest

from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.scripted_envs import SlowDyingAgentEnv, SlowRecordingEnv

# Two envs per worker: the second reads its action only after the first's 0.4 s step,
# so a worker still finishing an interrupted step would read the next step's actions.
FNS = [functools.partial(SlowRecordingEnv, delay=0.4)] * 4


backend = backends.backend_fixture(backends.PROCESS_BACKENDS)


def _interrupt(*_):
    raise KeyboardInterrupt


def interrupted_step(venv, actions, after: float = 0.2) -> None:
    """step(actions), with Ctrl-C arriving ``after`` seconds into step_wait."""
    venv.step_async(actions)
    old = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, after)
    try:
        with pytest.raises(KeyboardInterrupt):
            venv.step_wait()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_next_step_waits_for_the_interrupted_one(backend):
    with backends.make(backend, FNS, env_seed=0) as venv:
        venv.reset()
        interrupted_step(venv, np.ones((4, 1), dtype=np.int64))
        r = venv.step(np.full((4, 1), 2))
        assert venv.get_attr("seen") == [[1, 2]] * 4
        # The batch is whole: the obs of both steps (sum of actions seen), rewards, no leftovers.
        assert r.obs[:, 0, 0].tolist() == [3.0] * 4 and r.reward.tolist() == [[1.0]] * 4
        r = venv.step(np.array([[0], [1], [2], [0]]))
        assert venv.get_attr("seen") == [[1, 2, 0], [1, 2, 1], [1, 2, 2], [1, 2, 0]]
        assert r.obs[:, 0, 0].tolist() == [3.0, 4.0, 5.0, 3.0]


def test_interrupted_step_is_collectable_by_step_wait(backend):
    with backends.make(backend, FNS, env_seed=0) as venv:
        venv.reset()
        interrupted_step(venv, np.array([[1], [2], [0], [1]]))
        r = venv.step_wait()
        assert r.obs[:, 0, 0].tolist() == [1.0, 2.0, 0.0, 1.0] and r.reward.tolist() == [[1.0]] * 4
        with pytest.raises(RuntimeError, match=r"step_wait\(\) called without step_async\(\)"):
            venv.step_wait()
        assert venv.get_attr("seen") == [[1], [2], [0], [1]]


@pytest.mark.parametrize("call", ["reset", "get_attr", "render"])
def test_any_call_after_an_interrupt_finishes_the_step_first(backend, call):
    with backends.make(backend, FNS, env_seed=0) as venv:
        venv.reset()
        interrupted_step(venv, np.ones((4, 1), dtype=np.int64))
        if call == "reset":
            r = venv.reset()
            assert r.obs[:, 0, 0].tolist() == [0.0] * 4
            assert venv.get_attr("seen") == [[]] * 4
        elif call == "get_attr":
            assert venv.get_attr("seen") == [[1]] * 4
        else:
            assert len(venv.render()) == 4
            assert venv.get_attr("seen") == [[1]] * 4
        # The batch goes on.
        venv.step(np.full((4, 1), 2))


def test_actions_are_validated_against_the_interrupted_steps_masks(backend):
    """At t=1 action 1 is unavailable (DyingAgentEnv's masks change every step): the
    next step's actions are checked against the masks the interrupted step wrote."""
    fns = [functools.partial(SlowDyingAgentEnv, delay=0.4, die_at=9, episode_len=9)] * 4
    with backends.make(backend, fns, env_seed=0) as venv:
        venv.reset()
        interrupted_step(venv, np.full((4, 3), 2))
        with pytest.raises(ValueError, match=r"action 1 for env 0, agent 'a0' is not available; available now: \[0, 2, 3\]"):
            venv.step(np.ones((4, 3), dtype=np.int64))
        r = venv.step(np.full((4, 3), 2))
        assert venv.get_attr("t") == [2] * 4
        assert r.avail_actions[:, 0].tolist() == [[True, True, False, True]] * 4

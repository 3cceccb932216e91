"""SubprocVecEnv(spin_us=...) on this process's side: it polls for the workers' answers
before it sleeps, only where it has a core to spare (``num_workers`` < usable cores, as
with ``step_in_main``'s default). Results stay bitwise DummyVecEnv's (step, the other
commands, the async pool), and every fault is reported as from the sleeping wait: a
dead worker, a timeout, Ctrl-C. Which way a wait went is read from the polls it made
(a spin polls with timeout 0 first), never from the clock."""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest

from marl_vec.core.errors import WorkerDiedError, WorkerError
from marl_vec.vec.subproc import transport as subproc_transport
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from marl_vec.vec.subproc.transport import SubprocTransport
from tests.backends import test_subproc_parity as parity
from tests.helpers.pool_driver import STEPS, DelayedEnv, assert_same, pool_trajectories, sync_trajectories
from tests.helpers.scripted_envs import DyingAgentEnv, SlowRecordingEnv
from tests.helpers.sigint import interrupted
from tests.backends.test_subproc_faults import ExitingEnv, SleepyEnv, available
from tests.backends.test_subproc_parity import cartpole, dying


@pytest.fixture
def cores(monkeypatch):
    """Sets the usable cores SubprocVecEnv sees (2 unless a test says otherwise)."""
    def set_cores(n: int) -> None:
        monkeypatch.setattr("marl_vec.vec.subproc.vec_env._cpu_count", lambda: n)
    set_cores(2)
    return set_cores


class _Recording:
    """A select.poll that records ``(timeout, answered)`` of each call."""

    def __init__(self, poller, calls: list):
        self.poller, self.calls = poller, calls

    def poll(self, timeout=None):
        events = self.poller.poll(timeout)
        self.calls.append((timeout, bool(events)))
        return events


def record_polls(venv: SubprocVecEnv) -> list:
    """Every poll venv makes from now on, as ``(timeout, answered)``."""
    calls: list = []
    real = venv._poller
    venv._poller = lambda workers: (lambda made: (_Recording(made[0], calls), made[1]))(real(workers))
    return calls


@pytest.mark.parametrize("workers, step_in_main, spin_us, cores_here, spins", [
    (1, True, 300, 2, True),    # 1 worker + this process on 2 cores: the second core is this process's
    (1, False, 300, 2, True),   # 1 worker on 2 cores: the trainer's core waits
    (2, False, 300, 2, False),  # 2 workers on 2 cores: a spinning wait would take a core from one
    (2, True, 300, 2, False),   # more processes stepping than cores
    (2, False, 300, 4, True),
    (1, True, 0, 2, False),     # spin_us=0: nobody spins
])
def test_this_process_spins_only_with_a_core_to_spare(cores, workers, step_in_main, spin_us, cores_here, spins):
    cores(cores_here)
    with SubprocVecEnv([DyingAgentEnv] * 4, num_workers=workers, step_in_main=step_in_main,
                       spin_us=spin_us) as venv:
        assert venv.main_spins is spins
        assert venv._main_spin == (spin_us * 1e-6 if spins else 0.0)
        r = venv.reset()
        calls = record_polls(venv)
        venv.step(available(r))
        # A spinning wait starts with polls that do not sleep; a sleeping one never polls with 0.
        assert (calls[0][0] == 0) is spins
        assert spins or all(timeout != 0 for timeout, _ in calls)


def test_results_equal_dummy_with_both_sides_spinning(cores):
    parity.run_both(cartpole, 6, 40, num_workers=1, step_in_main=True, spin_us=300)
    assert parity.run_both(dying, 5, 14, "next_step", num_workers=1, spin_us=300) >= 5
    assert parity.run_both(dying, 5, 14, num_workers=3, spin_us=1000, start_method="forkserver") >= 5
    cores(4)  # 2 workers with cores to spare
    parity.run_both(cartpole, 6, 40, num_workers=2, spin_us=300)


def test_the_async_pool_spins_by_the_same_rule_with_the_same_trajectories(cores):
    fns = [functools.partial(DelayedEnv, d) for d in (0.0, 0.0, 0.002, 0.002)]
    expected = sync_trajectories(fns, STEPS)
    with SubprocVecEnv(fns, num_workers=1, batch_size=2, spin_us=300) as venv:
        assert venv.main_spins
        venv.reset()
        for _ in range(2):  # the reset envs are ready: no wait
            r = venv.recv()
        calls = record_polls(venv)
        venv.send(r.avail_actions.argmax(axis=2).astype(np.int64), r.env_ids)
        venv.recv()
        assert calls and calls[0][0] == 0
    got, _, _ = pool_trajectories(fns, STEPS, num_workers=1, batch_size=2, hold=True, spin_us=300)
    assert_same(got, expected)


@pytest.mark.parametrize("step_in_main", [False, True])
def test_a_worker_dying_during_a_spinning_wait_is_reported_as_before(cores, step_in_main):
    # Worker 0 (env 0) exits inside its second step; this process spins up to 1 s meanwhile.
    fns = [functools.partial(ExitingEnv, exit_at=2), DyingAgentEnv]
    with SubprocVecEnv(fns, num_workers=1, step_in_main=step_in_main, spin_us=1e6) as venv:
        assert venv.main_spins
        r = venv.step(available(venv.reset()))
        calls = record_polls(venv)
        with pytest.raises(WorkerDiedError, match=r"^worker 0 failed in step: .*\(envs 0\.\.[01]\) exited with code 3; "
                                                  r"this SubprocVecEnv cannot continue"):
            venv.step(available(r))
        assert calls[0][0] == 0
        with pytest.raises(WorkerDiedError, match="cannot continue: close"):
            venv.reset()


def test_a_worker_dying_during_a_spinning_wait_is_replaced_within_restart_on_error(cores):
    fns = [functools.partial(ExitingEnv, exit_at=2), DyingAgentEnv]
    with SubprocVecEnv(fns, env_seed=0, num_workers=1, step_in_main=True, spin_us=1e6, restart_on_error=1) as venv:
        r = venv.step(available(venv.reset()))
        victim = venv.worker_pids[0]
        r = venv.step(available(r))
        assert r.done[0] and r.truncated[0].all() and "exited with code 3" in r.infos[0]["error"]
        assert not r.done[1] and venv.worker_pids[0] != victim
        calls = record_polls(venv)  # the new worker's pipe and sentinel are polled, spinning
        venv.step(available(r))
        assert calls[0][0] == 0


def test_a_timeout_still_fires_with_a_spin_longer_than_it(cores):
    fns = [functools.partial(SleepyEnv, delay=60.0), DyingAgentEnv]  # worker 0 hangs; env 1 steps here
    venv = SubprocVecEnv(fns, num_workers=1, step_in_main=True, spin_us=1e6, timeout=0.5, close_timeout=0.5)
    try:
        r = venv.reset()
        with pytest.raises(WorkerError, match=r"worker\(s\) 0 did not answer 'step' within timeout=0\.5 s"):
            venv.step(available(r))
        with pytest.raises(WorkerError, match="did not answer"):
            venv.reset()
    finally:
        venv.close()


class _FakeClock:
    """time.monotonic advancing 1/8 s a call (exact in binary: no rounding in the sums)."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 0.125
        return self.now


class _Silent:
    """A poller nobody answers; records its timeouts."""

    def __init__(self):
        self.timeouts: list = []

    def poll(self, timeout=None):
        self.timeouts.append(timeout)
        return []


@pytest.mark.parametrize("timeout, spins, last", [
    (0.35, 3, 0),        # the spin stops at the deadline; the last poll does not sleep beyond it
    (5.0, 8, 3875),      # a 1 s spin, then sleep for what is left of 5 s (in ms)
    (None, 8, None),     # no limit: spin 1 s, then sleep until an answer
])
def test_the_spin_stays_within_the_timeout(monkeypatch, timeout, spins, last):
    monkeypatch.setattr(subproc_transport, "time", types.SimpleNamespace(monotonic=_FakeClock().monotonic))
    silent = _Silent()
    host = types.SimpleNamespace(_main_spin=1.0, _poller=lambda workers: (silent, {}))
    events, _ = SubprocTransport._wait_events(host, [0], timeout)
    assert events == [] and silent.timeouts == [0] * spins + [last]


def test_ctrl_c_during_a_spinning_wait_is_like_during_a_sleeping_one(cores):
    # The worker steps both envs (0.4 s each); this process spins up to 1 s for the answer.
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.4)] * 2, num_workers=1,
                       spin_us=1e6) as venv:
        assert venv.main_spins
        venv.reset()
        venv.step_async(np.ones((2, 1), dtype=np.int64))
        calls = record_polls(venv)
        interrupted(venv.step_wait, after=0.1)
        assert calls and calls[0][0] == 0
        # The interrupted step's answer is collected by the next call; the batch goes on.
        r = venv.step(np.full((2, 1), 2))
        assert venv.get_attr("seen") == [[1, 2]] * 2
        assert r.obs[:, 0, 0].tolist() == [3.0] * 2

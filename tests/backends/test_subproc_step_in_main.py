"""SubprocVecEnv(step_in_main=True): this process steps the last block while the workers
step theirs. Bitwise the results of DummyVecEnv (every autoreset mode, uneven blocks,
other start methods, the non-step API), errors named like a worker's, a first Ctrl-C
deferred until the block's step is whole, no process left, and clear refusals; under the
async pool the block is one more member, with the same trajectories."""

from __future__ import annotations

import functools
import os
import signal
import time

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers.pool_driver import STEPS, DelayedEnv, assert_same, pool_trajectories, sync_trajectories
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv, SlowRecordingEnv
from tests.backends import test_subproc_parity as parity
from tests.backends.test_subproc_parity import MODES, cartpole, dying, random_available, spread


def run_both(env_fn, num_envs, steps, autoreset="same_step", num_workers=1, **kwargs):
    """A DummyVecEnv and a SubprocVecEnv(step_in_main=True) side by side; every result equal."""
    return parity.run_both(env_fn, num_envs, steps, autoreset, num_workers, step_in_main=True, **kwargs)


@pytest.mark.parametrize("autoreset", MODES)
def test_dying_agent_env_every_mode(autoreset):
    # 5 envs: a worker's block of 3, this process's block of 2.
    assert run_both(dying, 5, 14, autoreset) >= 5


def test_simple_spread_and_cartpole_with_episode_ends():
    assert run_both(spread, 4, 16) == 8  # max_cycles=7: every env ends at steps 7 and 14
    assert run_both(cartpole, 6, 60, "next_step", num_workers=2) > 0


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_other_start_methods(start_method):
    run_both(dying, 3, 6, start_method=start_method)


def test_the_main_process_steps_the_last_block():
    with SubprocVecEnv([DyingAgentEnv] * 5, num_workers=2, step_in_main=True) as venv:
        assert venv._blocks == [(0, 2), (2, 4), (4, 5)]
        pids = venv.call("__class__")  # any call reaches every block
        assert len(pids) == 5
        import psutil

        children = {p.pid for p in psutil.Process().children(recursive=True)}
        assert set(venv.worker_pids) <= children and os.getpid() not in venv.worker_pids


def test_default_num_workers_leaves_a_core_to_this_process(monkeypatch):
    monkeypatch.setattr("marl_vec.vec.subproc.vec_env._cpu_count", lambda: 2)
    with SubprocVecEnv([DyingAgentEnv] * 4, step_in_main=True) as venv:
        assert venv.num_workers == 1 and venv._blocks == [(0, 2), (2, 4)]


def test_call_get_attr_set_attr_render_reach_both_kinds_of_block():
    with SubprocVecEnv([functools.partial(DyingAgentEnv, render_mode="rgb_array")] * 5, num_workers=1,
                       step_in_main=True) as venv:
        venv.reset()
        venv.set_attr("die_at", [10, 11, 12, 13, 14])
        assert venv.get_attr("die_at", indices=[4, 0, 2]) == [14, 10, 12]
        venv.set_attr("episode_len", 9, indices=[1, 4])
        assert venv.get_attr("episode_len") == [6, 9, 6, 6, 9]
        venv.step(np.ones((5, 3), dtype=np.int64))
        frames = venv.render()
        assert len(frames) == 5 and all(f.shape == (4, 6, 3) for f in frames)


def test_an_error_in_the_main_block_names_the_env_and_keeps_the_batch_usable():
    fns = [DyingAgentEnv] * 3 + [functools.partial(FailingEnv, fail_at=3)]
    with SubprocVecEnv(fns, num_workers=1, step_in_main=True) as venv:
        r = venv.reset()
        for _ in range(2):
            r = venv.step(random_available(r, np.random.default_rng(0)))
        with pytest.raises(WorkerError) as caught:
            venv.step(random_available(r, np.random.default_rng(0)))
        assert (caught.value.env_index, caught.value.worker, caught.value.command) == (3, 1, "step")
        assert str(caught.value).startswith("env 3 (worker 1) failed in step: RuntimeError('scripted failure at step 3')")
        assert "raise RuntimeError" in caught.value.traceback_text
        r = venv.reset()
        venv.step(random_available(r, np.random.default_rng(0)))


def test_restart_on_error_rebuilds_an_env_of_the_main_block():
    fns = [DyingAgentEnv] * 3 + [functools.partial(FailingEnv, fail_at=2)]
    with SubprocVecEnv(fns, num_workers=1, step_in_main=True, restart_on_error=1) as venv:
        r = venv.reset()
        r = venv.step(random_available(r, np.random.default_rng(0)))
        r = venv.step(random_available(r, np.random.default_rng(0)))
        assert r.done[3] and r.truncated[3].all() and "restarted" in r.infos[3]


def test_a_failing_build_in_the_main_block_fails_construction_and_leaves_nothing():
    import psutil

    def broken():
        raise ValueError("bad scenario name 'nope'")

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(WorkerError, match=r"^env 3 \(worker 1\) failed in start: ValueError"):
        SubprocVecEnv([DyingAgentEnv] * 3 + [broken], num_workers=1, step_in_main=True)
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not [p for p in left if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_close_leaves_no_process_and_closing_twice_is_fine():
    import psutil

    venv = SubprocVecEnv([DyingAgentEnv] * 4, num_workers=1, step_in_main=True)
    venv.reset()
    pids = list(venv.worker_pids)
    venv.close()
    venv.close()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_bad_arguments_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"step_in_main needs num_envs >= 2"):
        SubprocVecEnv([DyingAgentEnv], step_in_main=True)
    with pytest.raises(ValueError, match=r"num_workers must be an integer in \[1, num_envs - 1=3\], got 4"):
        SubprocVecEnv([DyingAgentEnv] * 4, num_workers=4, step_in_main=True)
    with pytest.raises(ValueError, match=r"step_in_main must be True or False, got 'yes'"):
        SubprocVecEnv([DyingAgentEnv] * 4, step_in_main="yes")


# -- the async pool: this process's block is one more member ---------------------------------

@pytest.mark.parametrize("batch_size", [1, 3, 5])
@pytest.mark.parametrize("num_workers", [1, 2])
def test_the_pool_follows_each_env_trajectory(batch_size, num_workers):
    # 6 envs of two speeds; blocks of 3 + 3 (1 worker) or 2 + 2 + 2 (2 workers)
    fns = [functools.partial(DelayedEnv, d) for d in (0.0, 0.004, 0.0, 0.004, 0.0, 0.004)]
    expected = sync_trajectories(fns, STEPS)
    for hold in (False, True):
        got, batches, stats = pool_trajectories(fns, STEPS, "subproc-main", hold=hold, num_workers=num_workers + 1,
                                                batch_size=batch_size)
        assert_same(got, expected)
        assert stats["episodes"] >= len(fns)


def test_the_workers_step_while_this_process_steps_its_envs_of_a_send():
    # env 0 in the worker, env 1 here, 0.3 s a step each: send() returns after env 1's
    # step, and env 0's, sent first, is done by then
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.3)] * 2, num_workers=1, step_in_main=True,
                       batch_size=2) as venv:
        venv.reset()
        ids = venv.recv().env_ids
        began = time.monotonic()
        venv.send(np.array([[1], [2]]), ids[::-1])
        sent = time.monotonic() - began
        r = venv.recv()
        took = time.monotonic() - began
        assert sent >= 0.3 and took < 0.55, (sent, took)
        assert sorted(r.env_ids.tolist()) == [0, 1] and venv.get_attr("seen") == [[2], [1]]


def test_a_first_ctrl_c_in_a_pool_step_of_this_process_loses_nothing(sigint_raises):
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.3)] * 4, num_workers=1, step_in_main=True,
                       batch_size=4) as venv:
        venv.reset()
        ids = venv.recv().env_ids
        old = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        signal.setitimer(signal.ITIMER_REAL, 0.15)  # during env 2's step, in send()
        try:
            with pytest.raises(KeyboardInterrupt):
                venv.send(np.ones((4, 1), dtype=np.int64), ids)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        r = venv.recv()  # the step was whole: every env's result is there, once
        assert sorted(r.env_ids.tolist()) == [0, 1, 2, 3] and r.obs[:, 0, 0].tolist() == [1.0] * 4
        assert venv.get_attr("seen") == [[1]] * 4


def test_a_second_ctrl_c_in_a_pool_step_of_this_process_breaks_the_batch(sigint_raises):
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.5)] * 2, num_workers=1, step_in_main=True,
                       batch_size=2) as venv:
        venv.reset()
        ids = venv.recv().env_ids
        sent = []

        def ctrl_c(*_):
            if len(sent) < 2:  # two Ctrl-C, 0.1 s apart, both during env 1's step (here)
                sent.append(1)
                os.kill(os.getpid(), signal.SIGINT)

        old = signal.signal(signal.SIGALRM, ctrl_c)
        signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
        try:
            began = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                venv.send(np.ones((2, 1), dtype=np.int64), ids)
            assert time.monotonic() - began < 0.45  # at once, not after the env's step
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        with pytest.raises(WorkerError, match=r"interrupted twice while this process stepped its block "
                                              r"\(step_in_main\): the block is incomplete; close\(\) this"):
            venv.recv()
        with pytest.raises(WorkerError, match="interrupted twice"):
            venv.step(np.ones((2, 1), dtype=np.int64))


def test_an_env_error_in_this_process_s_block_under_the_pool_names_it():
    fns = [DyingAgentEnv] * 2 + [functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    ones = np.ones((2, 3), dtype=np.int64)
    with SubprocVecEnv(fns, num_workers=1, step_in_main=True, batch_size=2) as venv:
        venv.reset()
        venv.send(ones, venv.recv().env_ids)  # envs 0, 1 to the worker
        venv.send(ones, venv.recv().env_ids)  # envs 2, 3 here: env 2 raises, env 3 steps
        with pytest.raises(WorkerError) as caught:
            venv.recv()
        assert (caught.value.env_index, caught.value.worker, caught.value.command) == (2, 1, "step")
        assert str(caught.value).startswith("env 2 (worker 1) failed in step: RuntimeError('scripted failure at step 1')")
        venv.batch_size = 3  # the others go on (in the order their answers were read)
        assert sorted(venv.recv().env_ids.tolist()) == [0, 1, 3]
        venv.batch_size = 1
        with pytest.raises(mv.PoolNotReadyError, match=r"envs \[2\] raised and wait for reset\(\)"):
            venv.recv()
        venv.reset(env_ids=[2])
        assert [venv.recv().env_ids.tolist() for _ in range(4)] == [[0], [1], [2], [3]]


def test_a_first_ctrl_c_in_the_main_block_waits_for_its_step_to_be_whole(sigint_raises):
    # The main process's block (envs 2, 3) steps inside step_async: Ctrl-C arrives during env 2's step.
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.3)] * 4, num_workers=1,
                       step_in_main=True, env_seed=0) as venv:
        venv.reset()
        old = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        signal.setitimer(signal.ITIMER_REAL, 0.15)
        try:
            with pytest.raises(KeyboardInterrupt):
                venv.step(np.ones((4, 1), dtype=np.int64))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        # Both blocks stepped with the interrupted step's actions, once; the next step goes on.
        r = venv.step(np.full((4, 1), 2))
        assert venv.get_attr("seen") == [[1, 2]] * 4
        assert r.obs[:, 0, 0].tolist() == [3.0] * 4


def test_restart_on_error_rebuilds_an_env_of_this_process_s_block_under_the_pool():
    fns = [DyingAgentEnv] * 2 + [functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with SubprocVecEnv(fns, num_workers=1, step_in_main=True, batch_size=4, restart_on_error=1) as venv:
        r0 = venv.reset()
        venv.send(np.ones((4, 3), dtype=np.int64), venv.recv().env_ids)
        r = venv.recv()
        k = r.env_ids.tolist().index(2)
        assert r.done[k] and r.truncated[k].all() and r.infos[k]["restarted"] and "scripted failure" in r.infos[k]["error"]
        np.testing.assert_array_equal(r.final_obs[k], r0.obs[2])
        assert not r.done[[j for j in range(4) if j != k]].any()


def test_timeout_bounds_the_workers_but_not_this_process_s_block():
    # The documented limit (docs/backends/subproc.md): this process's envs run inline,
    # so a slow one there is waited for; a worker that overruns is declared hung.
    slow_here = [functools.partial(SlowRecordingEnv, delay=d) for d in (0.0, 1.0)]
    with SubprocVecEnv(slow_here, num_workers=1, step_in_main=True, timeout=0.3) as venv:
        venv.reset()
        r = venv.step(np.ones((2, 1), dtype=np.int64))  # 1 s in this process's block: no error
        assert r.obs[:, 0, 0].tolist() == [1.0, 1.0]
    slow_there = [functools.partial(SlowRecordingEnv, delay=d) for d in (3.0, 0.0)]
    with SubprocVecEnv(slow_there, num_workers=1, step_in_main=True, timeout=0.3) as venv:
        venv.reset()
        began = time.monotonic()
        with pytest.raises(WorkerError, match=r"worker\(s\) 0 did not answer 'step' within timeout=0.3 s"):
            venv.step(np.ones((2, 1), dtype=np.int64))
        assert time.monotonic() - began < 2.0


def test_config_vec_step_in_main():
    from marl_vec.tools.config import ConfigError

    cfg = {"env": {"family": "gym", "id": "CartPole-v1"},
           "vec": {"num_envs": 4, "backend": "subproc", "num_workers": 1, "step_in_main": True}}
    with mv.make(cfg) as venv:
        assert venv.step_in_main and venv.num_workers == 1
    with pytest.raises(ConfigError, match=r"vec.step_in_main applies to the subproc backend, not to backend 'dummy'"):
        mv.make({**cfg, "vec": {"num_envs": 4, "backend": "dummy", "step_in_main": True}})

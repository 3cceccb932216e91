"""SubprocVecEnv faults: an env raising, a worker killed or hung, an interrupt; never a hang,
always the env index, the worker and the original traceback."""

from __future__ import annotations

import functools
import os
import signal
import threading

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerDiedError, WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv
from tests.helpers.sigint import interrupted


def available(result: mv.StepResult) -> np.ndarray:
    return result.avail_actions.argmax(axis=2).astype(np.int64)


class ExitingEnv(DyingAgentEnv):
    """Ends its process at step ``exit_at``, as a segfault or the OOM killer would."""

    def __init__(self, exit_at: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.exit_at = exit_at

    def step(self, actions):
        if self.t + 1 == self.exit_at:
            os._exit(3)
        return super().step(actions)


class SleepyEnv(DyingAgentEnv):
    def __init__(self, delay: float = 30.0, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, actions):
        import time

        time.sleep(self.delay)
        return super().step(actions)


def broken_env():
    raise ValueError("bad scenario name 'nope'")


def assert_all_gone(pids):
    import psutil

    for pid in pids:
        assert not psutil.pid_exists(pid), f"worker {pid} outlived close()"


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_env_raising_at_step_k_names_env_worker_and_traceback(start_method):
    fns = [DyingAgentEnv] * 3 + [functools.partial(FailingEnv, fail_at=3)]
    venv = SubprocVecEnv(fns, num_workers=2, start_method=start_method)
    r = venv.reset()
    for _ in range(2):
        r = venv.step(available(r))
    with pytest.raises(WorkerError) as caught:
        venv.step(available(r))
    err = caught.value
    assert (err.env_index, err.worker, err.command) == (3, 1, "step")
    message = str(err)
    assert message.startswith("env 3 (worker 1) failed in step: RuntimeError('scripted failure at step 3')")
    # The original traceback, from the env's own code, formatted in the worker.
    assert "--- original traceback (in the worker process) ---" in message
    assert 'scripted_envs.py", line' in message and "in step" in message
    assert "raise RuntimeError(f\"scripted failure at step {self.fail_at}\")" in err.traceback_text
    # The worker survived its env's error: the batch can still be reset and stepped.
    r = venv.reset()
    venv.step(available(r))
    venv.close()
    assert_all_gone(venv.worker_pids)


def test_env_failing_to_build_fails_construction_and_cleans_up():
    fns = [DyingAgentEnv] * 3 + [broken_env]
    with pytest.raises(WorkerError, match=r"^env 3 \(worker 1\) failed in start: ValueError\(\"bad scenario name 'nope'\"\)"):
        SubprocVecEnv(fns, num_workers=2)
    import psutil

    # Only multiprocessing's own helper (resource tracker) may remain a child.
    children = psutil.Process().children()
    assert all("resource_tracker" in " ".join(p.cmdline()) or "forkserver" in " ".join(p.cmdline()) for p in children), \
        [p.cmdline() for p in children]


def test_envs_with_different_specs_are_refused_naming_the_env():
    from mpe2 import simple_spread_v3

    fns = [functools.partial(simple_spread_v3.parallel_env, N=3)] * 2 + [functools.partial(simple_spread_v3.parallel_env, N=2)]
    with pytest.raises(ValueError, match=r"^env 2 has agents=.* but env 0 has agents=.*same spec"):
        SubprocVecEnv(fns, num_workers=2)


def test_worker_killed_by_sigkill_is_reported_not_awaited():
    venv = SubprocVecEnv([DyingAgentEnv] * 4, num_workers=2)
    r = venv.reset()
    victim = venv.worker_pids[1]
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(WorkerDiedError, match=rf"^worker 1 failed in step: worker process {victim} \(envs 2\.\.3\) was killed by SIGKILL"):
        venv.step(available(r))
    # Every later call says so at once, instead of talking to a dead pipe.
    with pytest.raises(WorkerDiedError, match="cannot continue: close"):
        venv.reset()
    venv.close()
    venv.close()
    assert_all_gone(venv.worker_pids)


def test_worker_killed_while_idle_between_steps():
    venv = SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2)
    r = venv.reset()
    os.kill(venv.worker_pids[0], signal.SIGKILL)
    with pytest.raises(WorkerDiedError, match=r"^worker 0 failed in step"):
        venv.step(available(r))
    venv.close()


def test_worker_exiting_in_step_reports_exit_code():
    fns = [DyingAgentEnv, functools.partial(ExitingEnv, exit_at=2)]
    with SubprocVecEnv(fns, num_workers=2) as venv:
        r = venv.step(available(venv.reset()))
        with pytest.raises(WorkerDiedError, match=r"worker 1 failed in step: .*\(envs 1\.\.1\) exited with code 3"):
            venv.step(available(r))


FIELDS = ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done")


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_dead_worker_is_replaced_within_restart_on_error(start_method):
    import psutil

    fns = [DyingAgentEnv] * 4
    with SubprocVecEnv(fns, env_seed=0, num_workers=2, restart_on_error=1, start_method=start_method) as venv, \
            mv.DummyVecEnv(fns, env_seed=0) as ref:
        r, d = venv.reset(), ref.reset()
        before, d = venv.step(available(r)), ref.step(available(d))
        victim = venv.worker_pids[1]
        os.kill(victim, signal.SIGKILL)
        r, d = venv.step(available(before)), ref.step(available(d))
        # Worker 0's envs step on as if nothing happened.
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(r, name)[:2], getattr(d, name)[:2], err_msg=name)
        # Worker 1's envs end their episodes as truncated, with the rows the dead worker left.
        assert r.done[2:].all() and r.truncated[2:].all() and not r.terminated[2:].any()
        assert (r.reward[2:] == 0).all() and "episode" not in r.infos[2]
        for i in (2, 3):
            info = r.infos[i]
            assert info["restarted"] and info["worker_restarts"] == 1
            assert f"worker process {victim} (envs 2..3) was killed by SIGKILL" in info["error"]
        np.testing.assert_array_equal(r.final_obs[2:], before.obs[2:])
        np.testing.assert_array_equal(r.final_avail_actions[2:], before.avail_actions[2:])
        # A new worker with new envs at their first step: all agents alive.
        new = venv.worker_pids[1]
        assert new != victim and psutil.pid_exists(new) and not psutil.pid_exists(victim)
        assert r.agent_mask[2:].all() and venv.worker_restarts == [0, 1]
        r = venv.step(available(r))
        assert not any(info.get("restarted") for info in r.infos)
        os.kill(new, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"killed by SIGKILL.*after 1 replacement\(s\) of this worker"):
            venv.step(available(r))
        pids = venv.worker_pids
    assert_all_gone(pids)


def test_worker_dying_inside_a_step_is_replaced_then_reported_when_the_budget_is_spent():
    # The rebuilt env exits at its second step again: one replacement, then the error.
    fns = [DyingAgentEnv, functools.partial(ExitingEnv, exit_at=2)]
    with SubprocVecEnv(fns, env_seed=0, num_workers=2, restart_on_error=1) as venv:
        r = venv.step(available(venv.reset()))
        r = venv.step(available(r))
        assert r.done[1] and r.truncated[1].all() and "exited with code 3" in r.infos[1]["error"]
        assert not r.done[0]
        r = venv.step(available(r))
        with pytest.raises(WorkerDiedError, match=r"exited with code 3.*after 1 replacement"):
            venv.step(available(r))


def test_dead_worker_is_not_replaced_outside_same_step_and_fast():
    with SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2, restart_on_error=3, autoreset="next_step") as venv:
        r = venv.reset()
        os.kill(venv.worker_pids[0], signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match="replaced only in the same_step and fast autoreset modes, "
                                                  "not in 'next_step'"):
            venv.step(available(r))


def test_hung_worker_times_out_and_close_kills_it():
    fns = [DyingAgentEnv, functools.partial(SleepyEnv, delay=60.0)]
    venv = SubprocVecEnv(fns, num_workers=2, timeout=2.0, close_timeout=0.5)
    r = venv.reset()
    with pytest.raises(WorkerError, match=r"worker\(s\) 1 did not answer 'step' within timeout=2\.0 s"):
        venv.step(available(r))
    with pytest.raises(WorkerError, match="did not answer"):
        venv.reset()  # no second wait on a hung worker
    venv.close()  # terminates the sleeping worker after close_timeout
    assert_all_gone(venv.worker_pids)


def test_keyboard_interrupt_during_step_wait():
    fns = [DyingAgentEnv, functools.partial(SleepyEnv, delay=2.0)]
    venv = SubprocVecEnv(fns, num_workers=2)
    r = venv.reset()
    venv.step_async(available(r))
    interrupted(venv.step_wait, after=0.2)
    # The workers ignored the interrupt; the answer owed by the slow worker is
    # drained before the next command, so the batch stays usable ...
    r = venv.reset(seed=1)
    assert r.obs[:, 0, 0].tolist() == [0.0, 0.0]
    # ... and closes cleanly.
    venv.close()
    assert_all_gone(venv.worker_pids)


def test_bad_arguments_name_what_is_allowed():
    fns = [DyingAgentEnv] * 2
    with pytest.raises(ValueError, match=r"num_workers must be an integer in \[1, num_envs=2\], got 3"):
        SubprocVecEnv(fns, num_workers=3)
    with pytest.raises(ValueError, match=r"num_workers must be an integer in \[1, num_envs=2\], got 0"):
        SubprocVecEnv(fns, num_workers=0)
    with pytest.raises(ValueError, match=r"unknown start_method 'thread'; allowed here: .*fork.*spawn"):
        SubprocVecEnv(fns, start_method="thread")
    # multiprocessing's words too: SB3's test_subproc_start_method matches them
    with pytest.raises(ValueError, match=r"cannot find context for 'illegal_method'"):
        SubprocVecEnv(fns, start_method="illegal_method")
    with pytest.raises(ValueError, match=r"restart_on_error must be an integer >= 0, got -1"):
        SubprocVecEnv(fns, restart_on_error=-1)
    with pytest.raises(ValueError, match=r"timeout must be a number of seconds > 0, or None, got 0"):
        SubprocVecEnv(fns, timeout=0)
    with pytest.raises(ValueError, match="at least one env_fn"):
        SubprocVecEnv([])
    with pytest.raises(TypeError, match=r"env_fns\[1\] is a str, not a zero-argument callable"):
        SubprocVecEnv([DyingAgentEnv, "CartPole-v1"])
    with pytest.raises(ValueError, match=r"unknown autoreset mode 'sometimes'; allowed: same_step"):
        SubprocVecEnv(fns, autoreset="sometimes")


def test_unpicklable_env_fn_under_spawn_is_a_clear_error():
    lock = threading.Lock()

    def fn():
        with lock:
            return DyingAgentEnv()

    with pytest.raises(TypeError, match=r"env_fns\[0:1\] cannot be pickled for start_method='spawn'.*start_method='fork'"):
        SubprocVecEnv([fn, fn], num_workers=2, start_method="spawn")
    # Under fork the same closure is fine.
    with SubprocVecEnv([fn, fn], num_workers=2, start_method="fork") as venv:
        venv.reset()


def test_actions_are_validated_before_reaching_workers():
    with SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2) as venv:
        r = venv.reset()
        bad = available(r)
        bad[1, 2] = 0  # a2's action 0 is unavailable at t=0
        with pytest.raises(ValueError, match=r"action 0 for env 1, agent 'a2' is not available"):
            venv.step(bad)
        with pytest.raises(ValueError, match=r"actions must have shape \(2, 3\)"):
            venv.step(np.zeros((3, 3), dtype=np.int64))
        venv.step(available(r))  # nothing was sent: the workers are in step with us

"""The async pool's faults: an env that raises is named and leaves the pool until
reset(); a worker that dies with envs in flight is replaced and each of its envs ends
its episode as truncated at its next result; a hung worker times out; Ctrl-C in recv()
loses no result; close() with steps in flight leaves nothing behind."""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import time

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerDiedError, WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.pool_driver import DelayedEnv, policy
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv, SlowRecordingEnv
from tests.backends.test_subproc_cleanup import gone

backend = backends.backend_fixture(backends.POOL_BACKENDS)
ONES = np.ones((2, 3), dtype=np.int64)


def _ray_error() -> type:
    if importlib.util.find_spec("ray") is None:
        return WorkerError
    from marl_vec.vec.ray.vec_env import RayWorkerError

    return RayWorkerError


def test_failing_env_is_named_and_reset_brings_it_back(backend):
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=2), DyingAgentEnv]
    with backends.make(backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        with pytest.raises((WorkerError, _ray_error()), match="env 2") as info:
            for _ in range(40):  # env 2 raises at its second step (a fast block may lap its block)
                r = venv.recv()
                venv.send(np.stack([policy(r.avail_actions[k], i, 0) for k, i in enumerate(r.env_ids)]), r.env_ids)
        assert info.value.env_index == 2
        r = venv.reset()
        assert r.obs[:, 0, 0].tolist() == [0.0] * 4
        assert sorted(venv.recv().env_ids.tolist() + venv.recv().env_ids.tolist()) == [0, 1, 2, 3]


def test_a_failing_env_leaves_the_others_going():
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with SubprocVecEnv(fns, num_workers=2, batch_size=1) as venv:
        venv.reset()
        received = [venv.recv().env_ids[0] for _ in range(4)]
        venv.send(np.ones((4, 3), dtype=np.int64), received)
        got, raised = [], 0
        for _ in range(4):
            try:
                got.append(int(venv.recv().env_ids[0]))
            except WorkerError as exc:
                assert exc.env_index == 2 and "scripted failure at step 1" in str(exc)
                raised += 1
        assert raised == 1 and sorted(got) == [0, 1, 3]
        with pytest.raises(mv.PoolNotReadyError, match=r"envs \[2\] raised and wait for reset\(\)"):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"env 2 cannot be stepped, it raised"):
            venv.send(ONES[:1], [2])


def test_dead_worker_is_replaced_and_its_envs_restart_at_their_next_result():
    # Worker 1 hosts envs 2 (1 s a step: surely in flight at the kill) and 3 (held by the caller).
    fns = [lambda: DelayedEnv(0.0), lambda: DelayedEnv(0.0), lambda: DelayedEnv(1.0), lambda: DelayedEnv(0.0)]
    with SubprocVecEnv(fns, num_workers=2, batch_size=2, restart_on_error=1) as venv:
        r0 = venv.reset()
        venv.send(ONES, venv.recv().env_ids)  # envs 0, 1
        assert venv.recv().env_ids.tolist() == [2, 3]
        venv.send(ONES[:1], [2])
        os.kill(venv.worker_pids[1], signal.SIGKILL)
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1] and not r.done.any() and not any("restarted" in i for i in r.infos)
        venv.send(ONES[:1], [3])  # to the dead worker: it restarts too
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3] and venv.worker_restarts == [0, 1]
        with open(f"/proc/{venv.worker_pids[1]}/status") as status:  # the pool holds signals while reading;
            blocked = next(line for line in status if line.startswith("SigBlk:"))  # the new worker must not
        assert int(blocked.split()[1], 16) == 0
        assert r.done.all() and r.truncated.all() and not r.terminated.any() and not r.reward.any()
        for k, i in enumerate(r.env_ids.tolist()):
            info = r.infos[k]
            assert info["restarted"] and info["worker_restarts"] == 1 and "killed by SIGKILL" in info["error"]
            assert "episode" not in info  # its returns died with the process
            np.testing.assert_array_equal(r.final_obs[k], r0.obs[i])  # what the caller last saw
            assert r.obs[k, 0, 0] == 0.0  # the new env's reset row
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)  # the new worker steps them
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3] and not r.done.any() and r.obs[:, 0, 0].tolist() == [1.0, 1.0]
        assert venv.get_attr("t") == [1, 1, 1, 1]


def test_dead_worker_without_restarts_raises():
    fns = [lambda: DelayedEnv(0.0)] * 2 + [lambda: DelayedEnv(1.0)] * 2
    with SubprocVecEnv(fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        for _ in range(2):
            venv.send(ONES, venv.recv().env_ids)
        os.kill(venv.worker_pids[1], signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"envs 2..3\) was killed by SIGKILL"):
            venv.recv()
            venv.recv()


def test_hung_worker_times_out():
    fns = [lambda: DelayedEnv(0.0)] * 2 + [lambda: DelayedEnv(5.0)] * 2
    with SubprocVecEnv(fns, num_workers=2, batch_size=3, timeout=1.0) as venv:
        venv.reset()
        venv.send(np.ones((3, 3), dtype=np.int64), venv.recv().env_ids)  # envs 0, 1, 2
        r = venv.recv()  # env 3, then the fast 0 and 1
        assert r.env_ids.tolist() == [3, 0, 1]
        venv.send(np.array([[1, 1, 1], [2, 2, 2], [2, 2, 2]]), r.env_ids)  # env 3 at t=0, envs 0, 1 at t=1
        with pytest.raises(WorkerError, match=r"worker\(s\) 1 did not answer 'step' within timeout=1.0 s"):
            venv.recv()
        began = time.monotonic()  # the batch is broken: a step says so at once, it waits for no one
        with pytest.raises(WorkerError, match=r"worker\(s\) 1 did not answer 'step' within timeout=1.0 s"):
            venv.step(np.ones((4, 3), dtype=np.int64))
        assert time.monotonic() - began < 0.5


def _interrupt(*_):
    raise KeyboardInterrupt


def test_ctrl_c_in_recv_loses_no_result():
    # Each worker steps its two envs one after the other, 0.4 s each.
    with SubprocVecEnv([functools.partial(SlowRecordingEnv, delay=0.4)] * 4, num_workers=2, batch_size=2) as venv:
        venv.reset()
        for _ in range(2):
            r = venv.recv()
            venv.send(np.array([[1], [2]]) if r.env_ids[0] == 0 else np.array([[0], [1]]), r.env_ids)
        old = signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                venv.recv()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        first, second = venv.recv(), venv.recv()
        assert sorted(first.env_ids.tolist()) == [0, 2] and sorted(second.env_ids.tolist()) == [1, 3]
        obs = {int(i): float(o) for r in (first, second) for i, o in zip(r.env_ids, r.obs[:, 0, 0])}
        assert obs == {0: 1.0, 1: 2.0, 2: 0.0, 3: 1.0}
        assert venv.get_attr("seen") == [[1], [2], [0], [1]]  # each env stepped once, with its own action


class _SlowAttrEnv(SlowRecordingEnv):
    @property
    def slow(self) -> int:
        time.sleep(0.5)
        return 1


@pytest.mark.parametrize("step_in_main", [False, True])
def test_answers_an_interrupted_call_owes_are_not_taken_for_pool_results(step_in_main, sigint_raises):
    # Ctrl-C during get_attr() leaves its answers owed; the pool's next send() must not read
    # them as the envs' step results (it did: env 0's result came with get_attr's answer as its
    # info and env 1 was handed out unstepped)
    with SubprocVecEnv([functools.partial(_SlowAttrEnv, delay=0.0)] * 2, num_workers=1, step_in_main=step_in_main,
                       batch_size=2) as venv:
        venv.reset()
        ids = venv.recv().env_ids
        old = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                venv.get_attr("slow")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        venv.send(np.array([[1], [2]]), ids)
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [0, 1] and r.infos == [{}, {}]
        assert {int(i): float(o) for i, o in zip(r.env_ids, r.obs[:, 0, 0])} == {0: 1.0, 1: 2.0}
        assert venv.get_attr("seen") == [[1], [2]]


def test_close_with_steps_in_flight_leaves_nothing():
    venv = SubprocVecEnv([lambda: DelayedEnv(0.5)] * 4, num_workers=2, batch_size=2)
    pids, shm = list(venv.worker_pids), venv.buffers.shm_name
    venv.reset()
    for _ in range(2):
        venv.send(ONES, venv.recv().env_ids)
    venv.close()
    alive, shm_left = gone(pids, shm, wait=5.0)
    assert alive == [] and not shm_left


def test_an_env_that_raises_restarts_within_its_budget_and_goes_on():
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=2), DyingAgentEnv]
    with SubprocVecEnv(fns, num_workers=2, batch_size=1, restart_on_error=1) as venv:
        venv.reset()
        steps = [0] * 4
        restarted = []
        while min(steps) < 3:  # the rebuilt env 2 would fail at its own second step: it stops at 3
            r = venv.recv()
            i = int(r.env_ids[0])
            if r.infos[0].get("restarted"):
                restarted.append(i)
                assert r.done[0] and r.truncated[0].all() and "scripted failure at step 2" in r.infos[0]["error"]
                assert "episode" in r.infos[0] and r.infos[0]["episode"]["restarts"] == 1
            steps[i] += 1
            if i != 2 or steps[i] < 3:
                venv.send(policy(r.avail_actions[0], i, steps[i])[None], [i])
        assert restarted == [2]
        assert venv.episode_statistics()["restarts"] > 0


def test_dead_linked_ray_actor_is_replaced_and_its_envs_restart(ray_cluster):  # noqa: F811
    import ray

    fns = [lambda: DelayedEnv(0.0), lambda: DelayedEnv(0.0), lambda: DelayedEnv(1.0), lambda: DelayedEnv(0.0)]
    with backends.make("ray-auto", fns, num_workers=2, batch_size=2, restart_on_error=1) as venv:
        assert venv.linked == [True, True]
        r0 = venv.reset()
        venv.send(ONES, venv.recv().env_ids)  # envs 0, 1
        assert venv.recv().env_ids.tolist() == [2, 3]
        venv.send(ONES[:1], [2])  # 1 s: in flight at the kill
        ray.kill(venv.actors[1])
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1] and not any("restarted" in i for i in r.infos)
        venv.send(ONES[:1], [3])
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3] and venv.actor_restarts == [0, 1] and venv.linked == [True, True]
        assert r.done.all() and r.truncated.all() and not r.reward.any()
        for k, i in enumerate(r.env_ids.tolist()):
            assert r.infos[k]["restarted"] and r.infos[k]["actor_restarts"] == 1
            np.testing.assert_array_equal(r.final_obs[k], r0.obs[i])
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3] and r.obs[:, 0, 0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("call", ["reset", "step"])
def test_an_error_in_flight_is_dropped_by_the_next_reset_or_step(backend, call):
    # Issue 23, bug 2: env 2 raises in a pool step sent but never received. The next
    # reset() or step() drops that result (its error too) and does its own work.
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with backends.make(backend, fns, num_workers=2, batch_size=4) as venv:
        venv.reset()
        venv.send(np.ones((4, 3), dtype=np.int64), venv.recv().env_ids)
        if call == "reset":
            r = venv.reset()
            assert r.obs[:, 0, 0].tolist() == [0.0] * 4 and venv.get_attr("t") == [0, 0, 0, 0]
        else:  # every env stepped once more (env 2's second step does not raise); a Ray actor
            # answering Ray calls steps its block in one call, and env 3 after env 2's error too
            r = venv.step(np.full((4, 3), 2, dtype=np.int64))
            assert venv.get_attr("t") == [2, 2, 1, 2] and not r.done.any()
        assert venv.get_attr("steps_taken", indices=[2]) == [1 if call == "reset" else 2]


def test_a_partial_reset_that_leaves_out_a_failed_env_keeps_it_out_of_the_pool():
    # Issue 23: "the failed env must stay out of the pool until it is reset".
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with SubprocVecEnv(fns, num_workers=2, batch_size=1) as venv:
        venv.reset()
        received = [int(venv.recv().env_ids[0]) for _ in range(4)]
        venv.send(np.ones((4, 3), dtype=np.int64), received)
        with pytest.raises(WorkerError, match="env 2"):
            for _ in range(4):
                venv.recv()
        venv.reset(env_ids=[0, 1])
        handed = [int(venv.recv().env_ids[0]) for _ in range(3)]
        assert sorted(handed) == [0, 1, 3]  # env 3: ready from its step; env 2: out
        with pytest.raises(mv.PoolNotReadyError, match=r"envs \[2\] raised and wait for reset\(\)"):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"env 2 cannot be stepped, it raised"):
            venv.send(ONES[:1], [2])
        venv.reset(env_ids=[2])  # every env ready again, env 2 with them
        assert [int(venv.recv().env_ids[0]) for _ in range(4)] == [0, 1, 2, 3]


two_errors_backend = backends.backend_fixture(("subproc", "subproc-main", "ray-auto"))  # dummy: the same rule (dummy.py)


@pytest.mark.parametrize("num_workers", [1, 2])
def test_two_errors_read_in_one_recv_are_each_raised(two_errors_backend, num_workers):
    # The fuzzer's SECOND_POOL_ERROR_DROPPED: envs 1 and 2 raise in the same pool step
    # (one worker: both answers in one read; two workers: both pipes in one wait). The
    # recv() that reads them raises env 1's, the next env 2's (before the ready batch).
    # ray-ray (whole-block steps) raises one error for the block: not this rule.
    backend = two_errors_backend
    fns = [DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), functools.partial(FailingEnv, fail_at=1),
           DyingAgentEnv]
    with backends.make(backend, fns, num_workers=num_workers, batch_size=2) as venv:
        venv.reset()
        received = venv.recv().env_ids.tolist() + venv.recv().env_ids.tolist()
        venv.send(np.ones((4, 3), dtype=np.int64), received)
        time.sleep(0.5)  # every answer waits: the next recv() reads them together
        errors = (WorkerError, _ray_error())
        named = []
        for _ in range(2):
            with pytest.raises(errors, match="scripted failure at step 1") as info:
                venv.recv()
            named.append(info.value.env_index)
        assert named == [1, 2]
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [0, 3] and r.obs[:, 0, 0].tolist() == [1.0, 1.0]
        with pytest.raises(mv.PoolNotReadyError, match=r"envs \[1, 2\] raised and wait for reset\(\)"):
            venv.recv()


def test_an_error_read_but_not_raised_is_dropped_by_reset(two_errors_backend):
    fns = [DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), functools.partial(FailingEnv, fail_at=1),
           DyingAgentEnv]
    with backends.make(two_errors_backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        received = venv.recv().env_ids.tolist() + venv.recv().env_ids.tolist()
        venv.send(np.ones((4, 3), dtype=np.int64), received)
        time.sleep(0.5)
        with pytest.raises((WorkerError, _ray_error()), match="env 1"):
            venv.recv()
        venv.reset()  # drops env 2's error with the other results, as an error in flight
        assert [venv.recv().env_ids.tolist() for _ in range(2)] == [[0, 1], [2, 3]]

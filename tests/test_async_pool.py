"""The async pool of SubprocVecEnv (send/recv, first-ready batches): every env's
trajectory equals its synchronous one, fast blocks come first, misuse raises, a failing
env is named, and close() with steps in flight leaves nothing behind."""

from __future__ import annotations

import os
import signal
import functools
import importlib.util
import time

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.errors import WorkerError
from marl_vec.vec.pool import PoolNotReadyError
from marl_vec.vec.subproc import SubprocVecEnv
from tests import backends
from tests.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.scripted_envs import DyingAgentEnv, FailingEnv
from tests.test_subproc_cleanup import gone

STEPS = 9  # per env: crosses an episode end (episode_len 6) and an agent's death


backend = backends.backend_fixture(backends.PROCESS_BACKENDS)


class DelayedEnv(DyingAgentEnv):
    """DyingAgentEnv whose step sleeps ``delay`` s: envs of different speeds."""

    def __init__(self, delay: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, actions):
        time.sleep(self.delay)
        return super().step(actions)


def policy(avail: np.ndarray, env: int, t: int) -> np.ndarray:
    """A per-env action sequence: agent a takes the first available action from (env + t + a) on."""
    n = avail.shape[-1]
    out = np.zeros(avail.shape[0], dtype=np.int64)
    for a in range(avail.shape[0]):
        for k in range(n):
            action = (env + t + a + k) % n
            if avail[a, action]:
                out[a] = action
                break
    return out


def record(traj: list, r, k: int) -> None:
    done = bool(r.done[k])
    ep = r.infos[k].get("episode")
    traj.append((r.obs[k].copy(), r.reward[k].copy(), r.terminated[k].copy(), r.truncated[k].copy(), done,
                 r.agent_mask[k].copy(), r.final_obs[k].copy() if done else None,
                 None if ep is None else (ep["return"], ep["length"])))


def sync_trajectories(fns, steps: int) -> list[list]:
    with mv.DummyVecEnv(fns) as venv:
        r = venv.reset()
        trajs: list[list] = [[] for _ in fns]
        for i in range(len(fns)):
            record(trajs[i], r, i)
        for t in range(steps):
            actions = np.stack([policy(r.avail_actions[i], i, t) for i in range(len(fns))])
            r = venv.step(actions)
            for i in range(len(fns)):
                record(trajs[i], r, i)
        return trajs


def pool_trajectories(fns, steps: int, backend: str = "subproc", **kwargs) -> tuple[list[list], list[int]]:
    with backends.make(backend, fns, **kwargs) as venv:
        venv.reset()
        trajs: list[list] = [[] for _ in fns]
        order: list[int] = []
        while min(len(tr) for tr in trajs) < steps + 1:
            r = venv.recv()
            assert len(r.env_ids) == venv.batch_size
            actions = []
            for k, i in enumerate(r.env_ids.tolist()):
                if len(trajs[i]) < steps + 1:
                    record(trajs[i], r, k)
                order.append(i)
                actions.append(policy(r.avail_actions[k], i, len(trajs[i]) - 1))
            venv.send(np.stack(actions), r.env_ids)
        return trajs, order


def assert_same(a: list[list], b: list[list]) -> None:
    for i, (ta, tb) in enumerate(zip(a, b)):
        assert len(ta) >= len(tb)
        for t, (x, y) in enumerate(zip(ta, tb)):
            for field, u, v in zip(("obs", "reward", "terminated", "truncated", "done", "mask", "final_obs",
                                    "episode"), x, y):
                if isinstance(u, np.ndarray):
                    np.testing.assert_array_equal(u, v, err_msg=f"env {i} step {t} {field}")
                else:
                    assert u == v, f"env {i} step {t} {field}: {u} != {v}"


def test_each_env_trajectory_equals_its_synchronous_one(backend):
    delays = [0.0, 0.0, 0.0, 0.004, 0.004, 0.004]  # worker 1 is slower: blocks arrive out of turn
    fns = [functools.partial(DelayedEnv, d) for d in delays]
    expected = sync_trajectories(fns, STEPS)
    # Two workers: the test cluster has 2 CPUs, one per actor.
    got, _ = pool_trajectories(fns, STEPS, backend, num_workers=2, batch_size=3)
    assert_same(got, expected)


def test_each_env_trajectory_equals_its_synchronous_one_mpe2():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    fns = [lambda: simple_spread_v3.parallel_env(max_cycles=5, continuous_actions=False)] * 4
    expected = sync_trajectories(fns, 7)
    got, _ = pool_trajectories(fns, 7, num_workers=2, batch_size=2)
    assert_same(got, expected)


def test_fast_envs_come_first(backend):
    fns = [functools.partial(DelayedEnv, 0.0)] * 2 + [functools.partial(DelayedEnv, 0.3)] * 2
    with backends.make(backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        fast = venv.recv()
        assert fast.env_ids.tolist() == [0, 1]  # reset results: worker order
        slow = venv.recv()
        assert slow.env_ids.tolist() == [2, 3]
        venv.send(np.zeros((2, 3), dtype=np.int64) + 1, slow.env_ids)  # the slow block steps (0.3 s)
        venv.send(np.zeros((2, 3), dtype=np.int64) + 1, fast.env_ids)
        for _ in range(3):  # the fast block laps the slow one
            fast = venv.recv()
            assert fast.env_ids.tolist() == [0, 1]
            venv.send(np.stack([policy(fast.avail_actions[k], k, 1) for k in range(2)]), fast.env_ids)
        r = venv.recv()
        assert r.env_ids.tolist() in ([0, 1], [2, 3])


def test_default_batch_size_is_synchronous_and_mixing_drains():
    fns = [lambda: DyingAgentEnv()] * 4
    with SubprocVecEnv(fns, num_workers=2) as venv:
        assert venv.batch_size == 4
        r0 = venv.reset()
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1, 2, 3]
        np.testing.assert_array_equal(r.obs, r0.obs)
        venv.send(np.stack([policy(r.avail_actions[i], i, 0) for i in range(4)]), r.env_ids)
        # A synchronous call drains the pool step in flight (its result is dropped).
        assert venv.get_attr("t") == [1, 1, 1, 1]
        with pytest.raises(PoolNotReadyError, match="no envs are stepping or ready"):
            venv.recv()
        r = venv.step(np.stack([policy(venv.buffers.avail_actions[i], i, 1) for i in range(4)]))
        assert venv.recv().env_ids.tolist() == [0, 1, 2, 3]  # after a step every env is ready


def test_misuse_raises_clear_errors():
    fns = [lambda: DyingAgentEnv()] * 4
    with pytest.raises(ValueError, match="batch_size must be a multiple of the block size"):
        SubprocVecEnv(fns, num_workers=2, batch_size=3)
    with pytest.raises(ValueError, match="same_step"):
        with SubprocVecEnv(fns, num_workers=2, batch_size=2, autoreset="next_step") as venv:
            venv.reset()
            venv.recv()
    with SubprocVecEnv(fns, num_workers=2, batch_size=2) as venv:
        with pytest.raises(PoolNotReadyError, match="call reset"):
            venv.recv()
        venv.reset()
        r = venv.recv()
        with pytest.raises(PoolNotReadyError, match=r"only envs received by recv\(\) and not sent yet.*: \[0, 1\]"):
            venv.send(np.ones((2, 3), dtype=np.int64), [2, 3])
        with pytest.raises(PoolNotReadyError, match="not sent yet"):
            venv.send(np.ones((1, 3), dtype=np.int64), [0])  # half a worker block
        with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
            venv.send(np.ones((4, 3), dtype=np.int64), r.env_ids)
        with pytest.raises(ValueError, match="action 0 for env 0, agent 'a0' is not available"):
            venv.send(np.zeros((2, 3), dtype=np.int64), r.env_ids)
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
        with pytest.raises(PoolNotReadyError, match="not sent yet"):
            venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)  # stepped once per recv()


def test_failing_env_is_named(backend):
    fns = [DyingAgentEnv, DyingAgentEnv, functools.partial(FailingEnv, fail_at=1), DyingAgentEnv]
    with backends.make(backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        for _ in range(2):
            r = venv.recv()
            venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
        with pytest.raises((WorkerError, _ray_error()), match="env 2") as info:
            venv.recv()
            venv.recv()
        assert info.value.env_index == 2


def test_close_with_steps_in_flight_leaves_nothing():
    fns = [lambda: DelayedEnv(0.5)] * 4
    venv = SubprocVecEnv(fns, num_workers=2, batch_size=2)
    pids, shm = list(venv.worker_pids), venv.buffers.shm_name
    venv.reset()
    for _ in range(2):
        r = venv.recv()
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
    venv.close()
    alive, shm_left = gone(pids, shm, wait=5.0)
    assert alive == [] and not shm_left


def test_dead_worker_in_flight_is_replaced():
    # Worker 1's envs take 1 s a step, so the kill surely lands while its block is
    # in flight (a fast block may already have answered before the kill).
    fns = [lambda: DelayedEnv(0.0)] * 2 + [lambda: DelayedEnv(1.0)] * 2
    with SubprocVecEnv(fns, num_workers=2, batch_size=2, restart_on_error=1) as venv:
        venv.reset()
        for _ in range(2):
            r = venv.recv()
            venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
        os.kill(venv.worker_pids[1], signal.SIGKILL)
        got = {}
        for _ in range(2):
            r = venv.recv()
            got.update({i: (bool(r.done[k]), r.infos[k]) for k, i in enumerate(r.env_ids.tolist())})
        assert venv.worker_restarts == [0, 1]
        assert got[2][0] and got[3][0] and got[2][1]["restarted"] and "killed by SIGKILL" in got[2][1]["error"]
        assert not got[0][0] and "restarted" not in got[0][1]


def test_config_batch_size():
    venv = mv.make({"env": {"family": "gym", "id": "CartPole-v1"},
                    "vec": {"num_envs": 4, "backend": "subproc", "num_workers": 2, "batch_size": 2}})
    try:
        assert venv.batch_size == 2
    finally:
        venv.close()
    with pytest.raises(mv.ConfigError, match=r"vec.batch_size \(the async pool\) applies to the subproc and ray backends, not to backend .dummy."):
        mv.make({"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "batch_size": 2}})


def _ray_error() -> type:
    if importlib.util.find_spec("ray") is None:
        return WorkerError
    from marl_vec.vec.ray import RayWorkerError

    return RayWorkerError

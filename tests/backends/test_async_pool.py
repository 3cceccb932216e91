"""The async pool (send/recv, first-ready batches of single envs): every env's trajectory
equals its synchronous one whatever the batch size and the order of sends, a batch gathers
the first finished envs of any worker, envs beyond a batch stay ready, and the pool and
synchronous calls mix."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.pool_driver import STEPS, DelayedEnv, assert_same, policy, pool_trajectories, sync_trajectories
from tests.helpers.scripted_envs import DyingAgentEnv

backend = backends.backend_fixture(backends.POOL_BACKENDS)
ray_backend = backends.backend_fixture(("ray-ray",))  # actors answering Ray calls step whole blocks

DELAYS = [0.0, 0.0, 0.0, 0.004, 0.004, 0.004]  # worker 1 is slower: its envs finish out of turn


@pytest.mark.parametrize("batch_size", [1, 4, 5])
@pytest.mark.parametrize("hold", [False, True])
def test_each_env_trajectory_equals_its_synchronous_one(batch_size, hold):
    fns = [functools.partial(DelayedEnv, d) for d in DELAYS]
    expected = sync_trajectories(fns, STEPS)
    got, batches, stats = pool_trajectories(fns, STEPS, hold=hold, num_workers=2, batch_size=batch_size)
    assert_same(got, expected)
    assert stats["episodes"] >= len(fns)  # every env finished an episode (episode_len 6 < STEPS)


def test_each_env_trajectory_equals_its_synchronous_one_on_every_backend(backend):
    # Ray actors step whole blocks: batches of whole blocks there (3 envs per actor).
    fns = [functools.partial(DelayedEnv, d) for d in DELAYS]
    expected = sync_trajectories(fns, STEPS)
    got, _, _ = pool_trajectories(fns, STEPS, backend, num_workers=2, batch_size=3)
    assert_same(got, expected)


@pytest.mark.parametrize("batch_size", [1, 4, 6])
@pytest.mark.parametrize("hold", [False, True])
def test_dummy_pool_is_synchronous_and_follows_each_trajectory(batch_size, hold):
    """DummyVecEnv's pool steps what send() names at once; recv() hands envs out in the order sent."""
    fns = [functools.partial(DelayedEnv, 0.0) for _ in DELAYS]
    expected = sync_trajectories(fns, STEPS)
    got, batches, stats = pool_trajectories(fns, STEPS, "dummy", hold=hold, batch_size=batch_size)
    assert_same(got, expected)
    assert stats["episodes"] >= len(fns)


def test_dummy_pool_names_a_failing_env_at_recv():
    from tests.helpers.scripted_envs import FailingEnv

    with mv.DummyVecEnv([lambda: DelayedEnv(0.0), lambda: FailingEnv(fail_at=1)], batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        venv.send(np.ones((2, venv.spec.n_agents), np.int64), r.env_ids)
        with pytest.raises(Exception, match="env 1"):
            venv.recv()


@pytest.mark.parametrize("batch_size", [1, 5])
def test_linked_ray_actors_hand_out_single_envs(ray_cluster, batch_size):  # noqa: F811
    fns = [functools.partial(DelayedEnv, d) for d in DELAYS]
    expected = sync_trajectories(fns, STEPS)
    got, batches, _ = pool_trajectories(fns, STEPS, "ray-auto", hold=True, num_workers=2, batch_size=batch_size)
    assert_same(got, expected)


def test_each_env_trajectory_equals_its_synchronous_one_mpe2():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    fns = [lambda: simple_spread_v3.parallel_env(max_cycles=5, continuous_actions=False)] * 4
    expected = sync_trajectories(fns, 7)
    got, _, _ = pool_trajectories(fns, 7, hold=True, num_workers=2, batch_size=3)
    assert_same(got, expected)


def test_a_batch_gathers_the_first_finished_envs_of_any_worker():
    # Worker 0 hosts envs 0 (fast) and 1 (slow), worker 1 envs 2 (fast) and 3 (slow).
    fns = [functools.partial(DelayedEnv, d) for d in (0.0, 0.5, 0.0, 0.5)]
    with SubprocVecEnv(fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        for _ in range(2):
            r = venv.recv()
            venv.send(np.stack([policy(r.avail_actions[k], i, 0) for k, i in enumerate(r.env_ids)]), r.env_ids)
        r = venv.recv()  # the fast env of each worker, before either slow one
        assert sorted(r.env_ids.tolist()) == [0, 2]
        assert r.obs[:, 0, 0].tolist() == [1.0, 1.0]  # one step taken (obs[0] is t)
        r = venv.recv()  # the slow ones, while the caller holds the fast ones
        assert sorted(r.env_ids.tolist()) == [1, 3]


def test_fast_blocks_come_first_on_ray_calls(ray_backend):
    backend = ray_backend
    fns = [functools.partial(DelayedEnv, 0.0)] * 2 + [functools.partial(DelayedEnv, 0.3)] * 2
    with backends.make(backend, fns, num_workers=2, batch_size=2) as venv:
        venv.reset()
        fast = venv.recv()
        assert fast.env_ids.tolist() == [0, 1]  # reset results: env order
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


def test_envs_beyond_a_batch_stay_ready_and_any_received_env_may_be_sent():
    fns = [DyingAgentEnv] * 4
    with SubprocVecEnv(fns, num_workers=2, batch_size=2) as venv:
        r0 = venv.reset()
        first = venv.recv()
        assert first.env_ids.tolist() == [0, 1]  # after reset: env order
        venv.send(policy(first.avail_actions[1], 1, 0)[None], [1])  # one of them, alone
        r = venv.recv()
        assert r.env_ids.tolist() == [2, 3]  # still ready from the reset
        np.testing.assert_array_equal(r.obs, r0.obs[2:])
        with pytest.raises(mv.PoolNotReadyError, match=r"only 0 are ready and 1 stepping; 3 were returned by "
                                                       r"recv\(\) and not sent yet: send\(\) them first"):
            venv.recv()
        venv.send(np.stack([policy(r0.avail_actions[i], i, 0) for i in (3, 0)]), [3, 0])
        r = venv.recv()
        # Env 1 was sent long before and its worker steps env 0 only after it, so env 1 is
        # in this batch of the first two to finish; env 3 (the other worker) may come first.
        ids = r.env_ids.tolist()
        assert 1 in ids and len(set(ids) - {1}) == 1 and set(ids) - {1} <= {0, 3}, ids
        assert r.obs[:, 0, 0].tolist() == [1.0, 1.0]  # one step each (obs[0] is t)
        assert venv.get_attr("t") == [1, 1, 0, 1]  # env 2 was never sent


def test_default_batch_size_is_synchronous_and_a_step_drains():
    fns = [lambda: DyingAgentEnv()] * 4
    with SubprocVecEnv(fns, num_workers=2) as venv:
        assert venv.batch_size == 4
        r0 = venv.reset()
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1, 2, 3]
        np.testing.assert_array_equal(r.obs, r0.obs)
        venv.send(np.stack([policy(r.avail_actions[i], i, 0) for i in range(4)]), r.env_ids)
        # get_attr waits for the pool steps in flight and keeps them (tests/backends/test_async_pool_calls.py);
        # a synchronous step drops their results and starts a new round.
        assert venv.get_attr("t") == [1, 1, 1, 1]
        venv.step(np.stack([policy(venv.buffers.avail_actions[i], i, 1) for i in range(4)]))
        assert venv.recv().env_ids.tolist() == [0, 1, 2, 3]  # after a step every env is ready
        assert venv.get_attr("t") == [2, 2, 2, 2]


def test_config_batch_size():
    venv = mv.make({"env": {"family": "gym", "id": "CartPole-v1"},
                    "vec": {"num_envs": 4, "backend": "subproc", "num_workers": 2, "batch_size": 3}})
    try:
        assert venv.batch_size == 3
    finally:
        venv.close()
    # dummy's pool is synchronous (send() steps at once), the same calls
    with mv.make({"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "batch_size": 2,
                                                                      "backend": "dummy"}}) as venv:
        assert isinstance(venv, mv.DummyVecEnv) and venv.batch_size == 2
    # without a backend (auto, no tune result) the pool asks for workers
    with mv.make({"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "batch_size": 2}}) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv.batch_size == 2

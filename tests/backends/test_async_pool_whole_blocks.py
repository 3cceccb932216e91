"""Workers that step only their whole block (a native engine: the Atari ``ale_vector``
engine) under the async pool: batch sizes must be whole blocks, envs sent wait for the
rest of their block, and every env's trajectory still equals its synchronous one."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra is not installed")
pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.atari import make_atari  # noqa: E402
from tests.helpers.pool_driver import assert_same, pool_trajectories, sync_trajectories  # noqa: E402


def engine_fn():
    return make_atari("ALE/Breakout-v5", preprocess=True, engine="ale_vector", engine_threads=1)


def test_batch_size_must_be_whole_blocks():
    with pytest.raises(ValueError, match=r"batch_size must be num_envs=4 or a multiple of the block size "
                                         r"num_envs // num_workers = 4/2.*engine steps a worker's whole block.*got batch_size=3"):
        mv.SubprocVecEnv([engine_fn] * 4, num_workers=2, batch_size=3)


def test_each_env_trajectory_equals_its_synchronous_one():
    fns = [engine_fn] * 4
    expected = sync_trajectories(fns, 12)
    got, batches, _ = pool_trajectories(fns, 12, num_workers=2, batch_size=2)
    assert_same(got, expected)
    assert all(sorted(b) in ([0, 1], [2, 3]) for b in batches)  # whole blocks


def test_a_whole_block_in_this_process_steps_in_the_pool_too():
    # step_in_main: 1 worker + this process, each an engine block of 2; this process's
    # engine step answers its envs together, as a worker's does
    fns = [engine_fn] * 4
    expected = sync_trajectories(fns, 12)
    got, batches, _ = pool_trajectories(fns, 12, "subproc-main", num_workers=2, batch_size=2)
    assert_same(got, expected)
    assert all(sorted(b) in ([0, 1], [2, 3]) for b in batches)


def test_envs_sent_wait_for_the_rest_of_their_block():
    with mv.SubprocVecEnv([engine_fn] * 4, num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1]
        venv.send(np.ones((1, 1), dtype=np.int64), [0])
        assert venv.recv().env_ids.tolist() == [2, 3]
        with pytest.raises(mv.PoolNotReadyError, match="1 were sent and wait for the rest of their worker's block"):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match="env 0 cannot be stepped, it was sent already"):
            venv.send(np.ones((1, 1), dtype=np.int64), [0])
        venv.send(np.ones((1, 1), dtype=np.int64), [1])  # the block is whole: it steps
        assert venv.recv().env_ids.tolist() == [0, 1]


def test_a_partial_first_reset_gets_a_clear_message_not_a_fake_restart():
    # Issue 23 ("also check"): env 1 of worker 0's block was never reset; the block cannot
    # step without it, and recv() says which env needs which reset.
    with mv.SubprocVecEnv([engine_fn] * 4, num_workers=2, batch_size=2) as venv:
        venv.reset(env_ids=[0, 2, 3])
        assert venv.recv().env_ids.tolist() == [0, 2]  # the reset rows, in env order, env 1 left out
        with pytest.raises(mv.PoolNotReadyError, match=r"only 1 are ready .*envs \[1\] were never reset .*: "
                                                       r"call reset\(env_ids=\[1\]\)"):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"env 1 cannot be stepped, it was never reset"):
            venv.send(np.zeros((1, 1), np.int64), [1])
        venv.reset(env_ids=[1])
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1] and not r.done.any() and r.infos == [{}, {}]
        venv.send(np.zeros((2, 1), np.int64), r.env_ids)
        venv.send(np.zeros((2, 1), np.int64), venv.recv().env_ids)
        r = venv.recv()
        assert not any(info.get("restarted") for info in r.infos)

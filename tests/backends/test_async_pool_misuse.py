"""The async pool's misuse: every wrong send/recv raises PoolNotReadyError (or ValueError
for bad actions and options) naming what was wrong and what is allowed, and leaves the
pool as it was: nothing is sent, no env is stepped twice without a recv() in between."""

from __future__ import annotations

import numpy as np
import pytest

import marl_vec as mv
import marl_vec.core.errors
import marl_vec.vec.pool
import marl_vec.vec.subproc.vec_env
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.scripted_envs import DyingAgentEnv

FNS = [DyingAgentEnv] * 4
ONES = np.ones((1, 3), dtype=np.int64)  # available at t=0 for every agent (t % n is masked)


def test_pool_not_ready_error_is_one_class_found_where_the_errors_are():
    assert mv.PoolNotReadyError is marl_vec.core.errors.PoolNotReadyError
    assert marl_vec.vec.pool.PoolNotReadyError is mv.PoolNotReadyError
    assert marl_vec.vec.subproc.vec_env.PoolNotReadyError is mv.PoolNotReadyError
    assert issubclass(mv.PoolNotReadyError, RuntimeError)


@pytest.mark.parametrize("batch_size", [0, 5, True, 2.0])
def test_batch_size_out_of_range(batch_size):
    with pytest.raises(ValueError, match=rf"batch_size must be an integer in \[1, num_envs=4\], got {batch_size!r}"):
        SubprocVecEnv(FNS, num_workers=2, batch_size=batch_size)


def test_ray_actors_answering_ray_calls_step_whole_blocks(ray_cluster):  # noqa: F811
    with pytest.raises(ValueError, match=r"batch_size must be num_envs=4 or a multiple of the block size "
                                         r"num_envs // num_workers = 4/2.*a Ray actor answering Ray calls .*"
                                         r"steps its whole block in one call; got batch_size=3"):
        backends.make("ray-ray", FNS, batch_size=3)


def test_other_autoreset_modes_refuse_the_pool():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2, autoreset="next_step") as venv:
        venv.reset()
        with pytest.raises(ValueError, match="the async pool needs autoreset='same_step' or 'fast'.*'next_step'"):
            venv.recv()


def test_recv_and_send_before_reset():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2) as venv:
        with pytest.raises(mv.PoolNotReadyError, match=r"call reset\(\) before recv\(\)"):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"call reset\(\) before send\(\)"):
            venv.send(ONES, [0])


def test_send_refuses_envs_not_received_and_names_the_allowed_ones():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1]
        with pytest.raises(mv.PoolNotReadyError, match=r"env 2 cannot be stepped, recv\(\) has not returned it yet "
                                                       r".*not sent since .*: \[0, 1\]"):
            venv.send(np.ones((2, 3), dtype=np.int64), [0, 2])
        with pytest.raises(IndexError, match=r"env indices \[7\] out of range \[0, 4\)"):  # as reset() and call()
            venv.send(ONES, [7])
        with pytest.raises(mv.PoolNotReadyError, match=r"env 0 twice"):
            venv.send(np.ones((2, 3), dtype=np.int64), [0, 0])
        with pytest.raises(mv.PoolNotReadyError, match=r"no env_ids.*: \[0, 1\]"):
            venv.send(np.ones((0, 3), dtype=np.int64), [])
        venv.send(ONES, [0])
        with pytest.raises(mv.PoolNotReadyError, match=r"env 0 cannot be stepped, it was sent already and recv\(\) "
                                                       r"has not returned it since.*: \[1\]"):
            venv.send(ONES, [0])  # stepped once per recv()
        assert venv.get_attr("t") == [1, 0, 0, 0]  # refused sends stepped nothing


def test_bad_actions_name_the_env_and_send_nothing():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        with pytest.raises(ValueError, match=r"send\(\) actions must have shape \(2, 3\)"):
            venv.send(np.ones((4, 3), dtype=np.int64), r.env_ids)
        with pytest.raises(ValueError, match="action 0 for env 1, agent 'a0' is not available"):
            venv.send(np.array([[1, 1, 1], [0, 1, 1]]), r.env_ids)
        with pytest.raises(ValueError, match="action 9 for env 0, agent 'a2' is out of range; allowed: 0..3"):
            venv.send(np.array([[1, 1, 9], [1, 1, 1]]), r.env_ids)
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)  # still owed: the refusals sent nothing
        assert venv.get_attr("t") == [1, 1, 0, 0]


@pytest.mark.parametrize("validate", [True, False])
def test_send_refuses_float_actions_naming_the_cast(validate):
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2, validate=validate) as venv:
        venv.reset()
        r = venv.recv()
        with pytest.raises(ValueError, match=r"discrete actions must be integers, got dtype float64; if they are "
                                             r"whole numbers, pass actions\.astype\(np\.int64\)"):
            venv.send(np.full((2, 3), 1.7), r.env_ids)
        venv.send(np.ones((2, 3), dtype=np.int64), r.env_ids)
        assert venv.get_attr("t") == [1, 1, 0, 0]


def test_recv_without_enough_envs_raises_instead_of_waiting():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=3) as venv:
        venv.reset()
        venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"recv\(\) needs batch_size=3 envs, but only 1 are ready and "
                                                       r"0 stepping; 3 were returned by recv\(\) and not sent yet"):
            venv.recv()


def test_pool_calls_while_a_synchronous_step_is_pending():
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2) as venv:
        venv.reset()
        venv.step_async(np.ones((4, 3), dtype=np.int64))
        with pytest.raises(RuntimeError, match=r"recv\(\) called while a synchronous step is pending"):
            venv.recv()
        venv.step_wait()


def test_a_never_reset_env_is_not_handed_out_and_never_fakes_a_restart():
    # Issue 23, bug 3: after a partial first reset, the pool handed out env 1 and sending
    # it returned done/truncated with infos["restarted"]. DummyVecEnv's step() raises
    # gymnasium's ResetNeeded there; the pool refuses the env, naming the reset it needs.
    import gymnasium as gym

    with SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 2, num_workers=2, batch_size=1) as venv:
        venv.reset(env_ids=[0])
        assert venv.recv().env_ids.tolist() == [0]
        never = r"envs \[1\] were never reset .*ResetNeeded.*: call reset\(env_ids=\[1\]\) to bring them in"
        with pytest.raises(mv.PoolNotReadyError, match=r"only 0 are ready and 0 stepping; .*" + never):
            venv.recv()
        with pytest.raises(mv.PoolNotReadyError, match=r"env 1 cannot be stepped, it was never reset; "
                                                       r"call reset\(env_ids=\[1\]\) first"):
            venv.send(np.zeros((1, 1), dtype=np.int64), [1])
        venv.send(np.zeros((1, 1), dtype=np.int64), [0])
        r = venv.recv()
        assert r.env_ids.tolist() == [0] and not r.done.any() and r.infos == [{}]
        venv.reset(env_ids=[1])
        assert sorted(venv.recv().env_ids.tolist() + venv.recv().env_ids.tolist()) == [0, 1]


def test_send_reads_env_ids_as_reset_and_call_do():
    # Issue 23, bug 6: send() converted env_ids with int(): a boolean mask was read as
    # ids 0/1 and 1.7 stepped env 1. It takes what reset()/call() take: ints, a sequence
    # or array of ints, or a boolean mask of length num_envs (rows in env order).
    with SubprocVecEnv(FNS, num_workers=2, batch_size=2) as venv:
        venv.reset()
        assert venv.recv().env_ids.tolist() == [0, 1]
        with pytest.raises(TypeError, match=r"env indices must be an int, a sequence of ints, or a boolean mask "
                                            r"of length num_envs=4; got \[0, 1.7\] \(dtype float64\)"):
            venv.send(np.ones((2, 3), dtype=np.int64), [0, 1.7])
        with pytest.raises(ValueError, match=r"a boolean env mask must have shape \(4,\)"):
            venv.send(np.ones((2, 3), dtype=np.int64), [True, True])
        with pytest.raises(IndexError, match=r"env indices \[7\] out of range \[0, 4\)"):
            venv.send(ONES, [7])
        venv.send(ONES, np.array([False, True, False, False]))  # refused ones sent nothing: still owed
        venv.send(ONES, np.array([True, False, False, False]))
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3]  # still ready from the reset
        assert venv.get_attr("t") == [1, 1, 0, 0]

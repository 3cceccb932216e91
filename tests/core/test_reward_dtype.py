"""Reward dtype: gymnasium envs keep their float64 rewards bit for bit (issue 12, bug 6);
multi-agent families give float32 unless ``reward_dtype`` asks for float64; episode
returns are float64 sums of the rewards as written."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

import marl_vec as mv
from marl_vec.compat import GymVectorEnv

try:
    import Box2D  # noqa: F401

    CONTINUOUS = ["Pendulum-v1", "LunarLanderContinuous-v3"]
except ImportError:
    CONTINUOUS = ["Pendulum-v1", "MountainCarContinuous-v0"]


def _make(env_id: str):
    if env_id == "LunarLanderContinuous-v3":
        return lambda: gym.make("LunarLander-v3", continuous=True, max_episode_steps=60)
    return lambda: gym.make(env_id, max_episode_steps=60)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("env_id", CONTINUOUS)
def test_gym_vector_env_rewards_equal_sync_vector_env_bit_for_bit(env_id, backend):
    fns = [_make(env_id)] * 3
    space = fns[0]().action_space
    rng = np.random.default_rng(0)
    actions = rng.uniform(space.low, space.high, size=(130, 3, *space.shape)).astype(space.dtype)
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    envs = GymVectorEnv(mv.make_vec(fns, backend=backend, env_seed=0, **kwargs), episode_info=True)
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset.SAME_STEP)
    envs.reset(seed=4), sync.reset(seed=4)
    returns, expected_returns = [], []
    running = np.zeros(3)
    for a in actions:
        _, rew, term, trunc, info = envs.step(a)
        _, their_rew, their_term, their_trunc, _ = sync.step(a)
        assert rew.dtype == np.float64
        np.testing.assert_array_equal(rew, their_rew)  # bit for bit, no float32 rounding
        running += their_rew
        for i in np.flatnonzero(their_term | their_trunc):
            expected_returns.append(running[i])
            running[i] = 0.0
        if "episode" in info:
            returns += [float(r) for r in info["episode"]["r"][info["_episode"]]]
    envs.close(), sync.close()
    assert len(returns) == len(expected_returns) >= 6
    # Episode returns are the float64 sums of the exact rewards, summed in the same order.
    assert sorted(returns) == sorted(float(r) for r in expected_returns)


def test_reward_dtype_option_config_key_and_errors():
    fn = lambda: gym.make("Pendulum-v1")  # noqa: E731
    assert mv.DummyVecEnv([fn]).spec.reward_dtype == np.float64
    assert mv.DummyVecEnv([fn], reward_dtype="float32").spec.reward_dtype == np.float32
    with pytest.raises(ValueError, match=r"reward_dtype must be one of float32, float64 .*got 'float16'"):
        mv.DummyVecEnv([fn], reward_dtype="float16")
    venv = mv.make({"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3"},
                    "vec": {"num_envs": 2, "reward_dtype": "float64"}})
    assert venv.spec.reward_dtype == np.float64 and venv.reset().reward.dtype == np.float64
    venv.close()
    with pytest.raises(Exception, match="reward_dtype"):
        mv.make({"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3"}, "vec": {"reward_dtype": "half"}})


def test_subproc_workers_write_the_overridden_reward_dtype():
    from mpe2 import simple_spread_v3

    fns = [lambda: simple_spread_v3.parallel_env(max_cycles=5)] * 2
    actions = np.random.default_rng(1).integers(0, 5, size=(7, 2, 3))
    with mv.DummyVecEnv(fns, reward_dtype="float64") as dummy, \
            mv.SubprocVecEnv(fns, reward_dtype="float64", num_workers=2) as sub:
        dummy.reset(), sub.reset()
        for a in actions:
            r, s = dummy.step(a), sub.step(a)
            assert s.reward.dtype == np.float64
            np.testing.assert_array_equal(r.reward, s.reward)
            assert r.reward.astype(np.float32).astype(np.float64).tolist() != r.reward.tolist() or not r.reward.any()

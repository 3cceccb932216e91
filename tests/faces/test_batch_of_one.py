"""BatchOfOne: one gymnasium.Env as a batch of size 1, against a plain loop and SyncVectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from marl_vec.compat import BatchOfOne


def test_batch_of_one_equals_plain_loop_with_next_step_autoreset():
    env = BatchOfOne(gym.make("CartPole-v1", max_episode_steps=10))
    plain = gym.make("CartPole-v1", max_episode_steps=10)
    actions = np.random.default_rng(0).integers(0, 2, size=60)
    obs, info = env.reset(seed=5)
    ref_obs, _ = plain.reset(seed=5)
    assert obs.shape == (1, 4) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[0], ref_obs)
    needs_reset, ends = False, 0
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(np.array([a]))
        assert reward.shape == terminated.shape == truncated.shape == (1,)
        if needs_reset:
            ref_obs, _ = plain.reset()
            ref = (0.0, False, False)
        else:
            ref_obs, r, te, tr, _ = plain.step(a)
            ref = (r, te, tr)
        np.testing.assert_array_equal(obs[0], ref_obs)
        assert (reward[0], terminated[0], truncated[0]) == ref
        needs_reset = bool(ref[1] or ref[2])
        ends += needs_reset
    assert ends >= 3
    env.close()
    plain.close()


def test_batch_of_one_equals_sync_vector_env_infos_included():
    fn = lambda: gym.make("CartPole-v1", max_episode_steps=8)  # noqa: E731
    ours, theirs = BatchOfOne(fn()), gym.vector.SyncVectorEnv([fn], autoreset_mode=AutoresetMode.NEXT_STEP)
    assert ours.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    a_obs, a_info = ours.reset(seed=1)
    b_obs, b_info = theirs.reset(seed=1)
    np.testing.assert_array_equal(a_obs, b_obs)
    assert a_info.keys() == b_info.keys()
    for t in range(30):
        a = np.array([t % 2])
        for x, y in zip(ours.step(a), theirs.step(a)):
            if isinstance(y, dict):
                assert x.keys() == y.keys()
            else:
                np.testing.assert_array_equal(x, y)
                assert x.dtype == y.dtype
    ours.close()
    theirs.close()


def test_returned_obs_is_not_overwritten_by_the_next_step():
    env = BatchOfOne(gym.make("CartPole-v1"))
    first, _ = env.reset(seed=0)
    kept = first.copy()
    env.step(np.array([1]))
    np.testing.assert_array_equal(first, kept)
    env.close()


def test_continuous_actions_lose_the_batch_axis():
    env = BatchOfOne(gym.make("Pendulum-v1"))
    env.reset(seed=0)
    obs, reward, *_ = env.step(np.array([[0.5]], dtype=np.float32))
    assert obs.shape == (1, 3) and reward.dtype == np.float64
    env.close()


def test_render_returns_a_tuple_of_frames_and_close_takes_kwargs():
    env = BatchOfOne(gym.make("CartPole-v1", render_mode="rgb_array"))
    env.reset(seed=0)
    frames = env.render()
    assert isinstance(frames, tuple) and len(frames) == 1 and frames[0].shape == (400, 600, 3)
    env.close(terminate=True)
    assert env.closed
    env.close()


@pytest.mark.parametrize("actions", [np.array([0, 1]), 1, np.array([[0], [1]])])
def test_actions_without_a_batch_of_one_are_an_error(actions):
    env = BatchOfOne(gym.make("CartPole-v1"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="BatchOfOne takes a batch of one action"):
        env.step(actions)
    env.close()


def test_seed_forms_and_errors():
    env = BatchOfOne(gym.make("CartPole-v1"))
    a, _ = env.reset(seed=[3])
    b, _ = env.reset(seed=3)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="seed must be an int, None or a list of one"):
        env.reset(seed=[1, 2])
    with pytest.raises(TypeError, match="BatchOfOne wraps a gymnasium.Env"):
        BatchOfOne(object())  # type: ignore[arg-type]
    env.close()

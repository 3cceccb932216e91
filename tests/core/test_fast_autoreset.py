"""autoreset='fast': every episode after the first starts from the snapshot of the first reset."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed")
pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.atari import AtariAdapter, make_atari  # noqa: E402

gym.register_envs(ale_py)
E = 3
LIMIT = 25


def _check_fast(fns, n_agents: int, steps: int, seed: int = 0) -> int:
    """Step randomly; after every end the obs (and state) equal the first reset's exactly."""
    venv = mv.DummyVecEnv(fns, env_seed=seed, autoreset="fast")
    first = venv.reset()
    rng = np.random.default_rng(seed)
    prev_obs = first.obs
    ends = 0
    for _ in range(steps):
        r = venv.step(rng.integers(0, venv.spec.n_actions, size=(len(fns), n_agents)))
        for i in np.flatnonzero(r.done):
            ends += 1
            np.testing.assert_array_equal(r.obs[i], first.obs[i])
            np.testing.assert_array_equal(r.state[i], first.state[i])
            np.testing.assert_array_equal(r.agent_mask[i], first.agent_mask[i])
            assert r.infos[i]["episode"]["length"] > 0
        prev_obs = r.obs
    assert prev_obs.dtype == np.uint8
    venv.close()
    return ends


def test_fast_raw_pong_returns_first_reset_obs():
    fns = [lambda: make_atari("ALE/Pong-v5", max_episode_steps=LIMIT)] * E
    assert _check_fast(fns, 1, 3 * LIMIT + 2) == 3 * E


def test_fast_preprocessed_pong_with_noops_returns_first_reset_obs():
    fns = [lambda: make_atari("ALE/Pong-v5", preprocess=True, max_episode_steps=LIMIT)] * E
    assert _check_fast(fns, 1, 3 * LIMIT + 2, seed=4) == 3 * E


def test_fast_two_player_pong_returns_first_reset_obs():
    fns = [lambda: make_atari("pettingzoo.atari.pong_v3", preprocess=True, max_cycles=4 * LIMIT)] * 2
    assert _check_fast(fns, 2, 3 * LIMIT + 2) == 3 * 2


def test_fast_restores_the_emulator_and_wrappers_not_only_the_obs():
    """Without sticky actions, the same actions replay every episode exactly, time limit included."""
    fn = lambda: make_atari("ALE/Breakout-v5", preprocess=True, repeat_action_probability=0.0, max_episode_steps=LIMIT)  # noqa: E731
    venv = mv.DummyVecEnv([fn], env_seed=2, autoreset="fast")
    venv.reset()
    episode_actions = np.random.default_rng(0).integers(0, 4, size=LIMIT)
    episodes = []
    for _ in range(3):
        obs = []
        for a in episode_actions:
            r = venv.step(np.array([[a]]))
            obs.append(r.final_obs[0].copy() if r.done[0] else r.obs[0].copy())
        assert r.done[0] and r.truncated[0, 0] and r.infos[0]["episode"]["length"] == LIMIT
        episodes.append(np.stack(obs))
    np.testing.assert_array_equal(episodes[1], episodes[0])
    np.testing.assert_array_equal(episodes[2], episodes[0])
    venv.close()


def test_fast_sticky_actions_keep_their_random_stream():
    """The snapshot leaves the RNG out: with sticky actions, restored episodes differ."""
    fn = lambda: make_atari("ALE/Breakout-v5", repeat_action_probability=0.5, max_episode_steps=LIMIT)  # noqa: E731
    venv = mv.DummyVecEnv([fn], env_seed=0, autoreset="fast")
    venv.reset()
    actions = np.tile([1, 2, 3, 2, 3], LIMIT // 5)
    finals = []
    for _ in range(3):
        for a in actions:
            r = venv.step(np.array([[a]]))
        finals.append(r.final_obs[0].copy())
    assert not (np.array_equal(finals[0], finals[1]) and np.array_equal(finals[1], finals[2]))
    venv.close()


def test_a_seeded_reset_takes_a_new_snapshot():
    fn = lambda: make_atari("ALE/Pong-v5", preprocess=True, max_episode_steps=5)  # noqa: E731
    venv = mv.DummyVecEnv([fn], env_seed=0, autoreset="fast")
    venv.reset()
    second = venv.reset(seed=123)
    for _ in range(5):
        r = venv.step(np.array([[2]]))
    assert r.done[0]
    np.testing.assert_array_equal(r.obs, second.obs)
    venv.close()


def test_fast_needs_an_adapter_that_snapshots():
    with pytest.raises(ValueError, match="autoreset='fast' needs an adapter that can snapshot.*GymAdapter cannot"):
        mv.DummyVecEnv([lambda: gym.make("CartPole-v1")], autoreset="fast")


def test_an_unknown_wrapper_disables_snapshots():
    env = AtariAdapter(gym.wrappers.RecordEpisodeStatistics(gym.make("ALE/Pong-v5")))
    assert not env.spec.snapshots
    with pytest.raises(ValueError, match="autoreset='fast' needs an adapter that can snapshot.*AtariAdapter cannot"):
        mv.DummyVecEnv([lambda: env], autoreset="fast")

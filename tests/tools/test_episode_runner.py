"""EpisodeRunner: PyMARL-style padded batches of complete episodes (one_episode mode)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.tools.episode_runner import EpisodeRunner

mpe2_spread = pytest.importorskip("mpe2.simple_spread_v3")


def _seeded_policy(seed: int):
    rng = np.random.default_rng(seed)

    def policy(result: mv.StepResult, t: int) -> np.ndarray:
        return rng.integers(0, 5, size=result.agent_mask.shape)

    return policy


def test_simple_spread_batch_equals_native_loop():
    E, seed = 3, 7
    with mv.make("mpe/simple_spread", num_envs=E, env_seed=seed, autoreset="one_episode") as venv:
        batch = EpisodeRunner(venv).run(_seeded_policy(1))
    assert batch.obs.shape == (E, 26, 3, 18) and batch.state.shape == (E, 26, 54)
    assert batch.actions.shape == (E, 25, 3) and batch.filled.shape == (E, 25)
    assert batch.filled.all() and batch.complete.all()
    assert batch.lengths.tolist() == [25] * E
    for e in range(E):
        env = mpe2_spread.parallel_env(N=3, max_cycles=25, continuous_actions=False)
        obs, _ = env.reset(seed=seed + e)
        agents = list(env.possible_agents)
        np.testing.assert_array_equal(batch.obs[e, 0], np.stack([obs[a] for a in agents]))
        np.testing.assert_array_equal(batch.state[e, 0], env.state())
        total = 0.0
        for t in range(25):
            actions = {a: int(batch.actions[e, t, i]) for i, a in enumerate(agents)}
            obs, rew, term, trunc, _ = env.step(actions)
            np.testing.assert_array_equal(batch.obs[e, t + 1], np.stack([obs[a] for a in agents]))
            np.testing.assert_array_equal(batch.state[e, t + 1], env.state())
            np.testing.assert_array_equal(batch.reward[e, t], np.array([rew[a] for a in agents], np.float32))
            assert batch.terminated[e, t].tolist() == [term[a] for a in agents]
            assert batch.truncated[e, t].tolist() == [trunc[a] for a in agents]
            total += float(np.mean(np.array([rew[a] for a in agents], np.float32)))
        # the time limit is a truncation, not a terminal state
        assert batch.truncated[e, 24].all() and not batch.terminated[e].any()
        assert batch.returns[e] == pytest.approx(total, rel=1e-6)
        env.close()
    assert batch.avail_actions is not None and batch.avail_actions[:, :25].all()


def test_episodes_of_different_lengths_are_padded_with_zeros():
    # CartPole pushed right always falls after 10, 10, 9, 9 steps for seeds 3..6.
    E, seed = 4, 3
    fns = [lambda: gym.make("CartPole-v1")] * E
    with mv.make_vec(fns, env_seed=seed, autoreset="one_episode") as venv:
        runner = EpisodeRunner(venv, max_steps=20)
        batch = runner.run(lambda r, t: np.ones((E, 1), np.int64))
    native_lengths = []
    for e in range(E):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed + e)
        np.testing.assert_array_equal(batch.obs[e, 0, 0], obs)
        t = 0
        while True:
            obs, rew, term, trunc, _ = env.step(1)
            np.testing.assert_array_equal(batch.obs[e, t + 1, 0], obs)
            assert batch.reward[e, t, 0] == rew
            t += 1
            if term or trunc:
                break
        native_lengths.append(t)
        assert batch.terminated[e, t - 1, 0] and not batch.terminated[e, : t - 1].any()
    assert batch.lengths.tolist() == native_lengths == [10, 10, 9, 9]
    expected_filled = np.arange(20)[None, :] < np.array(native_lengths)[:, None]
    np.testing.assert_array_equal(batch.filled, expected_filled)
    for e, length in enumerate(native_lengths):
        assert not batch.obs[e, length + 1:].any() and not batch.state[e, length + 1:].any()
        assert not batch.actions[e, length:].any() and not batch.reward[e, length:].any()
        assert not batch.agent_mask[e, length + 1:].any() and batch.agent_mask[e, : length + 1].all()
    np.testing.assert_array_equal(batch.returns, np.array(native_lengths, np.float64))
    assert batch.complete.all()


def test_episodes_longer_than_max_steps_are_cut():
    fns = [lambda: gym.make("CartPole-v1")] * 2
    with mv.make_vec(fns, env_seed=0, autoreset="one_episode") as venv:
        batch = EpisodeRunner(venv, max_steps=5).run(lambda r, t: np.ones((2, 1), np.int64))
    assert batch.lengths.tolist() == [5, 5]
    assert batch.filled.all() and not batch.complete.any()
    assert batch.obs.shape == (2, 6, 1, 4)


def test_runs_are_reproducible_and_returned_batches_are_not_overwritten():
    with mv.make("mpe/simple_spread", num_envs=2, autoreset="one_episode") as venv:
        runner = EpisodeRunner(venv)
        first = runner.run(_seeded_policy(3), seed=11)
        second = runner.run(_seeded_policy(3), seed=11)
        third = runner.run(_seeded_policy(4), seed=12)
    for name in ("obs", "state", "actions", "reward", "filled"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert not np.array_equal(first.obs, third.obs)


def test_default_policy_is_random_over_available_actions():
    with mv.make("mpe/simple_spread", num_envs=2, autoreset="one_episode") as venv:
        batch = EpisodeRunner(venv).run()
    assert batch.lengths.tolist() == [25, 25]
    assert len(np.unique(batch.actions)) > 1


def test_wrong_autoreset_mode_is_refused():
    with mv.make("mpe/simple_spread", num_envs=1) as venv:
        with pytest.raises(ValueError, match="autoreset='one_episode', got autoreset='same_step'"):
            EpisodeRunner(venv)


def test_max_steps_needed_without_episode_limit_and_must_be_positive():
    from gymnasium.envs.classic_control import CartPoleEnv

    with mv.make_vec([CartPoleEnv], autoreset="one_episode") as venv:
        assert venv.spec.episode_limit is None
        with pytest.raises(ValueError, match="no episode_limit; pass max_steps"):
            EpisodeRunner(venv)
        with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
            EpisodeRunner(venv, max_steps=0)


def test_script_saves_the_batch(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "train" / "episode_runner.py"
    spec = importlib.util.spec_from_file_location("episode_runner_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "episodes.npz"
    assert module.main(["mpe/simple_spread", "--episodes", "2", "--out", str(out)]) == 0
    data = np.load(out)
    assert data["obs"].shape == (2, 26, 3, 18)
    assert data["filled"].shape == (2, 25) and data["filled"].all()
    assert "batch 0: lengths [25, 25]" in capsys.readouterr().out

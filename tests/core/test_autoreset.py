"""Autoreset modes: same_step, next_step, disabled, one_episode, and fast's refusal on envs that cannot snapshot."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv

# env 0 ends after 6 steps, env 1 after 8.
FNS = [DyingAgentEnv, functools.partial(DyingAgentEnv, episode_len=8)]


def first_available(result):
    return result.avail_actions.argmax(axis=-1)


def play(mode: str, steps: int = 6, env_seed: int = 0):
    """A batch of FNS in ``mode``, reset and stepped ``steps`` times with available actions."""
    venv = mv.DummyVecEnv(FNS, env_seed=env_seed, autoreset=mode)
    r = venv.reset()
    for _ in range(steps):
        r = venv.step(first_available(r))
    return venv, r


def native_obs(seed: int, steps: int, reset_again: bool = False, episode_len: int = 6):
    """A native DyingAgentEnv's observations after `steps` (first-available) steps."""
    env = DyingAgentEnv(episode_len=episode_len)
    obs, infos = env.reset(seed=seed)
    for _ in range(steps):
        acts = {a: int(np.argmax(infos[a]["action_mask"])) for a in env.agents}
        obs, _, _, _, infos = env.step(acts)
    if reset_again:
        obs, infos = env.reset()
    return obs


def test_same_step_resets_at_once_and_continues_the_envs_random_stream():
    venv, r = play("same_step", env_seed=10)
    assert r.done.tolist() == [True, False]
    expected = native_obs(10, 6, reset_again=True)
    assert r.obs[0, 0].tolist() == expected["a0"].tolist()
    assert r.final_obs[0, 0, 0] == 6.0
    assert "episode" in r.infos[0] and "episode" not in r.infos[1]
    venv.close()


def test_next_step_returns_the_reset_observation_one_step_later():
    venv, r = play("next_step", env_seed=0)
    assert r.done.tolist() == [True, False] and r.final_obs is None
    assert r.obs[0, 0, 0] == 6.0, "the episode's last observation stays in obs"
    assert r.truncated[0].tolist() == [True, False, True]
    r = venv.step(first_available(r))
    assert r.obs[0, :, 0].tolist() == [0.0, 0.0, 0.0]
    assert r.reward[0].tolist() == [0.0, 0.0, 0.0]
    assert not r.terminated[0].any() and not r.truncated[0].any() and not r.done[0]
    assert r.agent_mask[0].all()
    assert r.obs[1, 0, 0] == 7.0, "env 1 stepped normally"
    expected = native_obs(0, 6, reset_again=True)
    assert r.obs[0, 2].tolist() == expected["a2"].tolist()
    venv.close()


def test_disabled_refuses_to_step_a_finished_env_until_it_is_reset():
    venv, r = play("disabled", env_seed=0)
    assert r.done.tolist() == [True, False]
    with pytest.raises(mv.EnvFinishedError, match=r"env 0 finished its episode.*reset\(env_ids=\[0\]\)"):
        venv.step(first_available(r))
    r = venv.reset(env_ids=[0])
    assert r.done.tolist() == [False, False]
    assert r.obs[0, :, 0].tolist() == [0.0, 0.0, 0.0]
    assert r.obs[1, 0, 0] == 6.0, "env 1 untouched by the partial reset"
    r = venv.step(first_available(r))
    assert r.obs[0, 0, 0] == 1.0 and r.obs[1, 0, 0] == 7.0
    venv.close()


def test_one_episode_repeats_the_last_step_with_zero_reward():
    venv, r = play("one_episode", env_seed=0)
    last = r
    episodes = 1
    for _ in range(4):
        r = venv.step(first_available(r))
        np.testing.assert_array_equal(r.obs[0], last.obs[0])
        np.testing.assert_array_equal(r.terminated[0], last.terminated[0])
        np.testing.assert_array_equal(r.truncated[0], last.truncated[0])
        assert r.done[0] and not r.reward[0].any()
        episodes += sum("episode" in info for info in r.infos)
    assert r.done.tolist() == [True, True]
    assert episodes == 2, "each env reports its one episode once"
    assert venv.episode_statistics()["episodes"] == 2
    r = venv.reset()
    assert not r.done.any()
    venv.close()


def test_fast_needs_an_adapter_that_can_snapshot():
    with pytest.raises(ValueError, match="autoreset='fast' needs an adapter that can snapshot"):
        mv.DummyVecEnv(FNS, autoreset="fast")


def test_unknown_mode_names_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown autoreset mode 'sometimes'; allowed: same_step, next_step"):
        mv.DummyVecEnv(FNS, autoreset="sometimes")


def test_reset_with_a_seed_seeds_env_i_with_seed_plus_i():
    venv = mv.DummyVecEnv(FNS, env_seed=0)
    venv.reset()
    r = venv.reset(seed=100)
    for i in range(2):
        assert r.obs[i, 1].tolist() == native_obs(100 + i, 0)["a1"].tolist()
    first = mv.DummyVecEnv(FNS, env_seed=100).reset()
    np.testing.assert_array_equal(first.obs, r.obs)
    assert not np.array_equal(r.obs[0], r.obs[1])
    venv.close()

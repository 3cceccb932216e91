"""Single-agent gymnasium envs: the batch equals gymnasium's SyncVectorEnv, value for value."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

import marl_vec as mv

T = 300


def cartpole_fns(n: int):
    # Half the envs time out after 15 steps, so truncation-only endings are frequent.
    return [
        (lambda: gym.make("CartPole-v1", max_episode_steps=15)) if i % 2 else (lambda: gym.make("CartPole-v1"))
        for i in range(n)
    ]


def _run_both(fns, mode: str, actions: np.ndarray, seed: int = 3):
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset[mode.upper()])
    venv = mv.DummyVecEnv(fns, env_seed=seed, autoreset=mode)
    ours = [venv.reset()]
    theirs_obs, _ = sync.reset(seed=seed)
    theirs = [(theirs_obs, None, None, None, {})]
    for a in actions:
        ours.append(venv.step(a[:, None] if a.ndim == 1 else a[:, None, ...]))
        theirs.append(sync.step(a))
    sync.close()
    venv.close()
    return ours, theirs


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_cartpole_equals_sync_vector_env(mode):
    n = 6
    actions = np.random.default_rng(0).integers(0, 2, size=(T, n))
    ours, theirs = _run_both(cartpole_fns(n), mode, actions)
    np.testing.assert_array_equal(ours[0].obs[:, 0], theirs[0][0])
    endings = {"terminated": 0, "truncated": 0}
    for t in range(1, T + 1):
        r, (obs, rew, term, trunc, info) = ours[t], theirs[t]
        np.testing.assert_array_equal(r.obs[:, 0], obs)
        np.testing.assert_array_equal(r.state, obs)
        np.testing.assert_array_equal(r.reward[:, 0], rew.astype(np.float32))
        np.testing.assert_array_equal(r.terminated[:, 0], term)
        np.testing.assert_array_equal(r.truncated[:, 0], trunc)
        np.testing.assert_array_equal(r.done, term | trunc)
        endings["terminated"] += int((term & ~trunc).sum())
        endings["truncated"] += int((trunc & ~term).sum())
        if mode == "same_step":
            final = info.get("_final_obs", np.zeros(n, bool))
            np.testing.assert_array_equal(final, r.done)
            for i in np.flatnonzero(final):
                np.testing.assert_array_equal(r.final_obs[i, 0], info["final_obs"][i])
                np.testing.assert_array_equal(r.final_state[i], info["final_obs"][i])
        else:
            assert r.final_obs is None
    assert endings["terminated"] > 10 and endings["truncated"] > 10, endings


def test_discrete_observations_equal_sync_vector_env():
    fns = [lambda: gym.make("FrozenLake-v1", is_slippery=True, max_episode_steps=8)] * 3
    actions = np.random.default_rng(1).integers(0, 4, size=(80, 3))
    ours, theirs = _run_both(fns, "same_step", actions)
    assert ours[0].obs.shape == (3, 1) and ours[0].obs.dtype == np.int64
    for t in range(1, 81):
        np.testing.assert_array_equal(ours[t].obs[:, 0], theirs[t][0])
        np.testing.assert_array_equal(ours[t].reward[:, 0], theirs[t][1])


def test_box_actions_equal_sync_vector_env():
    fns = [lambda: gym.make("Pendulum-v1", max_episode_steps=10)] * 2
    actions = np.random.default_rng(2).uniform(-2, 2, size=(35, 2, 1)).astype(np.float32)
    ours, theirs = _run_both(fns, "next_step", actions)
    venv_spec = mv.DummyVecEnv(fns[:1]).spec
    assert not venv_spec.discrete and venv_spec.action_shape == (1,)
    assert ours[0].avail_actions is None
    for t in range(1, 36):
        np.testing.assert_array_equal(ours[t].obs[:, 0], theirs[t][0])
        np.testing.assert_array_equal(ours[t].reward[:, 0], theirs[t][1].astype(np.float32))
        np.testing.assert_array_equal(ours[t].truncated[:, 0], theirs[t][3])

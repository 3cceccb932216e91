"""The PyMARL env face (marl_vec.compat.pymarl.env.PyMARLEnv) and register(): exact values
against a plain loop over native LBF, both step signatures, and the errors.

Needs only marl_vec and lbforaging: runs in the main venv and in .venv-pymarl
(scripts/install/install_pymarl_venv.sh). The trainer's own runs are in test_pymarl_train.py.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("lbforaging", reason="the lbf family needs lbforaging (marl_vec[lbf])")
import lbforaging  # noqa: E402,F401  (registers the Foraging ids)

from marl_vec.compat.pymarl import register  # noqa: E402
from marl_vec.compat.pymarl.env import PyMARLEnv  # noqa: E402

# 5x5, one food an agent can load alone: episodes end at the goal as well as at the limit.
SMALL = {"env": {"family": "lbf", "id": "Foraging-5x5-2p-1f-v3", "kwargs": {"max_episode_steps": 12}}}


def native_episodes(seed: int, episodes: int, actions: np.ndarray):
    """A plain loop over lbforaging: per step (obs, reward, done, goal)."""
    from lbforaging.foraging import ForagingEnv

    env = ForagingEnv(**{**gym.spec("Foraging-5x5-2p-1f-v3").kwargs, "max_episode_steps": 12})
    out, k = [], 0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed if ep == 0 else None)
        steps, done = [(np.stack(obs), 0.0, False, False)], False
        while not done:
            obs, rewards, done, _, _ = env.step(actions[k].tolist())
            k += 1
            goal = bool(done) and int(env.unwrapped.field.sum()) == 0
            steps.append((np.stack(obs), sum(rewards), bool(done), goal))
        out.append(steps)
    env.close()
    return out


def face_episodes(env: PyMARLEnv, episodes: int, actions: np.ndarray):
    out, k = [], 0
    for _ in range(episodes):
        obs, state = env.reset()
        np.testing.assert_array_equal(state, np.concatenate(obs))
        steps, ended = [(np.stack(obs), 0.0, False, False)], False
        while not ended:
            reward, ended, info = env.step(actions[k])
            k += 1
            assert env.get_avail_actions().tolist() == [[1] * 6] * 2
            assert set(info) <= {"episode_limit"} and (ended or not info)
            # A goal end is terminated without episode_limit; a time-limit end has it.
            steps.append((np.stack(env.get_obs()), reward, ended, ended and not info.get("episode_limit", False)))
            np.testing.assert_array_equal(env.get_state(), np.concatenate(env.get_obs()))
        out.append(steps)
    return out


def test_episodes_equal_a_plain_loop_over_lbforaging():
    actions = np.random.default_rng(5).integers(0, 6, (400, 2))
    env = PyMARLEnv(key=SMALL, seed=11)
    face = face_episodes(env, 12, actions)
    native = native_episodes(11, 12, actions)
    assert len(face) == len(native)
    for f_ep, n_ep in zip(face, native):
        assert len(f_ep) == len(n_ep)
        for (fo, fr, fd, fg), (no, nr, nd, ng) in zip(f_ep, n_ep):
            np.testing.assert_array_equal(fo, no)
            assert (fr, fd, fg) == (nr, nd, ng) and type(fr) is float
    ends = [ep[-1][3] for ep in face]
    assert any(ends) and not all(ends), "both kinds of episode end (goal and time limit) are covered"
    env.close()


def test_env_info_and_sizes():
    env = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=0)
    assert env.get_env_info() == {"n_agents": 2, "obs_shape": 12, "state_shape": 24, "n_actions": 6,
                                  "episode_limit": 50}
    assert (env.n_agents, env.episode_limit) == (2, 50)
    assert (env.get_obs_size(), env.get_state_size(), env.get_total_actions()) == (12, 24, 6)
    env.reset()
    assert env.get_obs_agent(1).shape == (12,) and env.get_avail_agent_actions(0).tolist() == [1] * 6
    assert env.get_print_info() is None and env.seed() == 0
    env.close()


def test_epymarl_step_api_splits_the_end():
    env = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=0, step_api="epymarl")
    obs, info = env.reset()
    assert len(obs) == 2 and info == {}
    for t in range(50):
        obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.int64))
        assert len(obs) == 2 and isinstance(reward, float)
    # Standing still for the whole limit: a time-limit end, not a terminal state.
    assert (terminated, truncated, info["episode_limit"]) == (False, True, True)
    env.close()


def test_seed_makes_episodes_repeat():
    a, b = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=4), PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=4)
    c = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=5)
    first = [np.stack(e.reset()[0]) for e in (a, b, c)]
    np.testing.assert_array_equal(first[0], first[1])
    assert not np.array_equal(first[0], first[2])
    for e in (a, b, c):
        e.close()


@pytest.mark.parametrize("env_args, error, match", [
    ({"key": "lbf/8x8-2p-2f-coop", "sight": 2}, TypeError, "unknown env_args sight; allowed: key, seed, env_kwargs"),
    ({"seed": 0}, ValueError, "env_args.key names the marl_vec config"),
    ({"key": "lbf/8x8-2p-2f-coop", "step_api": "gym"}, ValueError, "step_api must be one of pymarl, epymarl"),
    ({"key": {"env": {"family": "gym", "id": "Pendulum-v1"}}}, TypeError, "one discrete action per agent"),
    ({"key": "lbf/8x8-2p-2f-coop", "time_limit": 100}, ValueError, "time_limit=100 differs from the env's "
     "episode_limit 50"),
    ({"key": "lbf/8x8-2p-2f-coop", "render": True}, ValueError, "env_args.render must be False"),
    ({"key": "lbf/8x8-2p-2f-coop", "team_reward": "mean"}, ValueError, "team_reward must be one of sum, shared"),
    ({"key": "lbf/8x8-2p-2f-coop", "env_kwargs": {"sigh": 2}}, Exception, "unknown lbf option"),
])
def test_bad_env_args_are_refused(env_args, error, match):
    with pytest.raises(error, match=match):
        PyMARLEnv(**env_args)


def test_team_reward_sums_or_takes_the_shared_reward_once():
    from marl_vec.compat.pymarl.env import team_reward

    assert team_reward(np.array([0.1, 0.2, 0.3])) == float(sum([0.1, 0.2, 0.3]))
    assert team_reward(np.array([2.5, 2.5, 2.5]), "shared") == 2.5
    # LBF's rewards are per agent: "shared" must refuse them, not pick one.
    with pytest.raises(ValueError, match=r"rewards differ at this step: \[1.0, 0.0\]; use team_reward='sum'"):
        team_reward(np.array([1.0, 0.0]), "shared")


def test_bad_actions_are_refused():
    env = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=0)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step([0, 0])
    env.reset()
    with pytest.raises(ValueError, match="one action per agent \\(2\\), got 3"):
        env.step([0, 0, 0])
    with pytest.raises(ValueError, match="agent_1"):
        env.step([0, 6])
    env.close()


def test_register_puts_both_faces_and_refuses_native_names():
    envs: dict = {}
    register(envs, runner=None)
    assert envs == {"marl_vec": PyMARLEnv}
    for kwargs, match in [({"key": "gymma"}, "key='gymma' would replace the trainer's own env"),
                          ({"runner": "parallel"}, "runner='parallel' would replace the trainer's own runner"),
                          ({"key": ""}, "key must be a non-empty string")]:
        with pytest.raises(ValueError, match=match):
            register({}, {}, **kwargs)


def test_register_without_pymarlzooplus_names_the_install_script(monkeypatch):
    for name in ("pymarlzooplus", "pymarlzooplus.envs", "pymarlzooplus.runners"):
        monkeypatch.setitem(sys.modules, name, None)  # its import raises ImportError, installed or not
    with pytest.raises(ImportError, match="bash scripts/install/install_pymarl_venv.sh"):
        register()
    envs: dict = {}
    with pytest.raises(ImportError, match="register\\(envs.REGISTRY, runners.REGISTRY\\)"):
        register(envs)  # the runner face's default registry is pymarlzooplus's too

"""The rest of the VecEnv contract: env_fns of every kind, call/get_attr/set_attr, render, close, spec checks, extras."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.registry import MissingExtraError, require
from tests.helpers.scripted_envs import DyingAgentEnv


def test_env_fns_may_return_adapters_gym_envs_or_parallel_envs():
    from marl_vec.envs.gym import GymAdapter
    from mpe2 import simple_spread_v3

    for fn in (lambda: GymAdapter(gym.make("CartPole-v1")), lambda: gym.make("CartPole-v1")):
        with mv.DummyVecEnv([fn]) as venv:
            assert venv.spec.agents == ("agent_0",)
    with mv.DummyVecEnv([simple_spread_v3.parallel_env]) as venv:
        assert venv.spec.n_agents == 3
    with mv.DummyVecEnv([simple_spread_v3.env]) as venv:  # an AEC env: turn-based (tests/families/test_turn_based.py)
        assert venv.spec.turn_based and venv.spec.n_agents == 3
    with pytest.raises(TypeError, match="an env_fn returned int; allowed: a marl_vec MultiAgentEnv"):
        mv.DummyVecEnv([lambda: 3])


def test_envs_of_different_specs_cannot_share_a_batch():
    with pytest.raises(ValueError, match=r"env 1 has obs_shape=\(3,\) but env 0 has obs_shape=\(4,\)"):
        mv.DummyVecEnv([lambda: gym.make("CartPole-v1"), lambda: gym.make("Pendulum-v1")])


def test_call_get_attr_set_attr_reach_the_native_envs():
    venv = mv.DummyVecEnv([DyingAgentEnv, functools.partial(DyingAgentEnv, die_at=2)])
    venv.reset()
    assert venv.get_attr("die_at") == [3, 2]
    venv.set_attr("episode_len", [4, 5])
    assert venv.get_attr("episode_len") == [4, 5]
    venv.set_attr("episode_len", 9, indices=[1])
    assert venv.get_attr("episode_len", indices=[1]) == [9]
    assert venv.call("observation_space", "a0")[0].shape == (3,)
    frames = venv.render()
    assert len(frames) == 2 and frames[0].shape == (4, 6, 3)
    with pytest.raises(IndexError, match=r"env indices \[5\] out of range \[-2, 2\)"):
        venv.get_attr("t", indices=[5])
    with pytest.raises(ValueError, match="set_attr got 3 values for 2 envs"):
        venv.set_attr("t", [1, 2, 3])
    venv.close()


def test_close_is_idempotent_and_a_closed_env_says_so():
    closed = []

    class Tracked(DyingAgentEnv):
        def close(self):
            closed.append(1)

    venv = mv.DummyVecEnv([Tracked] * 3)
    venv.reset()
    venv.close()
    venv.close()
    assert closed == [1, 1, 1]
    with pytest.raises(mv.ClosedEnvError, match="DummyVecEnv is closed"):
        venv.step(np.ones((3, 3), dtype=np.int64))
    with mv.DummyVecEnv([Tracked]) as v:
        v.reset()
    assert v.closed and len(closed) == 4


def test_episode_statistics_average_the_last_episodes():
    venv = mv.DummyVecEnv([DyingAgentEnv], stats_window=2)
    r = venv.reset()
    lengths = []
    for _ in range(18):  # three episodes of 6 steps
        r = venv.step(r.avail_actions.argmax(-1))
        lengths += [info["episode"]["return"] for info in r.infos if "episode" in info]
    stats = venv.episode_statistics()
    assert stats["episodes"] == 3
    assert stats["return"] == pytest.approx(np.mean(lengths[-2:]))
    assert stats["length"] == 6
    venv.close()


def test_missing_extra_names_the_extra():
    with pytest.raises(MissingExtraError, match=r"no_such_engine is needed for Football but cannot be imported .*pip install 'marl_vec\[football\]'"):
        require("no_such_engine", "football", "Football")


def test_unknown_family_and_backend():
    from marl_vec.envs.registry import make_env_fn

    with pytest.raises(ValueError, match="unknown env family 'unity'; allowed: gym, atari, pettingzoo, football, starcraft2"):
        make_env_fn("unity", "x")
    with pytest.raises(ValueError, match="unknown backend 'threads'; allowed: dummy, subproc, ray"):
        mv.make_vec([DyingAgentEnv], backend="threads")

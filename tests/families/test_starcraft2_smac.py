"""The starcraft2 family's ``smac:<map>`` ids: SMAC's own env under marl_vec's conventions.

SMAC (oxwhirl) is not on the package index and needs the game, so this checks the
wrapper's conventions against a stand-in module with SMAC's ``StarCraft2Env`` API
(get_env_info, reset, step -> (reward, terminated, info), get_obs, get_state,
get_avail_actions): time-outs truncated, dead agents masked, seeds passed.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.registry import MissingExtraError, make_env


class FakeSmacEnv:
    """SMAC's API with 2 agents, 3 actions; ends by time-out after 2 steps or by a win."""

    made: list[dict] = []

    def __init__(self, map_name: str, seed: int | None = None, win_at: int | None = None):
        self.map_name, self.seed, self.win_at = map_name, seed, win_at
        self.made.append({"map_name": map_name, "seed": seed})
        self.t = 0
        self.closed = False

    def get_env_info(self):
        return {"n_agents": 2, "obs_shape": 4, "state_shape": 5, "n_actions": 3, "episode_limit": 2}

    def reset(self):
        self.t = 0
        return self.get_obs(), self.get_state()

    def step(self, actions):
        self.t += 1
        self.actions = list(actions)
        if self.win_at == self.t:
            return 1.5, True, {"battle_won": True, "dead_allies": 1, "dead_enemies": 3}
        if self.t >= 2:
            return 0.5, True, {"battle_won": False, "dead_allies": 1, "dead_enemies": 0, "episode_limit": True}
        return 0.5, False, {}

    def get_obs(self):
        return [np.full(4, self.t + i, np.float32) if self._alive(i) else np.zeros(4, np.float32) for i in range(2)]

    def get_state(self):
        return np.arange(5, dtype=np.float32) + self.t

    def _alive(self, i: int) -> bool:
        return not (i == 1 and self.t >= 1)  # agent 1 dies at the first step

    def get_avail_actions(self):
        return [[0, 1, 1] if self._alive(i) else [1, 0, 0] for i in range(2)]

    def close(self):
        self.closed = True


@pytest.fixture
def fake_smac(monkeypatch):
    smac = types.ModuleType("smac")
    env_module = types.ModuleType("smac.env")
    env_module.StarCraft2Env = FakeSmacEnv
    smac.env = env_module
    monkeypatch.setitem(sys.modules, "smac", smac)
    monkeypatch.setitem(sys.modules, "smac.env", env_module)
    FakeSmacEnv.made = []
    return FakeSmacEnv


def test_sc2_smac_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "smac", None)  # import smac fails
    with pytest.raises(MissingExtraError, match=r"smac.env is needed for smac:<map>.*marl_vec\[sc2\]"):
        make_env("starcraft2", "smac:3m")


def test_sc2_smac_time_out_is_truncated_and_dead_agents_masked(fake_smac):
    with mv.DummyVecEnv([lambda: make_env("starcraft2", "smac:3m")], env_seed=11) as venv:
        assert venv.env_info() == {"n_agents": 2, "obs_shape": 4, "state_shape": 5, "n_actions": 3, "episode_limit": 2}
        r = venv.reset()
        np.testing.assert_array_equal(r.obs[0], [[0] * 4, [1] * 4])
        r = venv.step(np.array([[2, 1]]))
        assert r.agent_mask.tolist() == [[True, False]]
        assert r.terminated.tolist() == [[False, True]] and not r.done.any()
        r = venv.step(np.array([[1, 0]]))
        assert r.done.tolist() == [True]
        assert r.terminated.tolist() == [[False, True]] and r.truncated.tolist() == [[True, False]]
        np.testing.assert_array_equal(r.final_state[0], np.arange(5) + 2)
        assert r.infos[0]["episode"]["battle_won"] == 0.0 and r.infos[0]["episode"]["return"] == 1.0
    # Seeds: env_seed went to SMAC's constructor (the first, unseeded one is replaced).
    assert [m["seed"] for m in fake_smac.made] == [None, 11]


def test_sc2_smac_win_is_terminated(fake_smac):
    env = make_env("starcraft2", "smac:3m", win_at=1)
    with mv.DummyVecEnv([lambda: env], env_seed=None) as venv:
        venv.reset()
        r = venv.step(np.array([[1, 2]]))
    assert r.terminated.tolist() == [[True, True]] and not r.truncated.any()
    assert r.infos[0]["episode"]["battle_won"] == 1.0
    assert env.native.actions == [1, 2]

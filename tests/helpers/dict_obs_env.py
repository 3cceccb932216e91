"""A PettingZoo parallel env whose observations are Dicts: a vector, a small image, a matrix and
a scalar per agent, all known from the step count and the seed (so a test can predict them).

Episodes last ``3 + seed % 3`` steps (envs seeded apart end at different steps); rewards are
each agent's action plus its index, so a reward that lands on the wrong agent shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class DictObsEnv(ParallelEnv):
    metadata = {"name": "dict_obs_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["a_0", "a_1"]
        self.agents: list[str] = []
        self.t = 0
        self.seed_ = 0
        self.length = 3

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Dict({
            "pos": spaces.Box(-100, 100, (2,), np.float32),
            "img": spaces.Box(0, 255, (3, 3, 1), np.uint8),
            "grid": spaces.Box(0, 10, (2, 2), np.float64),
            "ready": spaces.Box(0, 1, (), np.float64),
        })

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(3)

    def _obs(self) -> dict[str, dict[str, np.ndarray]]:
        out = {}
        for i, agent in enumerate(self.possible_agents):
            base = self.t + 10 * i + 100 * self.seed_
            out[agent] = {
                "pos": np.array([base, -base], np.float32),
                "img": np.full((3, 3, 1), base % 256, np.uint8),
                "grid": np.arange(4, dtype=np.float64).reshape(2, 2) + base,
                "ready": np.float64(self.t % 2),
            }
        return out

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.seed_ = seed
            self.length = 3 + seed % 3
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        rewards = {a: float(actions[a]) + i for i, a in enumerate(self.possible_agents)}
        end = self.t >= self.length
        terminations = {a: end for a in self.agents}
        truncations = {a: False for a in self.agents}
        obs = self._obs()
        infos = {a: {} for a in self.agents}
        if end:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

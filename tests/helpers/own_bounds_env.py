"""A PettingZoo ParallelEnv whose two agents have Box actions of their own sizes and bounds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

S = gym.spaces


class OwnBounds(ParallelEnv):
    """Agents ``a`` and ``b`` with the Box actions given; each one's reward is the sum of the
    action it received, so a test reads back what the env got. Episodes last 3 steps."""

    metadata = {"name": "own_bounds"}

    def __init__(self, spaces: tuple[S.Box, S.Box] = (S.Box(-1, 1, (2,), np.float32), S.Box(-3, 3, (2,), np.float32))):
        self.possible_agents = ["a", "b"]
        self._act = dict(zip(self.possible_agents, spaces))
        self._t = 0

    def observation_space(self, agent):
        return S.Box(0, 10, (1,), np.float32)

    def action_space(self, agent):
        return self._act[agent]

    def reset(self, seed=None, options=None):
        self.agents, self._t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self._t += 1
        obs = {a: np.full(1, self._t, np.float32) for a in self.agents}
        rewards = {a: float(np.sum(actions[a])) for a in self.agents}
        ended = self._t >= 3
        flags = dict.fromkeys(self.agents, ended)
        if ended:
            self.agents = []
        return obs, rewards, flags, dict.fromkeys(flags, False), {a: {} for a in flags}

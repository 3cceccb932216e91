"""Small scripted envs with known trajectories, for tests of every backend.

``DyingAgentEnv`` is a PettingZoo ParallelEnv in which:
- agent ``a1`` dies (terminated, leaves ``agents``) after ``die_at`` steps;
- the episode ends after ``episode_len`` steps, by truncation of the agents still
  alive (``ending="truncation"``, a time-out) or by their termination;
- action masks come in ``infos[agent]["action_mask"]``: at step t, action
  ``t % n`` is unavailable;
- agent ``a2`` has fewer actions than the others (padded actions);
- observations draw from the env's seeded RNG, so seeding is visible.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import gymnasium
from gymnasium import spaces
from pettingzoo import ParallelEnv


class DyingAgentEnv(ParallelEnv):
    metadata = {"name": "dying_agent_v0", "render_modes": ["rgb_array"]}

    def __init__(self, die_at: int = 3, episode_len: int = 6, ending: str = "truncation", render_mode=None):
        self.possible_agents = ["a0", "a1", "a2"]
        self.n_actions = {"a0": 4, "a1": 4, "a2": 3}
        self.die_at = die_at
        self.episode_len = episode_len
        self.ending = ending
        self.render_mode = render_mode
        self.agents: list[str] = []
        self.t = 0
        self.np_random = np.random.default_rng()

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return spaces.Discrete(self.n_actions[agent])

    def _obs(self):
        return {
            a: np.array([self.t, i, self.np_random.random()], dtype=np.float32)
            for i, a in enumerate(self.possible_agents)
            if a in self.agents
        }

    def _mask(self, agent):
        mask = np.ones(self.n_actions[agent], dtype=np.int8)
        mask[self.t % self.n_actions[agent]] = 0
        return mask

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {"action_mask": self._mask(a)} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        for agent, action in actions.items():
            assert self._mask(agent)[action], f"{agent} took unavailable action {action} at t={self.t}"
        self.t += 1
        rewards = {a: float(actions[a]) + 0.1 * i + 0.01 * self.t for i, a in enumerate(self.possible_agents) if a in actions}
        terms = {a: False for a in self.agents}
        truncs = {a: False for a in self.agents}
        if self.t == self.die_at and "a1" in self.agents:
            terms["a1"] = True
        if self.t >= self.episode_len:
            for a in self.agents:
                if not terms[a]:
                    (truncs if self.ending == "truncation" else terms)[a] = True
        obs = self._obs()
        infos = {a: {"action_mask": self._mask(a)} for a in self.agents}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self):
        return np.full((4, 6, 3), self.t, dtype=np.uint8)

    def close(self):
        pass


class SlowDyingAgentEnv(DyingAgentEnv):
    """DyingAgentEnv whose step sleeps ``delay`` s: its masks change while a worker steps it."""

    def __init__(self, delay: float = 0.4, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, actions):
        time.sleep(self.delay)
        return super().step(actions)


class FailingEnv(DyingAgentEnv):
    """Raises ``RuntimeError`` at step ``fail_at`` of its first episode (after a reset with seed ``fail_seed``)."""

    def __init__(self, fail_at: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.fail_at = fail_at
        self.steps_taken = 0

    def step(self, actions):
        self.steps_taken += 1
        if self.steps_taken == self.fail_at:
            raise RuntimeError(f"scripted failure at step {self.fail_at}")
        return super().step(actions)


class HeterogeneousEnv(ParallelEnv):
    """Two agents with different observation shapes and action counts; masks in observation dicts; no state()."""

    metadata = {"name": "heterogeneous_v0"}

    def __init__(self):
        self.possible_agents = ["big", "small"]
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent):
        n = 5 if agent == "big" else 2
        return spaces.Dict({
            "observation": spaces.Box(0, 10, (n,), np.float32),
            "action_mask": spaces.MultiBinary(4 if agent == "big" else 2),
        })

    def action_space(self, agent):
        return spaces.Discrete(4 if agent == "big" else 2)

    def _obs(self):
        return {
            "big": {"observation": np.arange(5, dtype=np.float32) + self.t,
                    "action_mask": np.array([1, 0, 1, self.t % 2], dtype=np.int8)},
            "small": {"observation": np.array([7, self.t], dtype=np.float32),
                      "action_mask": np.array([0, 1], dtype=np.int8)},
        }

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= 3
        rewards = {"big": float(actions["big"]), "small": -float(actions["small"])}
        terms = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        obs = self._obs()
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}


class SlowRecordingEnv(gymnasium.Env):
    """A one-agent gymnasium env whose step sleeps ``delay`` s and records its action
    in ``seen``: which actions an env really stepped with, in order."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, delay: float = 0.4):
        self.observation_space = spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = spaces.Discrete(3)
        self.render_mode = "rgb_array"
        self.delay = delay
        self.seen: list[int] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seen = []
        return np.zeros(1, np.float32), {}

    def step(self, action):
        time.sleep(self.delay)
        self.seen.append(int(action))
        return np.array([float(sum(self.seen))], np.float32), 1.0, False, False, {}

    def render(self):
        return np.zeros((2, 2, 3), np.uint8)

"""The fuzzed env: a PettingZoo ParallelEnv whose whole episode is drawn at reset.

At reset the env draws, from its own seeded RNG, an episode length (1 to 6 steps)
and per step and agent whether a live agent dies or a dead one respawns; an
episode ends when its length is reached (the live agents are truncated) or when no
agent is left. Observations are a Box or a Dict (``dict_obs``) made of the step,
the agent and the sum of the actions it took, so actions, seeds and respawns all
show in them. Steps draw nothing from the RNG: an env's future depends only on its
seed, the number of resets since and the actions, and a seeded reset sets its whole
state (but its count of ``resets``).

``fail_in`` (set with ``set_attr``) arms a failure: the env raises ``RuntimeError``
at its ``fail_in``-th step from now, before changing anything (so the same env can
be stepped again as if that step never was); a seeded reset disarms it, so that a
seeded reset sets the env's whole state (but its count of ``resets``). Stepping an env
never reset raises gymnasium's ``ResetNeeded``, as gymnasium's envs do.

Example:
    >>> env = FuzzEnv(dict_obs=True)
    >>> obs, _ = env.reset(seed=3)
    >>> sorted(obs["a0"])
    ['pos', 'tag']
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from pettingzoo import ParallelEnv

AGENTS = ("a0", "a1", "a2")
N_ACTIONS = 3
MAX_LEN = 6


class FuzzEnv(ParallelEnv):
    metadata = {"name": "fuzz_v0"}

    def __init__(self, dict_obs: bool = False):
        self.possible_agents = list(AGENTS)
        self.dict_obs = dict_obs
        self.agents: list[str] = []
        self.np_random = np.random.default_rng()
        self.started = False  # reset at least once
        self.fail_in: int | None = None
        self.label: Any = None  # a free attribute for get_attr/set_attr
        self.resets = 0
        self.t = 0
        self.length = 0
        self.events = np.zeros((0, len(AGENTS)), np.int64)
        self.salt = 0.0
        self.sums = np.zeros(len(AGENTS), np.float32)

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Space:
        if self.dict_obs:
            return spaces.Dict({"pos": spaces.Box(-np.inf, np.inf, (2,), np.float32), "tag": spaces.Discrete(7)})
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(N_ACTIONS)

    def _obs(self) -> dict[str, Any]:
        return self._obs_of(self.agents)

    def _obs_of(self, agents: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, a in enumerate(AGENTS):
            if a not in agents:
                continue
            if self.dict_obs:
                out[a] = {"pos": np.array([self.t + self.salt, self.sums[k]], np.float32),
                          "tag": (self.t + 2 * k + int(self.salt * 8)) % 7}
            else:
                out[a] = np.array([self.t + self.salt, k, self.sums[k]], np.float32)
        return out

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        rng = self.np_random
        self.started = True
        if seed is not None:
            self.fail_in = None
        self.resets += 1
        self.t = 0
        self.length = int(rng.integers(1, MAX_LEN + 1))
        # 0: a live agent dies at that step; 1: a dead one respawns; else nothing.
        self.events = rng.integers(0, 5, size=(self.length, len(AGENTS)))
        self.salt = float(rng.integers(0, 100)) / 8
        self.sums = np.zeros(len(AGENTS), np.float32)
        self.agents = list(AGENTS)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.started:
            raise ResetNeeded("Cannot call env.step() before calling env.reset()")
        if self.fail_in is not None:
            self.fail_in -= 1
            if self.fail_in <= 0:
                self.fail_in = None
                raise RuntimeError(f"fuzz env: armed failure at step {self.t + 1} of reset {self.resets}")
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        rewards, terms, truncs = {}, {}, {}
        for k, a in enumerate(AGENTS):
            if a not in actions:
                continue
            act = int(actions[a])
            assert 0 <= act < N_ACTIONS, act
            self.sums[k] += act
            rewards[a] = act + 0.25 * k + 0.01 * self.t
            terms[a] = bool(self.events[self.t - 1, k] == 0)
            truncs[a] = False
        last = self.t >= self.length
        # Respawns never fall on the last step: the agent would enter and leave at once.
        back = [] if last else [a for k, a in enumerate(AGENTS)
                                if a not in self.agents and self.events[self.t - 1, k] == 1]
        if last:
            for a in truncs:
                truncs[a] = not terms[a]
        seen = [a for a in AGENTS if a in actions or a in back]  # their observation this step
        self.agents = [] if last else [a for a in AGENTS if (a in actions and not terms[a]) or a in back]
        obs = self._obs_of(seen)
        return obs, rewards, terms, truncs, {a: {} for a in actions}

    def peek(self) -> tuple[int, int, Any]:
        """(resets, t, label): what call() reads."""
        return self.resets, self.t, self.label

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        pass


def box_env() -> FuzzEnv:
    return FuzzEnv(dict_obs=False)


def dict_env() -> FuzzEnv:
    return FuzzEnv(dict_obs=True)

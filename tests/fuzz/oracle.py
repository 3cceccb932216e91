"""The oracle: one plain loop per env over the same native env, written without marl_vec.

:class:`EnvOracle` holds a native :class:`~tests.fuzz.envs.FuzzEnv` and the row that
README promises for it after each reset and step (same_step autoreset): observations
zero-padded for dead agents, the agent mask, float32 rewards, terminated/truncated
per agent (a dead agent keeps the flags the env gave it, a respawned one starts
clear), ``done`` when no agent is left, the last observation of a finished episode
in ``final_obs``, and the episode summary (return, length) in the infos.

Example:
    >>> from tests.fuzz.envs import box_env
    >>> o = EnvOracle(box_env, index=1, env_seed=10)
    >>> o.reset(None); o.row.mask.tolist()     # seeded 10 + 1: its first reset
    [True, True, True]
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tests.fuzz.envs import AGENTS, N_ACTIONS

A = len(AGENTS)

def reset_seed(seed: int | None, seeded: bool, env_seed: int | None, index: int) -> int | None:
    """The seed env ``index``'s native reset gets from the batch's ``reset(seed=seed)``:
    ``seed + index``; unseeded, ``env_seed + index`` at its first reset and None after."""
    if seed is not None:
        return seed + index
    if not seeded and env_seed is not None:
        return env_seed + index
    return None



@dataclass
class Row:
    """What the batch must hold in one env's row (``info``: what the result that first
    delivers the row must carry in ``infos``; later deliveries carry ``{}``)."""

    obs: Any
    avail: np.ndarray
    mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: bool
    final_obs: Any = None
    final_avail: np.ndarray | None = None
    info: dict = field(default_factory=dict)


def _avail(mask: np.ndarray) -> np.ndarray:
    """Every action for live agents; only action 0 (no-op) for dead ones."""
    out = np.zeros((A, N_ACTIONS), bool)
    out[mask] = True
    out[~mask, 0] = True
    return out


class EnvOracle:
    """Env ``index`` of the batch, stepped alone in a plain loop."""

    def __init__(self, fn: Callable[[], Any], index: int, env_seed: int | None):
        self.env = fn()
        self.index = index
        self.env_seed = env_seed
        self.dict_obs = self.env.dict_obs
        self.seeded = False  # its first reset happened (env_seed + index was used)
        self.row: Row | None = None  # None: never reset
        self._returns = np.zeros(A, np.float64)
        self._length = 0

    # -- observations -----------------------------------------------------------

    def _obs_row(self, obs: dict[str, Any]) -> Any:
        if self.dict_obs:
            pos = np.zeros((A, 2), np.float32)
            tag = np.zeros(A, np.int64)
            for k, a in enumerate(AGENTS):
                if a in obs:
                    pos[k] = obs[a]["pos"]
                    tag[k] = obs[a]["tag"]
            return {"pos": pos, "tag": tag}
        out = np.zeros((A, 3), np.float32)
        for k, a in enumerate(AGENTS):
            if a in obs:
                out[k] = obs[a]
        return out

    def _mask(self) -> np.ndarray:
        return np.array([a in self.env.agents for a in AGENTS])

    # -- the loop -----------------------------------------------------------------

    def reset(self, seed: int | None) -> None:
        """``reset(seed=seed)`` of the batch as it reaches this env (seed + index; an
        unseeded first reset uses env_seed + index)."""
        s = reset_seed(seed, self.seeded, self.env_seed, self.index)
        self.seeded = True
        obs, _ = self.env.reset(seed=s)
        mask = self._mask()
        self._returns[:] = 0.0
        self._length = 0
        self.row = Row(self._obs_row(obs), _avail(mask), mask, np.zeros(A, np.float32), np.zeros(A, bool),
                       np.zeros(A, bool), False)

    def step(self, actions: np.ndarray) -> None:
        """Step with ``actions`` (A,) (dead agents' entries ignored). The native env's
        error propagates, and then nothing changed (the env raises before it changes)."""
        env, prev = self.env, self.row
        live = list(env.agents)
        act = {a: int(actions[AGENTS.index(a)]) for a in live}
        obs, rew, term, trunc, _ = env.step(act)  # raises ResetNeeded when never reset
        assert prev is not None
        terminated, truncated = prev.terminated.copy(), prev.truncated.copy()
        for a in act:
            k = AGENTS.index(a)
            terminated[k] = bool(term.get(a, False))
            truncated[k] = bool(trunc.get(a, False))
        for a in env.agents:
            if a not in act:  # respawned: alive again with clear flags
                k = AGENTS.index(a)
                terminated[k] = truncated[k] = False
        reward = np.array([rew.get(a, 0.0) if a in act else 0.0 for a in AGENTS], np.float32)
        self._returns += reward
        self._length += 1
        done = not env.agents
        step_obs = self._obs_row(obs)
        if not done:
            mask = self._mask()
            self.row = Row(step_obs, _avail(mask), mask, reward, terminated, truncated, False)
            return
        truncated |= ~(terminated | truncated)
        per_agent = self._returns.tolist()
        info = {"episode": {"return": sum(per_agent) / len(per_agent), "agent_returns": self._returns.copy(),
                            "length": self._length}}
        final_obs, final_avail = step_obs, _avail(np.zeros(A, bool))
        obs, _ = env.reset()  # same_step: the next episode starts at once
        self._returns[:] = 0.0
        self._length = 0
        mask = self._mask()
        self.row = Row(self._obs_row(obs), _avail(mask), mask, reward, terminated, truncated, True,
                       final_obs, final_avail, info)

    def delivered(self) -> None:
        """The row's infos reached the caller: later deliveries of the row carry ``{}``."""
        if self.row is not None:
            self.row.info = {}

    def snapshot(self) -> Row | None:
        return copy.deepcopy(self.row)

"""Autoreset modes and per-episode bookkeeping.

The episode summary put in ``infos[i]["episode"]`` at every episode end is
built here, for every backend alike:

``return``        team return: the mean over agents of each agent's summed reward
``agent_returns`` (A,) float64, each agent's summed reward
``length``        steps in the episode
plus the family statistics the adapter reports (``battle_won``, ``score``, ...).
"""

from __future__ import annotations

from collections import deque
from enum import Enum
from typing import Any, Iterable

import numpy as np


class AutoresetMode(str, Enum):
    """What happens to an env whose episode has just ended.

    - ``same_step``: reset at once; the ended episode's last observation, state and
      available actions are in ``final_obs``/``final_state``/``final_avail_actions``.
    - ``next_step``: the next step resets instead of stepping, returning the reset
      observation with zero reward and False flags (gymnasium >= 1.0).
    - ``disabled``: the env stays finished until ``reset(env_ids=...)``; stepping it raises.
    - ``one_episode``: the env is no longer stepped; it repeats its last observation
      with zero reward and its done flags (evaluation of one episode per env).
    - ``fast``: like ``same_step``, but resets by restoring a snapshot of the first
      reset (adapters that can snapshot, e.g. ALE).
    """

    SAME_STEP = "same_step"
    NEXT_STEP = "next_step"
    DISABLED = "disabled"
    ONE_EPISODE = "one_episode"
    FAST = "fast"

    @classmethod
    def parse(cls, value: "str | AutoresetMode") -> "AutoresetMode":
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown autoreset mode {value!r}; allowed: {allowed}") from None

    @property
    def keeps_final(self) -> bool:
        """Modes that reset within the step and so fill ``final_*``."""
        return self in (AutoresetMode.SAME_STEP, AutoresetMode.FAST)


class EpisodeTracker:
    """Running returns and lengths of the envs of one group, and their restart counts."""

    def __init__(self, num_envs: int, n_agents: int):
        self.returns = np.zeros((num_envs, n_agents), dtype=np.float64)
        # Lengths are steps counted by the group since each env's episode began:
        # Python ints, so a step adds 1 to one counter instead of to k lengths.
        self.steps = 0
        self._began = [0] * num_envs
        # Python ints: read at every episode end, where numpy scalars cost more.
        self.restarts = [0] * num_envs
        # Each env's row of returns, made once: episode ends read and clear them.
        self._return_rows = list(self.returns)

    def add_step(self, reward: np.ndarray) -> None:
        self.returns += reward
        self.steps += 1

    def length(self, i: int) -> int:
        """Steps of env i's running episode."""
        return self.steps - self._began[i]

    def clear(self, i: int) -> None:
        self._return_rows[i].fill(0.0)
        self._began[i] = self.steps

    def end(self, ids: list[int]) -> list[dict[str, Any]]:
        """The summaries of the episodes of envs ``ids``, which then start afresh."""
        steps, began, rows = self.steps, self._began, self._return_rows
        summaries: list[dict[str, Any]] = []
        # Row by row: for a few envs, cheaper than numpy's fancy indexing with a list.
        for i in ids:
            returns = rows[i]
            agent_returns = returns.copy()
            per_agent = agent_returns.tolist()  # Python floats: numpy's mean costs microseconds
            summaries.append({
                "return": sum(per_agent) / len(per_agent),
                "agent_returns": agent_returns,
                "length": steps - began[i],
            })
            returns.fill(0.0)
            began[i] = steps
        return summaries


class EpisodeStatistics:
    """Means over the last ``window`` finished episodes of a VecEnv.

    Every number in an episode summary (return, length, family stats) is averaged;
    ``episodes`` counts all episodes seen so far.
    """

    def __init__(self, window: int = 100):
        self.window = window
        self.episodes = 0
        self._recent: deque[dict[str, Any]] = deque(maxlen=window)

    def add(self, summaries: Iterable[dict[str, Any]]) -> None:
        for summary in summaries:
            self.episodes += 1
            self._recent.append(summary)

    def means(self) -> dict[str, float]:
        out: dict[str, float] = {"episodes": float(self.episodes)}
        if not self._recent:
            return out
        keys: dict[str, None] = {}
        for summary in self._recent:
            for key, value in summary.items():
                if isinstance(value, (bool, int, float, np.number, np.bool_)):
                    keys.setdefault(key)
        for key in keys:
            values = [float(s[key]) for s in self._recent if key in s]
            out[key] = float(np.mean(values))
        return out

    def recent(self) -> list[dict[str, Any]]:
        return list(self._recent)

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
    """Running returns and lengths of the envs of one group."""

    def __init__(self, num_envs: int, n_agents: int):
        self.returns = np.zeros((num_envs, n_agents), dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.restarts = np.zeros(num_envs, dtype=np.int64)

    def add_step(self, reward: np.ndarray) -> None:
        self.returns += reward
        self.lengths += 1

    def clear(self, i: int) -> None:
        self.returns[i] = 0.0
        self.lengths[i] = 0

    def summary(self, i: int, stats: dict[str, float]) -> dict[str, Any]:
        agent_returns = self.returns[i].copy()
        per_agent = agent_returns.tolist()  # Python floats: numpy's mean costs microseconds per episode end
        summary: dict[str, Any] = {
            "return": sum(per_agent) / len(per_agent),
            "agent_returns": agent_returns,
            "length": int(self.lengths[i]),
        }
        summary.update(stats)
        return summary


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

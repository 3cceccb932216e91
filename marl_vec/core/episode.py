"""Autoreset modes and per-episode bookkeeping.

The episode summary put in ``infos[i]["episode"]`` at every episode end is
built here, for every backend alike:

``return``        team return: the mean over agents of each agent's summed reward
``agent_returns`` (A,) float64, each agent's summed reward
``length``        steps in the episode
``restarts``      env restarts (restart_on_error) in the episode; only when there were some
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
        # restarts: over each env's life (its restart_on_error budget); _episode_restarts:
        # within its running episode (the summary's "restarts").
        self.restarts = [0] * num_envs
        self._episode_restarts = [0] * num_envs
        # Each env's row of returns, made once: episode ends read and clear them.
        self._return_rows = list(self.returns)

    def add_step(self, reward: np.ndarray) -> None:
        self.returns += reward
        self.steps += 1

    def add_env_step(self, i: int, reward: np.ndarray) -> None:
        """Env i alone took a step (the async pool steps envs one by one): its
        return grows by ``reward`` (its (A,) row) and its length by one, as
        `add_step` would give it (moving its start back a step leaves the
        shared counter, and so every other env's length, unchanged)."""
        self._return_rows[i] += reward
        self._began[i] -= 1

    def length(self, i: int) -> int:
        """Steps of env i's running episode."""
        return self.steps - self._began[i]

    def count_restart(self, i: int) -> None:
        """Env i was rebuilt (restart_on_error), in its running episode."""
        self.restarts[i] += 1
        self._episode_restarts[i] += 1

    def clear(self, i: int) -> None:
        """Env i's return and length start again from zero (its restarts stay counted)."""
        self._return_rows[i].fill(0.0)
        self._began[i] = self.steps

    def begin(self, i: int) -> None:
        """Env i starts a new episode by an explicit reset: the running one is dropped whole."""
        self.clear(i)
        self._episode_restarts[i] = 0

    def end(self, ids: list[int]) -> list[dict[str, Any]]:
        """The summaries of the episodes of envs ``ids``, which then start afresh.

        ``restarts`` is in a summary only when the env restarted in that episode.
        """
        steps, began, rows, restarts = self.steps, self._began, self._return_rows, self._episode_restarts
        summaries: list[dict[str, Any]] = []
        # Row by row: for a few envs, cheaper than numpy's fancy indexing with a list.
        for i in ids:
            returns = rows[i]
            agent_returns = returns.copy()
            per_agent = agent_returns.tolist()  # Python floats: numpy's mean costs microseconds
            summary: dict[str, Any] = {
                "return": sum(per_agent) / len(per_agent),
                "agent_returns": agent_returns,
                "length": steps - began[i],
            }
            if restarts[i]:
                summary["restarts"] = restarts[i]
                restarts[i] = 0
            summaries.append(summary)
            returns.fill(0.0)
            began[i] = steps
        return summaries


class EpisodeStatistics:
    """Means over the last ``window`` finished episodes of a VecEnv.

    - ``episodes`` (int): every episode finished so far, not only the window's.
    - ``return``, ``length``: means over the window.
    - ``restarts``: restarts per episode, the mean over every episode of the window
      (an episode without a restart counts 0); present once the window has one.
    - family stats (``battle_won``, ``score``, ...): means over the window's episodes
      that report them. An episode cut by an env restart has no outcome and reports
      none, so it does not count as a loss.

    Examples:
        >>> stats = EpisodeStatistics(window=3)
        >>> stats.add([{"return": 1.0, "length": 5, "battle_won": True},
        ...            {"return": 3.0, "length": 7, "restarts": 1}])
        >>> stats.means()
        {'episodes': 2, 'return': 2.0, 'length': 6.0, 'battle_won': 1.0, 'restarts': 0.5}
    """

    # Counts per episode that an episode leaves out when they are zero.
    ZERO_WHEN_ABSENT = ("restarts",)

    def __init__(self, window: int = 100):
        self.window = window
        self.episodes = 0
        self._recent: deque[dict[str, Any]] = deque(maxlen=window)

    def add(self, summaries: Iterable[dict[str, Any]]) -> None:
        for summary in summaries:
            self.episodes += 1
            self._recent.append(summary)

    def means(self) -> dict[str, float]:
        """The numbers above; ``episodes`` is an int (typing's float admits ints)."""
        out: dict[str, float] = {"episodes": self.episodes}
        if not self._recent:
            return out
        keys: dict[str, None] = {}
        for summary in self._recent:
            for key, value in summary.items():
                if isinstance(value, (bool, int, float, np.number, np.bool_)):
                    keys.setdefault(key)
        for key in keys:
            if key in self.ZERO_WHEN_ABSENT:
                values = [float(s.get(key, 0)) for s in self._recent]
            else:
                values = [float(s[key]) for s in self._recent if key in s]
            out[key] = float(np.mean(values))
        return out

    def recent(self) -> list[dict[str, Any]]:
        return list(self._recent)

"""The turn-based oracle: one plain ``agent_iter()`` loop per env over the same game, written without marl_vec.

:class:`GameOracle` runs env ``index``'s games as a generator around ``for agent in
env.agent_iter()``: ``last()``, ``step(None)`` for players that are out, and at each
live turn it hands the row the batch must hold to the caller and waits for the move.
docs/families/turn_based.md says what the row holds: every player's view and legal
moves (zeros for players no longer in the game), who is to move, who is alive, each
player's reward from the move just played (what ``last()`` adds up), the flags each
player last got from the game (cleared by a reset), ``done`` when the game ended,
then (same_step autoreset) the next game's first view with the last move's views in
``final_*``, and each game's returns (the sums of ``last()``) and turns in the summary.

Example:
    >>> from tests.fuzz.turn_game import game
    >>> o = GameOracle(game, index=1, env_seed=10)
    >>> o.reset(None); int(o.row.acting.sum())
    1
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Generator

import numpy as np

from tests.fuzz.oracle import reset_seed
from tests.fuzz.turn_game import N_MOVES, PLAYERS

A = len(PLAYERS)


@dataclass
class TurnRow:
    """What the batch must hold in one env's row after a reset or a turn."""

    obs: np.ndarray
    avail: np.ndarray
    acting: np.ndarray
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: bool = False
    final_obs: np.ndarray | None = None
    final_avail: np.ndarray | None = None
    summary: dict[str, Any] | None = None  # the finished game's: agent_returns, length, agent_selection
    info: dict = field(default_factory=dict)


def views(env: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every player's observation and legal moves now (zeros for players out of the game)."""
    obs, avail = np.zeros((A, 4), np.float32), np.zeros((A, N_MOVES), bool)
    for a in env.agents:
        ob = env.observe(a)
        obs[PLAYERS.index(a)], avail[PLAYERS.index(a)] = ob["observation"], ob["action_mask"].astype(bool)
    return obs, avail


def _turn(env: Any, agent: str) -> tuple[np.ndarray, np.ndarray]:
    acting = np.array([a == agent for a in PLAYERS])
    alive = np.array([a in env.agents and not (env.terminations[a] or env.truncations[a]) for a in PLAYERS])
    return acting, alive


class GameOracle:
    """Env ``index`` of the batch, its games played in a plain AEC loop."""

    def __init__(self, fn: Callable[[], Any], index: int, env_seed: int | None):
        self.env = fn()
        self.index, self.env_seed = index, env_seed
        self.seeded = False
        self.row: TurnRow | None = None
        self._loop: Generator[TurnRow, int, None] | None = None

    def reset(self, seed: int | None) -> None:
        """``reset(seed=seed)`` of the batch as it reaches this env (seed + index; an
        unseeded first reset uses env_seed + index): a new loop, at its first live turn."""
        s = reset_seed(seed, self.seeded, self.env_seed, self.index)
        self.seeded = True
        self._loop = self._games(s)
        self.row = next(self._loop)
        self.fresh = True  # no move of this game played yet

    def wait(self) -> None:
        """``WAIT`` as the mover's action: no turn is played; the row stays, with zero reward,
        and the flags of the game just ended (or reset) cleared."""
        assert self.row is not None
        row = self.row
        self.row = dataclasses.replace(row, reward=np.zeros(A, np.float32), done=False, final_obs=None,
                                       final_avail=None, summary=None, info={})
        if self.fresh:
            self.row.terminated, self.row.truncated = np.zeros(A, bool), np.zeros(A, bool)

    def step(self, move: int) -> None:
        """The mover plays ``move`` (legal: the batch refuses illegal ones before the game sees them)."""
        assert self._loop is not None, "never reset"
        self.row = self._loop.send(move)
        self.fresh = self.row.done

    def delivered(self) -> None:
        if self.row is not None:
            self.row.info = {}

    @property
    def mover(self) -> int:
        assert self.row is not None
        return int(np.flatnonzero(self.row.acting)[0])

    def _games(self, seed: int | None) -> Generator[TurnRow, int, None]:
        env = self.env
        env.reset(seed=seed)
        flags = (np.zeros(A, bool), np.zeros(A, bool))
        row: TurnRow | None = None  # the row of the move just played, until the next live turn completes it
        while True:
            returns, turns = np.zeros(A), 0
            final: tuple[np.ndarray, np.ndarray] | None = None
            for agent in env.agent_iter():
                _, reward, term, trunc, _ = env.last()
                returns[PLAYERS.index(agent)] += reward
                if term or trunc:
                    env.step(None)
                    continue
                obs, avail = views(env)
                acting, alive = _turn(env, agent)
                if row is None:  # the game's first view, after a reset
                    row = TurnRow(obs, avail, acting, alive, np.zeros(A, np.float32), *map(np.copy, flags))
                else:
                    row.obs, row.avail, row.acting, row.agent_mask = obs, avail, acting, alive
                move = yield row
                env.step(move)
                turns += 1
                reward_now = np.array([env.rewards.get(a, 0.0) for a in PLAYERS], np.float32)
                term_now, trunc_now = flags[0].copy(), flags[1].copy()
                for a in env.agents:  # a player out of the game keeps the flags it last got
                    term_now[PLAYERS.index(a)] = env.terminations[a]
                    trunc_now[PLAYERS.index(a)] = env.truncations[a]
                flags = (term_now, trunc_now)
                final = views(env)  # every player's view right after the move
                row = TurnRow(final[0], final[1], np.zeros(A, bool), np.zeros(A, bool), reward_now,
                              term_now.copy(), trunc_now.copy())
                row.summary = {"agent_selection": env.agent_selection}
            # The game ended: its last move's row holds the final views; the next game starts (same_step).
            assert row is not None and final is not None
            row.truncated |= ~(row.terminated | row.truncated)
            row.done, row.final_obs, row.final_avail = True, final[0], final[1]
            row.summary.update(agent_returns=returns, length=turns)
            row.info = {"episode": True}
            env.reset(seed=None)
            flags = (np.zeros(A, bool), np.zeros(A, bool))

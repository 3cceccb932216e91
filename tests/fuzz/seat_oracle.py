"""The opponent seat's oracle: a plain ``agent_iter()`` game per env, the learner's moves from the fuzzer.

:class:`SeatOracle` plays env ``index``'s games in a plain AEC loop: the learner's seat
moves what the fuzzer sends, every other seat what :class:`Opponent` picks from that
player's own observation and legal moves (``last()``), as the seat's opponent sees them.
What the seat (marl_vec/compat/opponent.py) must return for the learner, per learner step:
its view and legal moves when it is next to move; as reward what ``last()`` adds up for it
from its move to its next turn (the first step of a game also what it got from the
opponents' opening moves); ``done`` when the game ended, with the learner's view after the
last move in ``final_*`` and the learner's return (the sum of its ``last()`` rewards over
the game) and number of moves in the summary, then the next game's first view.

Example:
    >>> import functools
    >>> from tests.fuzz.turn_game import seat_game
    >>> o = SeatOracle(functools.partial(seat_game, "p0"), 0, 3, "p0", Opponent())
    >>> o.reset(None); int(o.row.avail.sum())
    3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generator

import numpy as np

from tests.fuzz.oracle import reset_seed
from tests.fuzz.turn_game import N_MOVES


class Opponent:
    """A deterministic opponent: the legal move picked by the mover's own observation (so the
    batch's opponent and the plain loop's agree whatever the batching); ``fail_in`` arms it to
    raise ``RuntimeError`` at its ``fail_in``-th call from now (a call: the rows of one batch step)."""

    def __init__(self) -> None:
        self.fail_in: int | None = None
        self.calls = 0

    @staticmethod
    def pick(obs: np.ndarray, avail: np.ndarray) -> int:
        legal = np.flatnonzero(avail)
        return int(legal[int(obs[0] * 5 + obs[1] + obs[2] * 3 + obs[3] * 8) % len(legal)])

    def __call__(self, obs: np.ndarray, avail: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.fail_in is not None:
            self.fail_in -= 1
            if self.fail_in <= 0:
                self.fail_in = None
                raise RuntimeError(f"fuzz opponent: armed failure at call {self.calls}")
        return np.array([self.pick(o, a) for o, a in zip(obs, avail)], np.int64)


@dataclass
class SeatRow:
    obs: np.ndarray
    avail: np.ndarray
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    done: bool = False
    final_obs: np.ndarray | None = None
    final_avail: np.ndarray | None = None
    summary: dict[str, Any] | None = None  # the finished game's: return (the learner's), length (its moves)
    info: dict = field(default_factory=dict)


class SeatOracle:
    """Env ``index``'s games from the learner's seat ``seat``, in a plain AEC loop."""

    def __init__(self, fn: Callable[[], Any], index: int, env_seed: int | None, seat: str, opponent: Opponent):
        self.env, self.index, self.env_seed, self.seat = fn(), index, env_seed, seat
        self.opponent = opponent
        self.seeded = False
        self.row: SeatRow | None = None
        self._loop: Generator[SeatRow, int, None] | None = None

    def reset(self, seed: int | None) -> None:
        s = reset_seed(seed, self.seeded, self.env_seed, self.index)
        self.seeded = True
        self._loop = self._games(s)
        self.row = next(self._loop)

    def step(self, move: int) -> None:
        assert self._loop is not None
        self.row = self._loop.send(move)

    def delivered(self) -> None:
        if self.row is not None:
            self.row.info = {}

    def _view(self) -> tuple[np.ndarray, np.ndarray]:
        env = self.env
        if self.seat not in env.agents:
            return np.zeros(4, np.float32), np.zeros(N_MOVES, bool)
        ob = env.observe(self.seat)
        return ob["observation"].copy(), ob["action_mask"].astype(bool)

    def _games(self, seed: int | None) -> Generator[SeatRow, int, None]:
        env, seat = self.env, self.seat
        env.reset(seed=seed)
        row: SeatRow | None = None
        while True:
            acc, returns, moves = 0.0, 0.0, 0  # acc: the learner's reward not yet handed out
            final = self._view()
            for agent in env.agent_iter():
                obs, reward, term, trunc, _ = env.last()
                if agent == seat:
                    acc += reward
                    returns += reward
                if term or trunc:
                    if agent == seat:
                        flags = (bool(term), bool(trunc))
                    env.step(None)
                    continue
                if agent != seat:
                    env.step(self.opponent.pick(obs["observation"], obs["action_mask"]))
                    final = self._view()
                    continue
                view = self._view()
                if row is None:
                    row = SeatRow(*view)  # after a reset: reward 0
                row.obs, row.avail = view
                if moves:  # else the opening moves' rewards (acc) count in the game's first step
                    row.reward, acc = float(acc), 0.0
                move = yield row
                env.step(move)
                moves += 1
                final = self._view()
                row = SeatRow(*final)
            assert row is not None
            row.reward, row.done = float(acc), True
            row.terminated, row.truncated = flags
            row.final_obs, row.final_avail = final
            row.summary, row.info = {"return": returns, "length": moves}, {"episode": True}
            env.reset(seed=None)

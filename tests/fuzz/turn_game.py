"""The fuzzed turn-based game: a scripted PettingZoo ``AECEnv`` whose whole game is drawn at reset.

Three players move in turn (p0, p1, p2, skipping players no longer in the game). At
reset the game draws, from its own seeded RNG, its length (1 to ``MAX_TURNS`` moves),
who moves first, and per move which player (if any) is knocked out by it: the mover
itself or another, so players leave mid-game (terminated, then stepped with ``None`` by
the AEC protocol) while the others play on. Every move rewards every player still in
the game: the mover ``move + 0.5``, each other ``-(move + 1) / 4`` (rewards to players
not acting). The game ends when its length is reached (the players left are truncated)
or when one player is left (terminated). One move per turn is illegal (its action
mask says so; the game raises ``ValueError`` if it is played anyway).

``protect`` names a player that moves at least once in every game: before its first
move no knock-out hits it or leaves fewer than two players, and the game outlasts its
length. The opponent-seat fuzzer (tests/fuzz/seat_machine.py) protects the learner's
seat: a game the learner never moves in has no learner step to report.

Observations are ``{"observation": (turn, player, own sum of moves, salt), "action_mask"}``
as PettingZoo's classic games give them: whole numbers and eighths, so that sums are
exact in float32, and the mover's legal moves (no legal move for the others). Moves
draw nothing from the RNG: a game depends only on its seed, the resets since and the moves.

Example:
    >>> env = FuzzGame()
    >>> env.reset(seed=3)
    >>> sorted(env.observe(env.agent_selection))
    ['action_mask', 'observation']
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

PLAYERS = ("p0", "p1", "p2")
N_MOVES = 4
MAX_TURNS = 8


class FuzzGame(AECEnv):
    metadata = {"name": "fuzz_game_v0", "is_parallelizable": False}

    def __init__(self, knockouts: bool = True, protect: str | None = None):
        super().__init__()
        self.protect = protect  # a player that moves at least once in every game (see the module doc)
        self.possible_agents = list(PLAYERS)
        self.knockouts = knockouts
        self.np_random = np.random.default_rng()
        self.agents: list[str] = []
        self.label: Any = None  # a free attribute for get_attr/set_attr
        self.resets = 0
        self.t = 0
        self.length = 0
        self.knock = np.zeros(0, np.int64)
        self.salt = 0.0
        self.sums = np.zeros(len(PLAYERS), np.float32)

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (4,), np.float32),
                            "action_mask": spaces.MultiBinary(N_MOVES)})

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(N_MOVES)

    def illegal(self) -> int:
        """The move the mover may not play at this turn."""
        return (self.t + int(self.salt * 8)) % N_MOVES

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        k = PLAYERS.index(agent)
        mask = np.zeros(N_MOVES, np.int8)
        if agent == self.agent_selection and not (self.terminations[agent] or self.truncations[agent]):
            mask[:] = 1
            mask[self.illegal()] = 0
        return {"observation": np.array([self.t, k, self.sums[k], self.salt], np.float32), "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        rng = self.np_random
        self.resets += 1
        self.t = 0
        self.length = int(rng.integers(1, MAX_TURNS + 1))
        first = int(rng.integers(0, len(PLAYERS)))
        # Per move: the player it knocks out (-1: none; a player already out: none).
        knock = rng.integers(-4, len(PLAYERS), size=self.length)
        self.knock = np.where(knock < 0, -1, knock) if self.knockouts else np.full(self.length, -1)
        self.salt = float(rng.integers(0, 64)) / 8
        self.sums = np.zeros(len(PLAYERS), np.float32)
        self.agents = list(PLAYERS)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = PLAYERS[first]
        self.moved = {a: False for a in PLAYERS}

    def _next_live(self, after: str) -> str:
        k = PLAYERS.index(after)
        for j in range(1, len(PLAYERS) + 1):
            a = PLAYERS[(k + j) % len(PLAYERS)]
            if a in self.agents and not (self.terminations[a] or self.truncations[a]):
                return a
        return after

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        move = int(action)
        if not 0 <= move < N_MOVES or move == self.illegal():
            raise ValueError(f"fuzz game: illegal move {move} for {agent} at turn {self.t}")
        self._cumulative_rewards[agent] = 0.0
        k = PLAYERS.index(agent)
        self.sums[k] += move
        for a in self.agents:
            self.rewards[a] = move + 0.5 if a == agent else -(move + 1) / 4
        out = int(self.knock[min(self.t, self.length - 1)])
        self.t += 1
        self.moved[agent] = True
        waiting = self.protect is not None and not self.moved[self.protect]  # the game goes on until it moved
        if out >= 0 and PLAYERS[out] in self.agents and not (waiting and (
                PLAYERS[out] == self.protect or sum(not self.terminations[a] for a in self.agents) <= 2)):
            self.terminations[PLAYERS[out]] = True
        left = [a for a in self.agents if not self.terminations[a]]
        if len(left) <= 1:
            for a in left:
                self.terminations[a] = True
        elif self.t >= self.length and not waiting:
            for a in left:
                self.truncations[a] = True
        self.agent_selection = self._next_live(agent)
        self._accumulate_rewards()
        self._deads_step_first()

    def peek(self) -> tuple[int, int, Any]:
        """(resets, t, label): what call() reads."""
        return self.resets, self.t, self.label

    def close(self) -> None:
        pass


def game() -> FuzzGame:
    return FuzzGame()


env = game  # the PettingZoo family's constructor name: a config's env id "tests.fuzz.turn_game.env"


def seat_game(seat: str) -> FuzzGame:
    return FuzzGame(protect=seat)

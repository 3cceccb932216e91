"""A small PettingZoo AEC game for the opponent seat's tests: two players take turns,
every move costs the *other* player 1, and the game ends after ``moves`` moves.

So a player's return is known without playing (minus the other player's moves), and a
reward lost or counted twice shows. Moves are 0, 1 and 2; the action mask makes 2
illegal, so a test can send an illegal move on purpose (with validation off the game
itself raises ``ValueError`` for it, as a game without PettingZoo's illegal-move
wrapper does). Infos say whether they come from the reset or from a move.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

ILLEGAL = 2


class TollGame(AECEnv):
    metadata = {"name": "toll_v0", "is_parallelizable": False, "render_modes": []}

    def __init__(self, moves: int = 4):
        super().__init__()
        self.moves = moves
        self.possible_agents = ["player_0", "player_1"]
        self.observation_spaces = {a: spaces.Dict({
            "observation": spaces.Box(0, moves, (1,), np.float32),
            "action_mask": spaces.Box(0, 1, (3,), np.int8)}) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(3) for a in self.possible_agents}
        self.played = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        return {"observation": np.array([self.played], np.float32), "action_mask": np.array([1, 1, 0], np.int8)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {"phase": "reset"} for a in self.agents}
        self.agent_selection = self.agents[0]
        self.played = 0

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if int(action) == ILLEGAL:
            raise ValueError(f"toll_v0: move {action} is illegal for {agent}")
        other = self.agents[1 - self.agents.index(agent)]
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        self.rewards[other] = -1.0
        self.played += 1
        self.infos = {a: {"phase": "move", "played": self.played} for a in self.agents}
        if self.played >= self.moves:
            self.terminations = {a: True for a in self.agents}
        self.agent_selection = other
        self._accumulate_rewards()


def toll_game(moves: int = 4) -> TollGame:
    return TollGame(moves)


def plain_return(agent: str, moves: int = 4) -> tuple[float, int]:
    """One game in a plain ``agent_iter`` loop, always playing move 0: ``agent``'s return
    (the sum of what ``last()`` gave it) and its number of moves."""
    env = TollGame(moves)
    env.reset(seed=0)
    total, played = 0.0, 0
    for who in env.agent_iter():
        _, reward, term, trunc, _ = env.last()
        if who == agent:
            total += reward
        if term or trunc:
            env.step(None)
            continue
        played += who == agent
        env.step(0)
    return total, played

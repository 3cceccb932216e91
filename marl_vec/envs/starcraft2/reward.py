"""SMAC's shaped team reward: damage and kills dealt, a win bonus, normalised.

`SmacReward` keeps the previous health of every unit and turns one
step's change into SMAC's ``reward_battle``; the adapter adds the win or
defeat bonus and `SmacReward.scale` normalises so that a perfect episode
sums to ``scale_rate``. Imports: numpy and `units` only.

Example::

    reward = SmacReward(n_agents=3, n_enemies=3)
    reward.start(allies, enemies)                    # at reset
    r = reward.battle(allies, enemies, dead_before_allies, dead_before_enemies)
    r = reward.scale(r + reward.win)
"""

from __future__ import annotations

import numpy as np

from marl_vec.envs.starcraft2.units import UnitSlots


class SmacReward:
    """SMAC's reward parameters (same names and defaults, less the ``reward_`` prefix) and its state."""

    def __init__(self, n_agents: int, n_enemies: int, *, win: float = 200.0, defeat: float = 0.0,
                 death_value: float = 10.0, negative_scale: float = 0.5, only_positive: bool = True,
                 scale_on: bool = True, scale_rate: float = 20.0):
        self.win, self.defeat = win, defeat
        self.death_value, self.negative_scale = death_value, negative_scale
        self.only_positive, self.scale_on, self.scale_rate = only_positive, scale_on, scale_rate
        self.n_enemies = n_enemies
        self.max_reward = 0.0  # SMAC's normaliser, set at start from the enemies on the map
        self._prev_ally_hp = np.zeros(n_agents)
        self._prev_enemy_hp = np.zeros(n_enemies)

    def start(self, allies: UnitSlots, enemies: UnitSlots) -> None:
        """A new episode: remember the units' health and set the normaliser from the enemies present."""
        self._prev_ally_hp[:] = allies.health + allies.shield
        self._prev_enemy_hp[:] = enemies.health + enemies.shield
        e = enemies
        self.max_reward = (self.n_enemies * self.death_value + self.win
                           + float(np.sum((e.health_max + e.shield_max)[e.alive])))

    def battle(self, allies: UnitSlots, enemies: UnitSlots, dead_before_a: np.ndarray, dead_before_e: np.ndarray) -> float:
        """SMAC's ``reward_battle``: damage and kills dealt (minus those taken, if asked)."""
        a, e = allies, enemies
        hp_a, hp_e = a.health + a.shield, e.health + e.shield
        delta_deaths = 0.0
        new_dead_a = ~a.alive & ~dead_before_a
        new_dead_e = ~e.alive & ~dead_before_e
        # Damage: health lost by units alive before (killed ones lose their previous health).
        delta_enemy = float(np.sum((self._prev_enemy_hp - hp_e)[~dead_before_e]))
        delta_ally = float(np.sum((self._prev_ally_hp - hp_a)[~dead_before_a]))
        delta_deaths += self.death_value * float(new_dead_e.sum())
        if not self.only_positive:
            delta_deaths -= self.death_value * self.negative_scale * float(new_dead_a.sum())
            reward = delta_enemy + delta_deaths - delta_ally * self.negative_scale
        else:
            reward = delta_enemy + delta_deaths
        self._prev_ally_hp[:] = hp_a
        self._prev_enemy_hp[:] = hp_e
        return abs(reward) if self.only_positive else reward

    def scale(self, reward: float) -> float:
        """Normalised so that a perfect episode sums to ``scale_rate`` (when ``scale_on``)."""
        if self.scale_on and self.max_reward:
            return reward / self.max_reward * self.scale_rate
        return reward

"""The units: per-slot arrays of each side, filled from pysc2's ``raw_units``.

An agent is a slot of `UnitSlots`; `Roster` reads each
observation's raw units into the allies' and enemies' slots by SMAC's rules
(allies in SMAC's order, a unit missing from the observation is dead, on
mini-games reinforcements take the slots of dead units). Positions are world
units with y up. Imports: numpy and `maps` only.

Example::

    roster = Roster("3m", MAPS["3m"])
    roster.read(timestep.observation, first=True, raw_scale=1.0, map_y=32.0)
    roster.allies.alive, roster.allies.health
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marl_vec.envs.starcraft2.maps import TYPE_BY_ID, UNIT_TYPES, MapInfo

_SELF, _ENEMY = 1, 4  # pysc2 features.PlayerRelative


@dataclass
class UnitSlots:
    """Per-slot unit data of one side, allocated once per adapter; positions in world units (y up).

    ``type_bits`` is the width of the type one-hot (``len(MapInfo.unit_types)``).
    """

    n: int
    type_bits: int = 0
    tag: np.ndarray = field(init=False)
    alive: np.ndarray = field(init=False)
    health: np.ndarray = field(init=False)
    health_max: np.ndarray = field(init=False)
    shield: np.ndarray = field(init=False)
    shield_max: np.ndarray = field(init=False)
    cooldown: np.ndarray = field(init=False)  # normalised weapon cooldown, or energy
    x: np.ndarray = field(init=False)
    y: np.ndarray = field(init=False)
    type_index: np.ndarray = field(init=False)  # into MapInfo.unit_types, -1: none
    onehot: np.ndarray = field(init=False)  # (n, max(type_bits, 1)): type_index as a one-hot
    cooldown_max: np.ndarray = field(init=False)
    medivac: np.ndarray = field(init=False)  # medivacs report energy instead of cooldown
    raw_index: np.ndarray = field(init=False)  # row in the last raw_units: pysc2's raw actions name units by it

    def __post_init__(self) -> None:
        n = self.n
        self.tag = np.zeros(n, np.int64)
        self.alive = np.zeros(n, bool)
        for name in ("health", "health_max", "shield", "shield_max", "cooldown", "x", "y"):
            setattr(self, name, np.zeros(n, np.float64))
        self.type_index = np.full(n, -1, np.int64)
        self.onehot = np.zeros((n, max(self.type_bits, 1)), np.float64)
        self.cooldown_max = np.ones(n, np.float64)
        self.medivac = np.zeros(n, bool)
        self.raw_index = np.zeros(n, np.int64)

    def clear(self) -> None:
        self.tag.fill(0)
        self.alive.fill(False)
        self.health.fill(0)
        self.shield.fill(0)


class Roster:
    """Both sides' slots for one map, and the reading of pysc2's raw units into them."""

    def __init__(self, map_name: str, info: MapInfo):
        self.map_name, self.info = map_name, info
        type_bits = len(info.unit_types)
        self.allies, self.enemies = UnitSlots(info.n_agents, type_bits), UnitSlots(info.n_enemies, type_bits)
        self._seen = {id(self.allies): np.zeros(info.n_agents, bool), id(self.enemies): np.zeros(info.n_enemies, bool)}
        self._min_ally_type = 0

    def clear(self) -> None:
        self.allies.clear()
        self.enemies.clear()

    def _type_index(self, unit_type: int, side_types: tuple[str, ...], min_type: int) -> int:
        name = TYPE_BY_ID.get(unit_type)
        if name is None and side_types:
            # SMAC's maps give our units custom type ids in the order of its map table.
            k = unit_type - min_type
            name = side_types[k] if 0 <= k < len(side_types) else side_types[0]
        return self.info.unit_types.index(name) if name in self.info.unit_types else -1

    def read(self, observation: Any, first: bool, raw_scale: float, map_y: float) -> None:
        """Update the slots from ``observation["raw_units"]``; ``first``: the episode's first observation.

        Raises:
            ValueError: the first observation has more units than the map's slots.
        """
        raw = np.asarray(observation["raw_units"])
        # Columns of pysc2.lib.features.FeatureUnit.
        UT, ALLIANCE, HEALTH, SHIELD, ENERGY, X, Y, COOLDOWN, TAG = 0, 1, 2, 3, 4, 12, 13, 25, 29
        s = raw_scale
        n_agents, n_enemies = self.info.n_agents, self.info.n_enemies
        if raw.ndim != 2 or (len(raw) and raw.shape[1] <= TAG):
            raw = np.zeros((0, TAG + 1), np.int64)
        mine_idx = np.flatnonzero(raw[:, ALLIANCE] == _SELF)
        theirs_idx = np.flatnonzero(raw[:, ALLIANCE] == _ENEMY)
        if first:
            # SMAC's order: allies by (type, x, y) (raw y points down); enemies as the game lists them.
            m = raw[mine_idx]
            mine_idx = mine_idx[np.lexsort((-m[:, Y], m[:, X], m[:, UT]))]
        mine, theirs = raw[mine_idx], raw[theirs_idx]
        if first:
            if len(mine) > n_agents or len(theirs) > n_enemies:
                raise ValueError(
                    f"map {self.map_name!r} started with {len(mine)} own and {len(theirs)} enemy units; the adapter "
                    f"expects at most {n_agents} and {n_enemies} (set map_info to match the map)"
                )
            self._min_ally_type = int(mine[:, UT].min()) if len(mine) else 0
        for units, rows, indices, side_types, reinforce in (
            (self.allies, mine, mine_idx, self.info.ally_types, not self.info.smac or first),
            (self.enemies, theirs, theirs_idx, self.info.enemy_types, True),
        ):
            seen = self._seen[id(units)]
            seen.fill(False)
            slot_of = {int(t): i for i, t in enumerate(units.tag) if units.tag[i] != 0}
            for r, raw_i in zip(rows, indices.tolist()):
                tag = int(r[TAG])
                i = slot_of.get(tag)
                if i is None:
                    if not reinforce:
                        continue
                    free = np.flatnonzero(~units.alive & ~seen)
                    if not len(free):
                        continue  # more units than slots: the extra ones are not observed
                    i = int(free[0])
                    units.tag[i] = tag
                    name = TYPE_BY_ID.get(int(r[UT])) or (side_types[0] if side_types else None)
                    t = UNIT_TYPES.get(name) if name else None
                    units.health_max[i] = t.health_max if t else max(float(r[HEALTH]), 1.0)
                    units.shield_max[i] = t.shield_max if t else float(r[SHIELD])
                    units.type_index[i] = self._type_index(int(r[UT]), side_types, self._min_ally_type)
                    units.onehot[i].fill(0)
                    if units.type_index[i] >= 0:
                        units.onehot[i, units.type_index[i]] = 1
                    units.cooldown_max[i] = t.max_cooldown if t else 1.0
                    units.medivac[i] = name == "medivac"
                seen[i] = True
                units.raw_index[i] = raw_i
                units.health[i] = float(r[HEALTH])
                units.shield[i] = float(r[SHIELD])
                units.alive[i] = r[HEALTH] > 0
                # The centre of the raw pixel (the inverse of pysc2's raw action transform).
                units.x[i] = (float(r[X]) + 0.5) / s
                units.y[i] = map_y - (float(r[Y]) + 0.5) / s
                units.cooldown[i] = float(r[ENERGY] if units.medivac[i] else r[COOLDOWN]) / units.cooldown_max[i]
            # A unit missing from the observation is dead (SMAC's rule).
            gone = units.alive & ~seen
            units.alive[gone] = False
            units.health[gone] = 0.0
            units.shield[gone] = 0.0

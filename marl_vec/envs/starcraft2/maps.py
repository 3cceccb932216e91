"""The map table: unit types and what each StarCraft II map holds.

Static facts the adapter needs before a game starts (the spec depends on
them): unit counts, episode limits, unit types with SMAC's normalisers, and
whether a map is a SMAC battle or a pysc2 mini-game. Plain data: this module
imports nothing from marl_vec but the error for an unknown map (nor pysc2).

Examples:
    >>> MAPS["3m"].n_agents, MAPS["3m"].episode_limit
    (3, 60)
    >>> UNIT_TYPES["stalker"].shield_max
    80
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from marl_vec.envs.extras import UnknownEnvError


@dataclass(frozen=True)
class UnitType:
    """Static facts SMAC uses to normalise a unit's features."""

    pysc2_id: int  # pysc2.lib.units id of the standard unit
    health_max: float
    shield_max: float
    max_cooldown: float  # weapon cooldown in game loops (energy for medivacs)


# SMAC's values; roach's cooldown is its weapon period in game loops (SMAC has no roaches).
UNIT_TYPES: dict[str, UnitType] = {
    "marine": UnitType(48, 45, 0, 15),
    "marauder": UnitType(51, 125, 0, 25),
    "medivac": UnitType(54, 150, 0, 200),
    "stalker": UnitType(74, 80, 80, 35),
    "zealot": UnitType(73, 100, 50, 22),
    "colossus": UnitType(4, 200, 150, 24),
    "zergling": UnitType(105, 35, 0, 11),
    "baneling": UnitType(9, 30, 0, 1),
    "hydralisk": UnitType(107, 90, 0, 10),
    "roach": UnitType(110, 145, 0, 23),
}
TYPE_BY_ID: dict[int, str] = {t.pysc2_id: name for name, t in UNIT_TYPES.items()}


@dataclass(frozen=True)
class MapInfo:
    """What the adapter must know of a map before the game starts (the spec needs it).

    Attributes:
        n_agents, n_enemies: unit counts (enemy slots: the most enemies alive at once).
        episode_limit: steps before the episode is truncated.
        ally_types, enemy_types: unit type names (keys of `UNIT_TYPES`).
        unit_types: the one-hot type list of the features; empty means no type bits
            (SMAC: only maps with several ally types have them).
        smac: a SMAC battle map (two players, ends when a side is dead, shaped
            reward); else a pysc2 mini-game (one player, ends on its own timer,
            reinforcements take the slots of dead units, score reward).
        directory: folder under ``SC2PATH/Maps``.
    """

    n_agents: int
    n_enemies: int
    episode_limit: int
    ally_types: tuple[str, ...]
    enemy_types: tuple[str, ...]
    unit_types: tuple[str, ...] = ()
    smac: bool = True
    race: str = "terran"
    enemy_race: str = "terran"
    directory: str = "SMAC_Maps"

    @property
    def ally_shields(self) -> bool:
        return any(UNIT_TYPES[t].shield_max > 0 for t in self.ally_types)

    @property
    def enemy_shields(self) -> bool:
        return any(UNIT_TYPES[t].shield_max > 0 for t in self.enemy_types)


_M, _SZ = ("marine",), ("stalker", "zealot")
# SMAC's map table (smac/env/starcraft2/maps/smac_maps.py) and pysc2's mini-games
# that have units to control. 336 = 120 s of game time at step_mul 8.
MAPS: dict[str, MapInfo] = {
    "3m": MapInfo(3, 3, 60, _M, _M),
    "8m": MapInfo(8, 8, 120, _M, _M),
    "25m": MapInfo(25, 25, 150, _M, _M),
    "5m_vs_6m": MapInfo(5, 6, 70, _M, _M),
    "8m_vs_9m": MapInfo(8, 9, 120, _M, _M),
    "10m_vs_11m": MapInfo(10, 11, 150, _M, _M),
    "2m_vs_1z": MapInfo(2, 1, 150, _M, ("zealot",), enemy_race="protoss"),
    "2s3z": MapInfo(5, 5, 120, _SZ, _SZ, _SZ, race="protoss", enemy_race="protoss"),
    "3s5z": MapInfo(8, 8, 150, _SZ, _SZ, _SZ, race="protoss", enemy_race="protoss"),
    "3s_vs_5z": MapInfo(3, 5, 250, ("stalker",), ("zealot",), race="protoss", enemy_race="protoss"),
    "DefeatRoaches": MapInfo(9, 4, 336, _M, ("roach",), ("marine", "roach"), smac=False, directory="mini_games"),
    "DefeatZerglingsAndBanelings": MapInfo(
        9, 10, 336, _M, ("zergling", "baneling"), ("marine", "zergling", "baneling"), smac=False, directory="mini_games"
    ),
    "FindAndDefeatZerglings": MapInfo(3, 25, 504, _M, ("zergling",), smac=False, directory="mini_games"),
}


def resolve_map(map_name: str, map_info: MapInfo | dict[str, Any] | None) -> MapInfo:
    """The `MapInfo` of ``map_name``: from `MAPS`, overridden or given by ``map_info``.

    Raises:
        UnknownEnvError: an unknown map without ``map_info`` (a ``ValueError``).
        ValueError: bad ``map_info`` fields, or an unknown unit type.
    """
    info = MAPS.get(map_name)
    if isinstance(map_info, dict):
        if info is None:
            try:
                info = MapInfo(**map_info)
            except TypeError as exc:
                raise ValueError(f"map_info for {map_name!r}: {exc}; fields: {', '.join(MapInfo.__dataclass_fields__)}") from None
        else:
            info = replace(info, **map_info)
    elif isinstance(map_info, MapInfo):
        info = map_info
    if info is None:
        raise UnknownEnvError(
            f"unknown StarCraft II map {map_name!r}; known: {', '.join(MAPS)}; for another SMAC map "
            "file under SC2PATH/Maps pass map_info={'n_agents': .., 'n_enemies': .., 'episode_limit': .., "
            "'ally_types': [..], 'enemy_types': [..]}"
        )
    for t in info.ally_types + info.enemy_types + info.unit_types:
        if t not in UNIT_TYPES:
            raise ValueError(f"map {map_name!r}: unknown unit type {t!r}; allowed: {', '.join(UNIT_TYPES)}")
    return info

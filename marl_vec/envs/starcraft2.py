"""StarCraft II micromanagement on pysc2's raw interface, after SMAC's design.

One adapter, :class:`StarCraft2Env`, drives ``pysc2.env.sc2_env.SC2Env`` (or any
object with its interface, such as pysc2's ``mock_sc2_env.SC2TestEnv``) and
presents it the way SMAC does:

- agents: the controlled player's units, a fixed count per map (:data:`MAPS`);
- per-agent observation: move feasibility (N, S, E, W); for each enemy
  ``[attackable, distance, rel x, rel y, health, (shield), (unit type one-hot)]``;
  for each other ally ``[visible, distance, rel x, rel y, health, (shield), (type),
  (last action)]``; own ``[health, (shield), (type), (agent id), (last action)]``.
  Distances and offsets are divided by the sight range; health by its maximum;
- state: per ally ``[health, cooldown or energy, rel x, rel y, (shield), (type)]``,
  per enemy ``[health, rel x, rel y, (shield), (type)]`` (positions relative to the
  map centre, over the map size), then optionally every agent's last action;
- actions ``[no-op, stop, move N, move S, move E, move W, attack enemy j...]``:
  a dead agent may only take no-op, a live one never; attack only enemies in
  shooting range;
- reward: SMAC's shaped team reward (damage and kills dealt, a win bonus,
  normalised so that a perfect episode sums to ``reward_scale_rate``), or the
  map's own score (``reward="game"``, the default on pysc2's mini-games);
- episode end: a won or lost battle is terminated; reaching ``episode_limit`` or
  the map's own timer is truncated (``info["episode_limit"] = True``); a crashed
  game is relaunched and its episode ends truncated with ``info["restarted"] = True``.

Example (with pysc2's mock game; a real game needs ``SC2PATH``)::

    from pysc2.env import mock_sc2_env
    env = StarCraft2Env("3m", game_factory=mock_sc2_env.SC2TestEnv)
    env.spec.n_agents, env.spec.n_actions      # (3, 9)
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, cast

import numpy as np

from marl_vec.envs.base import MultiAgentEnv
from marl_vec.spec import DiscreteAction, EnvSpec

N_ACTIONS_NO_ATTACK = 6  # no-op, stop, move N, S, E, W
_SELF, _ENEMY = 1, 4  # pysc2 features.PlayerRelative


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
_TYPE_BY_ID = {t.pysc2_id: name for name, t in UNIT_TYPES.items()}


@dataclass(frozen=True)
class MapInfo:
    """What the adapter must know of a map before the game starts (the spec needs it).

    Attributes:
        n_agents, n_enemies: unit counts (enemy slots: the most enemies alive at once).
        episode_limit: steps before the episode is truncated.
        ally_types, enemy_types: unit type names (keys of :data:`UNIT_TYPES`).
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

_INSTALL_HELP = (
    "StarCraft II is not installed here. Install the Linux game package from "
    "https://github.com/Blizzard/s2client-proto#linux-packages (unzip it with the password "
    "'iagreetotheeula', which accepts the AI and Machine Learning License) and set SC2PATH to "
    "its folder (default ~/StarCraftII); put pysc2's mini-game maps "
    "(https://github.com/deepmind/pysc2/releases/download/v1.2/mini_games.zip) under "
    "SC2PATH/Maps/mini_games and SMAC's maps (https://github.com/oxwhirl/smac/releases) under "
    "SC2PATH/Maps/SMAC_Maps."
)


class GameNotFoundError(FileNotFoundError):
    """The StarCraft II game or a map file is missing; the message says how to install it."""


def sc2_path() -> str:
    """Where pysc2 looks for the game: ``SC2PATH`` or its platform default."""
    default = "~/StarCraftII" if sys.platform.startswith("linux") else "C:/Program Files (x86)/StarCraft II"
    return os.path.expanduser(os.environ.get("SC2PATH", default))


def check_game(map_name: str, directory: str) -> None:
    """Raise :class:`GameNotFoundError` unless the game and ``map_name``'s file are installed."""
    path = sc2_path()
    source = "SC2PATH" if "SC2PATH" in os.environ else "SC2PATH is unset, default"
    if not os.path.isdir(os.path.join(path, "Versions")):
        raise GameNotFoundError(f"no StarCraft II game at {path} ({source}). {_INSTALL_HELP}")
    map_file = os.path.join(path, "Maps", directory, f"{map_name}.SC2Map")
    if not os.path.isfile(map_file):
        raise GameNotFoundError(f"map {map_name!r} not found: no file {map_file}. {_INSTALL_HELP}")


def _register_smac_map(name: str, lib: Any) -> None:
    """Make pysc2 find a SMAC map by name (as the SMAC package does), once."""
    if name in lib.get_maps():
        return
    type(name, (lib.Map,), {"directory": "SMAC_Maps", "players": 2, "step_mul": 8, "game_steps_per_episode": 0,
                            "filename": name, "download": "https://github.com/oxwhirl/smac#smac-maps"})


@dataclass
class _Units:
    """Per-slot unit data, allocated once per adapter; positions in world units (y up)."""

    n: int
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
        self.cooldown_max = np.ones(n, np.float64)
        self.medivac = np.zeros(n, bool)
        self.raw_index = np.zeros(n, np.int64)

    def clear(self) -> None:
        self.tag.fill(0)
        self.alive.fill(False)
        self.health.fill(0)
        self.shield.fill(0)


class StarCraft2Env(MultiAgentEnv):
    """A SMAC-style StarCraft II battle on pysc2's ``SC2Env`` (raw interface).

    Args:
        map_name: a key of :data:`MAPS`, or any map when ``map_info`` is given.
        map_info: a :class:`MapInfo` (or dict of its fields) for maps not in :data:`MAPS`,
            or to override one (e.g. ``{"episode_limit": 100}``).
        game_factory: called with ``SC2Env``'s keyword arguments to launch a game; default
            ``pysc2.env.sc2_env.SC2Env`` after checking that the game and map are installed.
            Tests pass ``pysc2.env.mock_sc2_env.SC2TestEnv``.
        step_mul: game steps per agent step. difficulty: the built-in bot's (SMAC maps), "1"-"A".
        reward: ``"smac"`` (shaped) or ``"game"`` (the map's score); default by map kind.
        reward_*: SMAC's reward parameters, same names and defaults.
        obs_last_action, obs_agent_id, state_last_action: optional features.
        sight_range, shoot_range, move_amount: SMAC's 9, 6 and 2 world units.
        raw_resolution: resolution of pysc2's raw positions (finer than a world unit).
        max_restarts: relaunches allowed for crashed games over the adapter's life.
    """

    _BY_DIFFICULTY = {"1": "very_easy", "2": "easy", "3": "medium", "4": "medium_hard", "5": "hard",
                      "6": "harder", "7": "very_hard", "8": "cheat_vision", "9": "cheat_money", "A": "cheat_insane"}

    def __init__(
        self,
        map_name: str = "3m",
        *,
        map_info: MapInfo | dict[str, Any] | None = None,
        game_factory: Callable[..., Any] | None = None,
        step_mul: int = 8,
        difficulty: str = "7",
        reward: str | None = None,
        reward_win: float = 200.0,
        reward_defeat: float = 0.0,
        reward_death_value: float = 10.0,
        reward_negative_scale: float = 0.5,
        reward_only_positive: bool = True,
        reward_scale: bool = True,
        reward_scale_rate: float = 20.0,
        obs_last_action: bool = False,
        obs_agent_id: bool = False,
        state_last_action: bool = True,
        sight_range: float = 9.0,
        shoot_range: float = 6.0,
        move_amount: float = 2.0,
        raw_resolution: int = 256,
        max_restarts: int = 10,
    ):
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
            raise ValueError(
                f"unknown StarCraft II map {map_name!r}; known: {', '.join(MAPS)}; for another SMAC map "
                "file under SC2PATH/Maps pass map_info={'n_agents': .., 'n_enemies': .., 'episode_limit': .., "
                "'ally_types': [..], 'enemy_types': [..]}"
            )
        for t in info.ally_types + info.enemy_types + info.unit_types:
            if t not in UNIT_TYPES:
                raise ValueError(f"map {map_name!r}: unknown unit type {t!r}; allowed: {', '.join(UNIT_TYPES)}")
        if reward is None:
            reward = "smac" if info.smac else "game"
        if reward not in ("smac", "game"):
            raise ValueError(f"reward must be 'smac' or 'game', got {reward!r}")
        if str(difficulty) not in self._BY_DIFFICULTY:
            raise ValueError(f"difficulty must be one of {', '.join(self._BY_DIFFICULTY)}, got {difficulty!r}")
        if game_factory is None:
            check_game(map_name, info.directory)
        self.map_name, self.info = map_name, info
        self.game_factory = game_factory
        self.step_mul, self.difficulty = step_mul, str(difficulty)
        self.reward_mode = reward
        self.reward_win, self.reward_defeat = reward_win, reward_defeat
        self.reward_death_value, self.reward_negative_scale = reward_death_value, reward_negative_scale
        self.reward_only_positive, self.reward_scale, self.reward_scale_rate = reward_only_positive, reward_scale, reward_scale_rate
        self.obs_last_action, self.obs_agent_id, self.state_last_action = obs_last_action, obs_agent_id, state_last_action
        self.sight_range, self.shoot_range, self.move_amount = sight_range, shoot_range, move_amount
        self.raw_resolution, self.max_restarts = raw_resolution, max_restarts

        A, E = info.n_agents, info.n_enemies
        self.n_agents, self.n_enemies = A, E
        self.n_actions = N_ACTIONS_NO_ATTACK + E
        self.type_bits = len(info.unit_types)
        self.shield_ally, self.shield_enemy = int(info.ally_shields), int(info.enemy_shields)
        self.enemy_feats = 5 + self.shield_enemy + self.type_bits
        self.ally_feats = 5 + self.shield_ally + self.type_bits + (self.n_actions if obs_last_action else 0)
        self.own_feats = 1 + self.shield_ally + self.type_bits + (A if obs_agent_id else 0) + (
            self.n_actions if obs_last_action else 0)
        obs_size = 4 + E * self.enemy_feats + (A - 1) * self.ally_feats + self.own_feats
        self.ally_state = 4 + self.shield_ally + self.type_bits
        self.enemy_state = 3 + self.shield_enemy + self.type_bits
        state_size = A * self.ally_state + E * self.enemy_state + (A * self.n_actions if state_last_action else 0)
        self.max_reward = 0.0  # SMAC's normaliser, set at reset from the enemies on the map
        self.spec = EnvSpec(
            agents=tuple(f"agent_{i}" for i in range(A)),
            obs_shape=(obs_size,),
            obs_dtype=np.dtype(np.float32),
            state_shape=(state_size,),
            state_dtype=np.dtype(np.float32),
            action=DiscreteAction(self.n_actions),
            episode_limit=info.episode_limit,
            stats=("battle_won", "dead_allies", "dead_enemies"),
        )
        self.allies, self.enemies = _Units(A), _Units(E)
        self._prev_ally_hp = np.zeros(A)
        self._prev_enemy_hp = np.zeros(E)
        self.last_action = np.zeros((A, self.n_actions), np.float32)
        # Scratch arrays of the step, allocated once.
        self._dx, self._dy, self._dist = np.zeros(E), np.zeros(E), np.zeros(E)
        self._seen = {id(self.allies): np.zeros(A, bool), id(self.enemies): np.zeros(E, bool)}
        self._game: Any = None
        self._game_seed: int | None = None
        self._seed: int | None = None
        self._needs_reset = True
        self.restarts = 0
        self._steps = 0
        self._won = False
        self._pysc2: Any = None

    # -- the game ---------------------------------------------------------------

    def _modules(self) -> Any:
        if self._pysc2 is None:
            from marl_vec.envs.sc2_compat import import_pysc2

            sc2_env = import_pysc2("pysc2.env.sc2_env")
            actions = import_pysc2("pysc2.lib.actions")
            protocol = import_pysc2("pysc2.lib.protocol")
            maps_lib = import_pysc2("pysc2.maps.lib")
            import_pysc2("pysc2.maps")  # registers pysc2's own maps (mini-games)
            self._pysc2 = (sc2_env, actions, protocol, maps_lib)
        return self._pysc2

    def _crash_errors(self) -> tuple[type[BaseException], ...]:
        protocol = self._modules()[2]
        # pysc2 raises its own ConnectionError/ProtocolError when the game dies or
        # the websocket drops; the builtin one covers broken pipes and resets.
        return (protocol.ConnectionError, protocol.ProtocolError, ConnectionError)

    def _launch(self, seed: int | None) -> None:
        sc2_env, _, _, maps_lib = self._modules()
        info = self.info
        players = [sc2_env.Agent(sc2_env.Race[info.race])]
        if info.smac:
            _register_smac_map(self.map_name, maps_lib)
            players.append(sc2_env.Bot(sc2_env.Race[info.enemy_race],
                                       sc2_env.Difficulty[self._BY_DIFFICULTY[self.difficulty]]))
        aif = sc2_env.AgentInterfaceFormat(
            use_raw_units=True, use_raw_actions=True, raw_resolution=self.raw_resolution,
            action_space=sc2_env.ActionSpace.RAW,
        )
        factory = self.game_factory or sc2_env.SC2Env
        self._game = factory(
            map_name=self.map_name, players=players, agent_interface_format=aif, step_mul=self.step_mul,
            game_steps_per_episode=0, random_seed=seed, realtime=False, ensure_available_actions=False,
        )
        self._game_seed = seed
        game_info = self._game.game_info[0].start_raw
        self.map_x, self.map_y = float(game_info.map_size.x), float(game_info.map_size.y)
        # raw_units positions are world positions scaled by this, with y pointing down.
        self.raw_scale = self.raw_resolution / max(self.map_x, self.map_y)
        area = game_info.playable_area
        if area.p1.x > area.p0.x and area.p1.y > area.p0.y:
            self.bounds = (float(area.p0.x), float(area.p0.y), float(area.p1.x), float(area.p1.y))
        else:
            self.bounds = (0.0, 0.0, self.map_x, self.map_y)

    def _close_game(self) -> None:
        game, self._game = self._game, None
        if game is not None:
            try:
                game.close()
            except Exception:  # a crashed game may fail to close; its process is gone or killed by pysc2
                pass

    @property
    def native(self) -> Any:
        """The adapter itself: the pysc2 game object is replaced on every relaunch."""
        return self

    # -- reset and step -----------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if seed is not None:
            self._seed = seed
        # The seed is a game-creation setting in SC2: a new seed needs a new game.
        if self._game is None or (seed is not None and seed != self._game_seed):
            self._close_game()
            self._launch(self._seed)
        try:
            timestep = self._game.reset()[0]
        except self._crash_errors() as exc:
            self._relaunch(exc)
            timestep = self._game.reset()[0]
        self._needs_reset = False
        self._steps = 0
        self._won = False
        self.last_action.fill(0)
        self.allies.clear()
        self.enemies.clear()
        self._read_units(timestep.observation, first=True)
        self._prev_ally_hp[:] = self.allies.health + self.allies.shield
        self._prev_enemy_hp[:] = self.enemies.health + self.enemies.shield
        e = self.enemies
        self.max_reward = (self.n_enemies * self.reward_death_value + self.reward_win
                           + float(np.sum((e.health_max + e.shield_max)[e.alive])))
        self._write_obs()
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        row = self.row
        if self._needs_reset:
            raise RuntimeError(f"StarCraft2Env({self.map_name!r}): step() after the episode ended; call reset()")
        calls = self._to_pysc2(actions)
        try:
            timestep = self._game.step([calls])[0]
        except self._crash_errors() as exc:
            return self._restart(exc)
        self._steps += 1
        score = float(timestep.reward)
        dead_before_a, dead_before_e = ~self.allies.alive, ~self.enemies.alive
        self._read_units(timestep.observation, first=False)
        reward = self._smac_reward(dead_before_a, dead_before_e) if self.reward_mode == "smac" else score
        n_ally, n_enemy = int(self.allies.alive.sum()), int(self.enemies.alive.sum())
        info: dict[str, Any] = {}
        terminated = truncated = False
        if self.info.smac and (n_ally == 0 or n_enemy == 0):
            terminated = True
            if n_ally > 0:  # all enemies dead, some of ours alive
                self._won = True
                if self.reward_mode == "smac":
                    reward += self.reward_win
            elif n_enemy > 0 and self.reward_mode == "smac":
                reward += self.reward_defeat
        elif not self.info.smac and n_enemy == 0 and n_ally > 0:
            self._won = True  # a mini-game wave cleared; the map sends the next one
        if not terminated:
            if int(timestep.step_type) == 2:  # StepType.LAST: the map ended the game
                terminated = n_ally == 0
                truncated = not terminated
                if truncated:
                    info["episode_limit"] = True
            elif self._steps >= self.info.episode_limit:
                truncated = True
                info["episode_limit"] = True
        if self.reward_mode == "smac" and self.reward_scale and self.max_reward:
            reward = reward / self.max_reward * self.reward_scale_rate
        # SMAC's last action: what each agent did; a dead agent's (ignored) action counts as no-op.
        self.last_action.fill(0)
        for i, a in enumerate(actions):
            self.last_action[i, 0 if dead_before_a[i] else int(a)] = 1
        row.reward.fill(reward)
        # A dead agent's episode is over (terminated); the others end with the env.
        np.logical_not(self.allies.alive, out=row.terminated)
        if terminated:
            row.terminated.fill(True)
        row.truncated.fill(False)
        if truncated:
            np.logical_not(row.terminated, out=row.truncated)
        self._write_obs()
        if terminated or truncated:
            self._needs_reset = True
            info.update(self._end_info())
        return info

    def _end_info(self) -> dict[str, Any]:
        return {
            "battle_won": self._won,
            "dead_allies": int(self.n_agents - self.allies.alive.sum()),
            "dead_enemies": int(self.n_enemies - self.enemies.alive.sum()),
        }

    def _relaunch(self, exc: BaseException) -> None:
        if self.restarts >= self.max_restarts:
            raise RuntimeError(
                f"StarCraft II crashed again ({type(exc).__name__}: {exc}) after {self.restarts} restarts "
                f"(max_restarts={self.max_restarts})"
            ) from exc
        self.restarts += 1
        self._close_game()
        self._launch(self._seed)

    def _restart(self, exc: BaseException) -> dict[str, Any]:
        """The game crashed: relaunch it and end this episode truncated."""
        self._relaunch(exc)
        self._needs_reset = True
        row = self.row
        # The last observation stays as it was; nothing happened in this step.
        row.reward.fill(0.0)
        row.truncated.fill(True)
        row.terminated.fill(False)
        return {"restarted": True, "error": f"{type(exc).__name__}: {exc}", "episode_limit": False, **self._end_info()}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {k: float(info[k]) for k in ("battle_won", "dead_allies", "dead_enemies") if k in info}

    def close(self) -> None:
        self._close_game()

    # -- units --------------------------------------------------------------------

    def _type_index(self, unit_type: int, side_types: tuple[str, ...], min_type: int) -> int:
        name = _TYPE_BY_ID.get(unit_type)
        if name is None and side_types:
            # SMAC's maps give our units custom type ids in the order of its map table.
            k = unit_type - min_type
            name = side_types[k] if 0 <= k < len(side_types) else side_types[0]
        return self.info.unit_types.index(name) if name in self.info.unit_types else -1

    def _read_units(self, observation: Any, first: bool) -> None:
        raw = np.asarray(observation["raw_units"])
        # Columns of pysc2.lib.features.FeatureUnit.
        UT, ALLIANCE, HEALTH, SHIELD, ENERGY, X, Y, COOLDOWN, TAG = 0, 1, 2, 3, 4, 12, 13, 25, 29
        s = self.raw_scale
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
            if len(mine) > self.n_agents or len(theirs) > self.n_enemies:
                raise ValueError(
                    f"map {self.map_name!r} started with {len(mine)} own and {len(theirs)} enemy units; the adapter "
                    f"expects at most {self.n_agents} and {self.n_enemies} (set map_info to match the map)"
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
                    name = _TYPE_BY_ID.get(int(r[UT])) or (side_types[0] if side_types else None)
                    t = UNIT_TYPES.get(name) if name else None
                    units.health_max[i] = t.health_max if t else max(float(r[HEALTH]), 1.0)
                    units.shield_max[i] = t.shield_max if t else float(r[SHIELD])
                    units.type_index[i] = self._type_index(int(r[UT]), side_types, self._min_ally_type)
                    onehot = self._onehot_a if units is self.allies else self._onehot_e
                    onehot[i].fill(0)
                    if units.type_index[i] >= 0:
                        onehot[i, units.type_index[i]] = 1
                    units.cooldown_max[i] = t.max_cooldown if t else 1.0
                    units.medivac[i] = name == "medivac"
                seen[i] = True
                units.raw_index[i] = raw_i
                units.health[i] = float(r[HEALTH])
                units.shield[i] = float(r[SHIELD])
                units.alive[i] = r[HEALTH] > 0
                # The centre of the raw pixel (the inverse of pysc2's raw action transform).
                units.x[i] = (float(r[X]) + 0.5) / s
                units.y[i] = self.map_y - (float(r[Y]) + 0.5) / s
                units.cooldown[i] = float(r[ENERGY] if units.medivac[i] else r[COOLDOWN]) / units.cooldown_max[i]
            # A unit missing from the observation is dead (SMAC's rule).
            gone = units.alive & ~seen
            units.alive[gone] = False
            units.health[gone] = 0.0
            units.shield[gone] = 0.0

    def _smac_reward(self, dead_before_a: np.ndarray, dead_before_e: np.ndarray) -> float:
        """SMAC's ``reward_battle``: damage and kills dealt (minus those taken, if asked)."""
        a, e = self.allies, self.enemies
        hp_a, hp_e = a.health + a.shield, e.health + e.shield
        delta_deaths = 0.0
        new_dead_a = ~a.alive & ~dead_before_a
        new_dead_e = ~e.alive & ~dead_before_e
        # Damage: health lost by units alive before (killed ones lose their previous health).
        delta_enemy = float(np.sum((self._prev_enemy_hp - hp_e)[~dead_before_e]))
        delta_ally = float(np.sum((self._prev_ally_hp - hp_a)[~dead_before_a]))
        delta_deaths += self.reward_death_value * float(new_dead_e.sum())
        if not self.reward_only_positive:
            delta_deaths -= self.reward_death_value * self.reward_negative_scale * float(new_dead_a.sum())
            reward = delta_enemy + delta_deaths - delta_ally * self.reward_negative_scale
        else:
            reward = delta_enemy + delta_deaths
        self._prev_ally_hp[:] = hp_a
        self._prev_enemy_hp[:] = hp_e
        return abs(reward) if self.reward_only_positive else reward

    # -- actions --------------------------------------------------------------------

    def _to_pysc2(self, actions: np.ndarray) -> list[Any]:
        funcs = self._modules()[1].RAW_FUNCTIONS
        a, s = self.allies, self.raw_scale
        calls = []
        for i in range(self.n_agents):
            act = int(actions[i])
            if not a.alive[i] or act == 0:
                continue  # no-op: a dead agent's action is ignored
            unit = int(a.raw_index[i])
            if act == 1:
                calls.append(funcs.Stop_quick("now", unit))
            elif act < N_ACTIONS_NO_ATTACK:
                dx, dy = ((0, 1), (0, -1), (1, 0), (-1, 0))[act - 2]
                x = a.x[i] + dx * self.move_amount
                y = a.y[i] + dy * self.move_amount
                # pysc2 maps a raw point to the centre of its pixel: -0.5 lands on (x, y) itself.
                calls.append(funcs.Move_pt("now", unit, (x * s - 0.5, (self.map_y - y) * s - 0.5)))
            else:
                j = act - N_ACTIONS_NO_ATTACK
                calls.append(funcs.Attack_unit("now", unit, int(self.enemies.raw_index[j])))
        return calls or [funcs.no_op()]

    # -- observation, state and available actions ------------------------------------------
    #
    # Written for all agents at once into views of the row (built in bind) with
    # scratch arrays allocated once: no per-step array data.

    def bind(self, row: Any) -> None:
        super().bind(row)
        A, E, nA = self.n_agents, self.n_enemies, self.n_actions
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        self._avail: np.ndarray = row.avail_actions
        obs = row.obs
        k = 4
        self._obs_enemy = obs[:, k:k + E * self.enemy_feats].reshape(A, E, self.enemy_feats)
        k += E * self.enemy_feats
        self._obs_ally = obs[:, k:k + (A - 1) * self.ally_feats].reshape(A, A - 1, self.ally_feats)
        self._obs_own = obs[:, k + (A - 1) * self.ally_feats:]
        st = row.state
        self._st_ally = st[:A * self.ally_state].reshape(A, self.ally_state)
        self._st_enemy = st[A * self.ally_state:A * self.ally_state + E * self.enemy_state].reshape(E, self.enemy_state)
        self._st_last = st[A * self.ally_state + E * self.enemy_state:]
        # others[i]: the allies agent i observes, in slot order without itself.
        self._others = np.array([[j for j in range(A) if j != i] for i in range(A)], np.int64).reshape(A, A - 1)
        f64 = np.float64
        self._e = {n: np.zeros((A, E), f64) for n in ("dx", "dy", "dist", "tmp")}
        self._e_vis = np.zeros((A, E), bool)
        self._a = {n: np.zeros((A, A - 1), f64) for n in ("dx", "dy", "dist", "tmp", "ox", "oy")}
        self._a_vis = np.zeros((A, A - 1), bool)
        self._a_alive_o = np.zeros((A, A - 1), bool)
        self._a_last = np.zeros((A, A - 1, nA), np.float32)
        self._frac = {n: np.zeros(n_, f64) for n, n_ in (("ahp", A), ("ash", A), ("ehp", E), ("esh", E), ("acd", A))}
        self._move = np.zeros(A, f64)
        self._move_ok = np.zeros(A, bool)
        self._eye = np.eye(A, dtype=np.float32)
        self._onehot_a = np.zeros((A, max(self.type_bits, 1)), f64)
        self._onehot_e = np.zeros((E, max(self.type_bits, 1)), f64)

    @staticmethod
    def _fraction(value: np.ndarray, maximum: np.ndarray, out: np.ndarray) -> np.ndarray:
        out.fill(0.0)
        return np.divide(value, maximum, out=out, where=maximum > 0)

    def _write_avail(self) -> None:
        """SMAC's rules: dead -> no-op only; live -> stop, feasible moves, enemies in range."""
        avail, a, e = self._avail, self.allies, self.enemies
        alive = a.alive
        np.logical_not(alive, out=avail[:, 0])
        np.copyto(avail[:, 1], alive)
        x0, y0, x1, y1 = self.bounds
        m = self.move_amount / 2  # SMAC checks half a move ahead
        for k, (coord, step, lo, hi) in enumerate(((a.y, m, y0, y1), (a.y, -m, y0, y1), (a.x, m, x0, x1), (a.x, -m, x0, x1))):
            np.add(coord, step, out=self._move)
            out = avail[:, 2 + k]
            np.greater_equal(self._move, lo, out=out)
            np.less(self._move, hi, out=self._move_ok)
            out &= self._move_ok
            out &= alive
        attack = avail[:, N_ACTIONS_NO_ATTACK:]
        np.less_equal(self._e["dist"], self.shoot_range, out=attack)
        attack &= e.alive
        attack &= alive[:, None]

    def _write_obs(self) -> None:
        row, a, e = self.row, self.allies, self.enemies
        sight, alive = self.sight_range, a.alive
        row.obs.fill(0)
        np.copyto(row.agent_mask, alive)
        # Agent-to-enemy geometry.
        ed = self._e
        np.subtract(e.x, a.x[:, None], out=ed["dx"])
        np.subtract(e.y, a.y[:, None], out=ed["dy"])
        np.hypot(ed["dx"], ed["dy"], out=ed["dist"])
        self._write_avail()
        avail = self._avail
        row.obs[:, 0:4] = avail[:, 2:6]
        vis = self._e_vis
        np.less(ed["dist"], sight, out=vis)
        vis &= e.alive
        vis &= alive[:, None]
        f, tmp = self._obs_enemy, ed["tmp"]
        np.logical_and(avail[:, N_ACTIONS_NO_ATTACK:], vis, out=f[..., 0], casting="unsafe")
        for col, name in ((1, "dist"), (2, "dx"), (3, "dy")):
            np.multiply(ed[name], vis, out=tmp)
            np.divide(tmp, sight, out=f[..., col], casting="unsafe")
        np.multiply(vis, self._fraction(e.health, e.health_max, self._frac["ehp"]), out=f[..., 4], casting="unsafe")
        if self.shield_enemy:
            np.multiply(vis, self._fraction(e.shield, e.shield_max, self._frac["esh"]), out=f[..., 5], casting="unsafe")
        if self.type_bits:
            b = 5 + self.shield_enemy
            np.multiply(self._onehot_e, vis[:, :, None], out=f[..., b:b + self.type_bits], casting="unsafe")
        # Agent-to-ally geometry: others[i] are the allies agent i sees, in slot order.
        ad, others = self._a, self._others
        np.take(a.x, others, out=ad["ox"])
        np.take(a.y, others, out=ad["oy"])
        np.subtract(ad["ox"], a.x[:, None], out=ad["dx"])
        np.subtract(ad["oy"], a.y[:, None], out=ad["dy"])
        np.hypot(ad["dx"], ad["dy"], out=ad["dist"])
        avis = self._a_vis
        np.less(ad["dist"], sight, out=avis)
        np.take(alive, others, out=self._a_alive_o)
        avis &= self._a_alive_o
        avis &= alive[:, None]
        f, tmp = self._obs_ally, ad["tmp"]
        np.copyto(f[..., 0], avis)
        for col, name in ((1, "dist"), (2, "dx"), (3, "dy")):
            np.multiply(ad[name], avis, out=tmp)
            np.divide(tmp, sight, out=f[..., col], casting="unsafe")
        hp = self._fraction(a.health, a.health_max, self._frac["ahp"])
        sh = self._fraction(a.shield, a.shield_max, self._frac["ash"]) if self.shield_ally else None
        np.take(hp, others, out=tmp)
        np.multiply(tmp, avis, out=f[..., 4], casting="unsafe")
        b = 5
        if sh is not None:
            np.take(sh, others, out=tmp)
            np.multiply(tmp, avis, out=f[..., 5], casting="unsafe")
            b = 6
        if self.type_bits:
            for t in range(self.type_bits):
                np.take(self._onehot_a[:, t], others, out=tmp)
                np.multiply(tmp, avis, out=f[..., b + t], casting="unsafe")
            b += self.type_bits
        if self.obs_last_action:
            np.take(self.last_action, others, axis=0, out=self._a_last)
            np.multiply(self._a_last, avis[:, :, None], out=f[..., b:b + self.n_actions])
        # Own features.
        own = self._obs_own
        np.multiply(hp, alive, out=own[:, 0], casting="unsafe")
        b = 1
        if sh is not None:
            np.multiply(sh, alive, out=own[:, 1], casting="unsafe")
            b = 2
        if self.type_bits:
            np.multiply(self._onehot_a[:, :self.type_bits], alive[:, None], out=own[:, b:b + self.type_bits], casting="unsafe")
            b += self.type_bits
        if self.obs_agent_id:
            np.multiply(self._eye, alive[:, None], out=own[:, b:b + self.n_agents])
            b += self.n_agents
        if self.obs_last_action:
            np.multiply(self.last_action, alive[:, None], out=own[:, b:b + self.n_actions])
        self._write_state()

    def _write_state(self) -> None:
        a, e = self.allies, self.enemies
        cx, cy = self.map_x / 2, self.map_y / 2
        f = self._st_ally
        alive = a.alive
        np.multiply(self._frac["ahp"], alive, out=f[:, 0], casting="unsafe")
        np.multiply(a.cooldown, alive, out=f[:, 1], casting="unsafe")
        for col, coord, c, size in ((2, a.x, cx, self.map_x), (3, a.y, cy, self.map_y)):
            np.subtract(coord, c, out=self._frac["acd"])
            self._frac["acd"] /= size
            np.multiply(self._frac["acd"], alive, out=f[:, col], casting="unsafe")
        b = 4
        if self.shield_ally:
            np.multiply(self._frac["ash"], alive, out=f[:, 4], casting="unsafe")
            b = 5
        if self.type_bits:
            np.multiply(self._onehot_a[:, :self.type_bits], alive[:, None], out=f[:, b:b + self.type_bits], casting="unsafe")
        f, ealive = self._st_enemy, e.alive
        np.multiply(self._frac["ehp"], ealive, out=f[:, 0], casting="unsafe")
        for col, coord, c, size in ((1, e.x, cx, self.map_x), (2, e.y, cy, self.map_y)):
            np.subtract(coord, c, out=self._frac["esh"])
            self._frac["esh"] /= size
            np.multiply(self._frac["esh"], ealive, out=f[:, col], casting="unsafe")
        b = 3
        if self.shield_enemy:
            self._fraction(e.shield, e.shield_max, self._frac["esh"])
            np.multiply(self._frac["esh"], ealive, out=f[:, 3], casting="unsafe")
            b = 4
        if self.type_bits:
            np.multiply(self._onehot_e[:, :self.type_bits], ealive[:, None], out=f[:, b:b + self.type_bits], casting="unsafe")
        if self.state_last_action:
            self._st_last[:] = self.last_action.reshape(-1)


class SmacAdapter(MultiAgentEnv):
    """The SMAC package's ``smac.env.StarCraft2Env``, with marl_vec's conventions.

    Time-outs (``info["episode_limit"]``) are truncated, not terminated; a dead
    agent (only no-op available) has mask False; ``reset(seed)`` relaunches the
    game with that seed (SMAC takes its seed at construction). SMAC is not on
    the package index: install it from its repository to use ``smac:<map>``.

    Example::

        env = SmacAdapter("3m")                  # needs smac and the game
    """

    def __init__(self, map_name: str, **kwargs: Any):
        from marl_vec.envs.registry import require

        self._smac_env_module = require("smac.env", "sc2", "smac:<map> (SMAC is installed from github.com/oxwhirl/smac)")
        self.map_name, self.kwargs = map_name, kwargs
        self._seed: int | None = kwargs.pop("seed", None)
        self.env = self._smac_env_module.StarCraft2Env(map_name=map_name, seed=self._seed, **kwargs)
        info = self.env.get_env_info()
        A = int(info["n_agents"])
        self.spec = EnvSpec(
            agents=tuple(f"agent_{i}" for i in range(A)),
            obs_shape=(int(info["obs_shape"]),), obs_dtype=np.dtype(np.float32),
            state_shape=(int(info["state_shape"]),), state_dtype=np.dtype(np.float32),
            action=DiscreteAction(int(info["n_actions"])),
            episode_limit=int(info["episode_limit"]),
            stats=("battle_won", "dead_allies", "dead_enemies"),
        )

    def _write(self) -> None:
        row = self.row
        row.obs[:] = np.asarray(self.env.get_obs(), dtype=np.float32)
        row.state[:] = np.asarray(self.env.get_state(), dtype=np.float32)
        avail = cast(np.ndarray, row.avail_actions)  # discrete actions: never None
        avail[:] = np.asarray(self.env.get_avail_actions()) != 0
        # SMAC: a dead agent may only take the no-op, a live one never.
        np.logical_not(avail[:, 0], out=row.agent_mask)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if seed is not None and seed != self._seed:
            self.env.close()
            self._seed = seed
            self.env = self._smac_env_module.StarCraft2Env(map_name=self.map_name, seed=seed, **self.kwargs)
        self.env.reset()
        self._write()
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        acts = [int(a) if m else 0 for a, m in zip(actions, self.row.agent_mask)]
        reward, terminated, info = self.env.step(acts)
        info = dict(info)
        self._write()
        row = self.row
        row.reward.fill(float(reward))
        np.logical_not(row.agent_mask, out=row.terminated)
        row.truncated.fill(False)
        if terminated:
            if info.get("episode_limit", False):
                np.logical_not(row.terminated, out=row.truncated)
            else:
                row.terminated.fill(True)
        return info

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {k: float(info[k]) for k in ("battle_won", "dead_allies", "dead_enemies") if k in info}

    def close(self) -> None:
        self.env.close()

    @property
    def native(self) -> Any:
        return self.env


def make_starcraft2(env_id: str, **kwargs: Any) -> MultiAgentEnv:
    """The registry's factory: ``env_id`` is a map name, or ``smac:<map>`` for the SMAC package's env.

    Without the game (and no ``game_factory``), raises :class:`GameNotFoundError`
    naming SC2PATH and how to install the game and maps.
    """
    if env_id.startswith("smac:"):
        return SmacAdapter(env_id[len("smac:"):], **kwargs)
    return StarCraft2Env(env_id, **kwargs)

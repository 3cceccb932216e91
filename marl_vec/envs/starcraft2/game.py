"""The game session: one StarCraft II game behind pysc2, launched, reset, stepped and relaunched.

Everything that talks to pysc2's ``SC2Env`` lives here: the install check
([`GameNotFoundError`][marl_vec.envs.starcraft2.game.GameNotFoundError], ``SC2PATH``), registering SMAC's maps with pysc2,
launching a game with the raw interface, the map geometry it reports, the
errors that mean the game crashed, and relaunching after a crash. It knows
nothing of SMAC's features or rewards. Imports: `maps` and
`pysc2_shim` (pysc2 itself only when a game is launched).

Example (pysc2's mock game; a real game needs ``SC2PATH``)::

    from pysc2.env import mock_sc2_env
    game = GameSession("3m", MAPS["3m"], game_factory=mock_sc2_env.SC2TestEnv)
    timestep = game.reset(seed=0)          # launches the game
    timestep = game.step([game.pysc2.actions.RAW_FUNCTIONS.no_op()])
    game.close()
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, NamedTuple

from marl_vec.envs.starcraft2.maps import MapInfo
from marl_vec.core.errors import SetupError

_INSTALL_HELP = (
    "StarCraft II is not installed here. Install the Linux game package from "
    "https://github.com/Blizzard/s2client-proto#linux-packages (unzip it with the password "
    "'iagreetotheeula', which accepts the AI and Machine Learning License) and set SC2PATH to "
    "its folder (default ~/StarCraftII); put pysc2's mini-game maps "
    "(https://github.com/deepmind/pysc2/releases/download/v1.2/mini_games.zip) under "
    "SC2PATH/Maps/mini_games and SMAC's maps (https://github.com/oxwhirl/smac/releases) under "
    "SC2PATH/Maps/SMAC_Maps."
)

# The built-in bot's difficulty by SMAC's names ("1"-"9", "A").
BY_DIFFICULTY = {"1": "very_easy", "2": "easy", "3": "medium", "4": "medium_hard", "5": "hard",
                 "6": "harder", "7": "very_hard", "8": "cheat_vision", "9": "cheat_money", "A": "cheat_insane"}


class GameNotFoundError(SetupError, FileNotFoundError):
    """The StarCraft II game or a map file is missing; the message says how to install it."""


def sc2_path() -> str:
    """Where pysc2 looks for the game: ``SC2PATH`` or its platform default."""
    default = "~/StarCraftII" if sys.platform.startswith("linux") else "C:/Program Files (x86)/StarCraft II"
    return os.path.expanduser(os.environ.get("SC2PATH", default))


def check_game(map_name: str, directory: str) -> None:
    """Raise [`GameNotFoundError`][marl_vec.envs.starcraft2.game.GameNotFoundError] unless the game and ``map_name``'s file are installed."""
    path = sc2_path()
    source = "SC2PATH" if "SC2PATH" in os.environ else "SC2PATH is unset, default"
    if not os.path.isdir(os.path.join(path, "Versions")):
        raise GameNotFoundError(f"no StarCraft II game at {path} ({source}). {_INSTALL_HELP}")
    map_file = os.path.join(path, "Maps", directory, f"{map_name}.SC2Map")
    if not os.path.isfile(map_file):
        raise GameNotFoundError(f"map {map_name!r} not found: no file {map_file}. {_INSTALL_HELP}")


def register_smac_map(name: str, lib: Any) -> None:
    """Make pysc2 find a SMAC map by name (as the SMAC package does), once."""
    if name in lib.get_maps():
        return
    type(name, (lib.Map,), {"directory": "SMAC_Maps", "players": 2, "step_mul": 8, "game_steps_per_episode": 0,
                            "filename": name, "download": "https://github.com/oxwhirl/smac#smac-maps"})


class Pysc2(NamedTuple):
    """The pysc2 modules a session uses, imported through the Python 3.11 shim."""

    sc2_env: Any
    actions: Any
    protocol: Any
    maps_lib: Any


def load_pysc2() -> Pysc2:
    from marl_vec.envs.starcraft2.pysc2_shim import import_pysc2

    modules = Pysc2(import_pysc2("pysc2.env.sc2_env"), import_pysc2("pysc2.lib.actions"),
                    import_pysc2("pysc2.lib.protocol"), import_pysc2("pysc2.maps.lib"))
    import_pysc2("pysc2.maps")  # registers pysc2's own maps (mini-games)
    return modules


class GameSession:
    """One game of ``map_name`` at a time, relaunched when the seed changes or the game crashes.

    Args:
        map_name, info: the map and its `MapInfo`.
        game_factory: called with ``SC2Env``'s keyword arguments; default ``SC2Env``.
        step_mul, difficulty, raw_resolution: as for ``StarCraft2Env``.
        max_restarts: relaunches allowed for crashed games over the session's life.

    After a launch, ``map_x`` and ``map_y`` are the map size in world units,
    ``bounds`` the playable area ``(x0, y0, x1, y1)`` and ``raw_scale`` the raw
    pixels per world unit.
    """

    def __init__(self, map_name: str, info: MapInfo, *, game_factory: Callable[..., Any] | None = None,
                 step_mul: int = 8, difficulty: str = "7", raw_resolution: int = 256, max_restarts: int = 10):
        self.map_name, self.info = map_name, info
        self.game_factory = game_factory
        self.step_mul, self.difficulty = step_mul, difficulty
        self.raw_resolution, self.max_restarts = raw_resolution, max_restarts
        self.restarts = 0
        self.map_x = self.map_y = self.raw_scale = 0.0
        self.bounds = (0.0, 0.0, 0.0, 0.0)
        self._game: Any = None
        self._game_seed: int | None = None
        self._seed: int | None = None
        self._pysc2: Pysc2 | None = None

    @property
    def pysc2(self) -> Pysc2:
        if self._pysc2 is None:
            self._pysc2 = load_pysc2()
        return self._pysc2

    def crash_errors(self) -> tuple[type[BaseException], ...]:
        """What pysc2 raises when the game dies or its websocket drops."""
        protocol = self.pysc2.protocol
        # pysc2's own ConnectionError/ProtocolError; the builtin one covers broken pipes and resets.
        return (protocol.ConnectionError, protocol.ProtocolError, ConnectionError)

    def reset(self, seed: int | None = None) -> Any:
        """Start an episode (launching a game first if there is none or ``seed`` is new); its first timestep."""
        if seed is not None:
            self._seed = seed
        # The seed is a game-creation setting in SC2: a new seed needs a new game.
        if self._game is None or (seed is not None and seed != self._game_seed):
            self.close()
            self._launch(self._seed)
        try:
            return self._game.reset()[0]
        except self.crash_errors() as exc:
            self.relaunch(exc)
            return self._game.reset()[0]

    def step(self, calls: list[Any]) -> Any:
        """Send the controlled player's raw calls; the next timestep. A crash raises one of `crash_errors`."""
        return self._game.step([calls])[0]

    def relaunch(self, exc: BaseException) -> None:
        """Replace a crashed game, or raise once ``max_restarts`` relaunches are spent."""
        if self.restarts >= self.max_restarts:
            raise RuntimeError(
                f"StarCraft II crashed again ({type(exc).__name__}: {exc}) after {self.restarts} restarts "
                f"(max_restarts={self.max_restarts})"
            ) from exc
        self.restarts += 1
        self.close()
        self._launch(self._seed)

    def close(self) -> None:
        game, self._game = self._game, None
        if game is not None:
            try:
                game.close()
            except Exception:  # a crashed game may fail to close; its process is gone or killed by pysc2
                pass

    def _launch(self, seed: int | None) -> None:
        sc2_env, maps_lib = self.pysc2.sc2_env, self.pysc2.maps_lib
        info = self.info
        players = [sc2_env.Agent(sc2_env.Race[info.race])]
        if info.smac:
            register_smac_map(self.map_name, maps_lib)
            players.append(sc2_env.Bot(sc2_env.Race[info.enemy_race],
                                       sc2_env.Difficulty[BY_DIFFICULTY[self.difficulty]]))
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

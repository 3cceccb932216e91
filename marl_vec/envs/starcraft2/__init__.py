"""StarCraft II micromanagement on pysc2 (and SMAC, when installed): the ``starcraft2`` family.

One idea per module, each importing only those above it in this list:

- `maps`: unit types and the map table (``MAPS``, ``MapInfo``, ``UNIT_TYPES``);
- `pysc2_shim`: importing pysc2 4.0.0 on Python 3.11+ (``import_pysc2``);
- `game`: the game session: install check (``GameNotFoundError``, ``SC2PATH``),
  launch, relaunch after a crash, the pysc2 calls;
- `units`: unit slots filled from pysc2's raw units;
- `actions`: SMAC's action layout and its pysc2 raw calls;
- `features`: SMAC's observation, state and available actions;
- `reward`: SMAC's shaped reward;
- `adapter`: ``StarCraft2Env``, the adapter tying them together;
- `smac`: ``SmacAdapter``, the SMAC package's env (``smac:<map>`` ids);
- this module: the public names and the registry's factory `make_starcraft2`.

Modules of this package import `marl_vec.core.adapter`, `marl_vec.envs.extras`
and `marl_vec.core.spec` from outside it, never the registry.

Example (with pysc2's mock game; a real game needs ``SC2PATH``)::

    from pysc2.env import mock_sc2_env
    env = make_starcraft2("3m", game_factory=mock_sc2_env.SC2TestEnv)
    env.spec.n_agents, env.spec.n_actions      # (3, 9)
"""

from __future__ import annotations

from typing import Any

from marl_vec.core.adapter import MultiAgentEnv
from marl_vec.envs.starcraft2.actions import N_ACTIONS_NO_ATTACK
from marl_vec.envs.starcraft2.adapter import StarCraft2Env
from marl_vec.envs.starcraft2.game import GameNotFoundError, check_game, sc2_path
from marl_vec.envs.starcraft2.maps import MAPS, UNIT_TYPES, MapInfo, UnitType
from marl_vec.envs.starcraft2.smac import SmacAdapter

__all__ = [
    "MAPS", "UNIT_TYPES", "MapInfo", "UnitType", "N_ACTIONS_NO_ATTACK",
    "GameNotFoundError", "check_game", "sc2_path",
    "StarCraft2Env", "SmacAdapter", "make_starcraft2",
]


def make_starcraft2(env_id: str, **kwargs: Any) -> MultiAgentEnv:
    """The registry's factory: ``env_id`` is a map name, or ``smac:<map>`` for the SMAC package's env.

    Without the game (and no ``game_factory``), raises [`GameNotFoundError`][marl_vec.envs.starcraft2.game.GameNotFoundError]
    naming SC2PATH and how to install the game and maps.
    """
    if env_id.startswith("smac:"):
        return SmacAdapter(env_id[len("smac:"):], **kwargs)
    return StarCraft2Env(env_id, **kwargs)

"""Which envs need which extra: what ``marl-vec list`` shows, and checks on this machine.

A family's envs do not all need the same packages: PettingZoo's MPE moved to the
``mpe2`` package, a core dependency, while butterfly, sisl and MAgent2 need the
``pettingzoo`` extra. Each row names the ids it covers, the extra that installs
them, the modules that must import, and an example id (tests/tools/test_env_extras.py
checks every row by importing it with and without those modules).

Examples:
    >>> [n.ids for n in NEEDS if n.family == "pettingzoo"][0]
    'mpe2.*'
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvNeeds:
    family: str
    ids: str  # the ids this row covers, as a user writes them
    extra: str | None  # pip extra of marl_vec that installs the modules; None: the core install
    modules: tuple[str, ...]  # must import for these envs (beyond the core install)
    example: str  # an id of this row, made by the tests
    prefix: str = ""  # ids of the family starting with this belong to the row (the longest match wins)
    then: str = ""  # a further step beyond pip (a script, a game)

    game: bool = False  # needs the StarCraft II game under SC2PATH

    def missing(self) -> list[str]:
        """What of this row this machine lacks: modules it cannot find (not imported: cheap), the game."""
        missing = [m for m in self.modules if not _findable(m)]
        if self.game and not os.path.isdir(os.path.join(sc2_path(), "Versions")):
            missing.append(f"the StarCraft II game ({sc2_path()}; set SC2PATH)")
        return missing

    def install_hint(self) -> str:
        return f"marl_vec[{self.extra}]" if self.extra else "core install"


def sc2_path() -> str:
    """Where pysc2 looks for the game: SC2PATH, else ~/StarCraftII."""
    return os.path.expanduser(os.environ.get("SC2PATH", "~/StarCraftII"))


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing or broken
        return False


NEEDS: tuple[EnvNeeds, ...] = (
    EnvNeeds("gym", "classic_control and toy_text ids (CartPole-v1, ...)", None, (), "CartPole-v1"),
    EnvNeeds("pettingzoo", "mpe2.*", None, ("mpe2",), "mpe2.simple_spread_v3", "mpe2."),
    EnvNeeds("pettingzoo", "pettingzoo.butterfly.*", "pettingzoo", ("pymunk",), "pettingzoo.butterfly.pistonball_v6",
             "pettingzoo.butterfly."),
    EnvNeeds("pettingzoo", "pettingzoo.sisl.*", "pettingzoo", ("pymunk", "Box2D"), "pettingzoo.sisl.multiwalker_v9",
             "pettingzoo.sisl."),
    EnvNeeds("pettingzoo", "magent2.environments.*", "pettingzoo", ("magent2",), "magent2.environments.battle_v4",
             "magent2."),
    # Turn-based games; tictactoe, connect_four, go and rps need only the core install.
    EnvNeeds("pettingzoo", "pettingzoo.classic.* (turn-based)", "classic", ("chess", "rlcard", "shimmy", "pyspiel"),
             "pettingzoo.classic.chess_v6", "pettingzoo.classic."),
    EnvNeeds("atari", "ALE/* (gymnasium ids)", "atari", ("ale_py",), "ALE/Pong-v5", "ALE/"),
    EnvNeeds("atari", "pettingzoo.atari.*", "atari", ("ale_py", "multi_agent_ale_py"), "pettingzoo.atari.pong_v3",
             "pettingzoo.atari."),
    EnvNeeds("football", "gfootball scenarios", "football", ("gfootball", "gym", "six"), "academy_3_vs_1_with_keeper",
             then="bash scripts/install/install_football.sh"),
    EnvNeeds("starcraft2", "SMAC and pysc2 maps", "sc2", ("pysc2", "s2clientprotocol"), "3m",
             then="bash scripts/install/install_sc2.sh, then the game from Blizzard under SC2PATH", game=True),
    EnvNeeds("lbf", "Level-Based Foraging ids (Foraging-*)", "lbf", ("lbforaging",), "Foraging-8x8-2p-2f-coop-v3"),
    EnvNeeds("rware", "Multi-Robot Warehouse ids (rware-*)", "rware", ("rware",), "rware-tiny-2ag-v2"),
    EnvNeeds("jaxmarl", "smax/<map>, jax_mpe/<scenario>, hanabi, overcooked, ... (jaxmarl.make ids)", "jax",
             ("jax", "jaxmarl", "flax"), "smax/3m", then="bash scripts/install/install_jax.sh"),
    EnvNeeds("vmas", "VMAS scenarios (balance, transport, navigation, wheel, football, ...)", "vmas",
             ("vmas", "torch", "gym"), "balance"),
    EnvNeeds("mamujoco", "Multi-Agent MuJoCo Scenario/split (Ant/2x4, HalfCheetah/6x1, Humanoid/9|8, ...)", "mamujoco",
             ("gymnasium_robotics", "mujoco"), "Ant/2x4"),
    EnvNeeds("meltingpot", "Melting Pot substrates (commons_harvest__open, clean_up, ...; 49)", "meltingpot",
             ("meltingpot", "dmlab2d", "chex", "reactivex"), "commons_harvest__open",
             then="bash scripts/install/install_meltingpot.sh"),
)


def needs_for(family: str, env_id: str) -> EnvNeeds | None:
    """The row covering ``env_id`` of ``family`` (None when no row does, e.g. an unlisted PettingZoo package).

    ```pycon
    >>> needs_for("pettingzoo", "pettingzoo.sisl.multiwalker_v9").extra
    'pettingzoo'
    >>> needs_for("pettingzoo", "mpe2.simple_tag_v3").extra is None
    True
    ```
    """
    rows = [n for n in NEEDS if n.family == family and env_id.startswith(n.prefix)]
    return max(rows, key=lambda n: len(n.prefix), default=None)

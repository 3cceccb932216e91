"""The ``pettingzoo`` family: which adapter a PettingZoo env gets.

An ``AECEnv`` (a turn-based game) gets `AECAdapter`.

Every ``ParallelEnv`` gets `PettingZooAdapter`'s
results; two kinds of env get them with less work, from a subclass that knows
the env's insides: magent2's envs step through their engine
(`marl_vec.envs.pettingzoo.magent_engine`), pistonball and cooperative_pong read their
screen once per step (`marl_vec.envs.pettingzoo.butterfly_screen`), and every other
env that is PettingZoo's ``aec_to_parallel_wrapper`` (mpe2's, sisl's, butterfly's)
steps its AEC env below the wrappers (`marl_vec.envs.pettingzoo.aec_parallel`).

Examples:
    >>> from mpe2 import simple_spread_v3
    >>> type(pettingzoo_adapter(simple_spread_v3.parallel_env())).__name__
    'AECParallelAdapter'
"""

from __future__ import annotations

from typing import Any

from marl_vec.envs.pettingzoo.aec_parallel import AECParallelAdapter, aec_parallel_applies
from marl_vec.envs.pettingzoo.butterfly_screen import ScreenAdapter, screen_path_applies
from marl_vec.envs.extras import UnknownEnvError, import_env_module
from marl_vec.envs.pettingzoo.magent_engine import MAgentAdapter, engine_path_applies
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter


def pettingzoo_adapter(env: Any) -> PettingZooAdapter:
    """The adapter for a PettingZoo ``ParallelEnv`` (see the module docstring)."""
    if engine_path_applies(env):
        return MAgentAdapter(env)
    if screen_path_applies(env):
        return ScreenAdapter(env)
    if aec_parallel_applies(env):
        return AECParallelAdapter(env)
    return PettingZooAdapter(env)


def make_pettingzoo(env_id: str, **kwargs: Any) -> PettingZooAdapter:
    """The ``pettingzoo`` family: ``env_id`` names a PettingZoo env module.

    Its ``parallel_env`` is used where it has one (simultaneous moves), else its
    ``env``, an AEC env: a turn-based game (`marl_vec.envs.pettingzoo.aec`).
    ``module.env`` or ``module.parallel_env`` names the constructor outright (e.g.
    ``pettingzoo.classic.rps_v2.env`` for rock-paper-scissors played in turns).

    For example ``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``,
    ``magent2.environments.battle_v4``, ``pettingzoo.classic.connect_four_v3``.
    """
    module_name, _, last = env_id.rpartition(".")
    constructor = last if last in ("env", "parallel_env") and module_name else None
    if constructor is None:
        module_name = env_id
    extra = "classic" if module_name.startswith("pettingzoo.classic") else "pettingzoo"
    module = import_env_module(module_name, extra, f"the PettingZoo env {module_name!r}")
    if constructor is None:
        constructor = "parallel_env" if hasattr(module, "parallel_env") else "env"
    if not hasattr(module, constructor):
        raise UnknownEnvError(f"{module_name!r} has no {constructor}(); name a PettingZoo env module such as "
                              "mpe2.simple_spread_v3 or pettingzoo.classic.connect_four_v3")
    env = getattr(module, constructor)(**kwargs)
    if constructor == "env":
        from marl_vec.envs.pettingzoo.aec import AECAdapter

        return AECAdapter(env)
    return pettingzoo_adapter(env)

"""The ``pettingzoo`` family: which adapter a PettingZoo ``ParallelEnv`` gets.

Every ``ParallelEnv`` gets :class:`~marl_vec.envs.pettingzoo.PettingZooAdapter`'s
results; two kinds of env get them with less work, from a subclass that knows
the env's insides: magent2's envs step through their engine
(:mod:`marl_vec.envs.magent_engine`), pistonball and cooperative_pong read their
screen once per step (:mod:`marl_vec.envs.butterfly_screen`).

Example:
    >>> from mpe2 import simple_spread_v3
    >>> type(pettingzoo_adapter(simple_spread_v3.parallel_env())).__name__
    'PettingZooAdapter'
"""

from __future__ import annotations

from typing import Any

from marl_vec.envs.butterfly_screen import ScreenAdapter, screen_path_applies
from marl_vec.envs.extras import UnknownEnvError, import_env_module
from marl_vec.envs.magent_engine import MAgentAdapter, engine_path_applies
from marl_vec.envs.pettingzoo import PettingZooAdapter


def pettingzoo_adapter(env: Any) -> PettingZooAdapter:
    """The adapter for a PettingZoo ``ParallelEnv`` (see the module docstring)."""
    if engine_path_applies(env):
        return MAgentAdapter(env)
    if screen_path_applies(env):
        return ScreenAdapter(env)
    return PettingZooAdapter(env)


def make_pettingzoo(env_id: str, **kwargs: Any) -> PettingZooAdapter:
    """The ``pettingzoo`` family: ``env_id`` names a module with ``parallel_env``.

    For example ``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``,
    ``pettingzoo.sisl.multiwalker_v9`` or ``magent2.environments.battle_v4``.
    """
    module = import_env_module(env_id, "pettingzoo", f"the PettingZoo env {env_id!r}")
    if not hasattr(module, "parallel_env"):
        raise UnknownEnvError(f"{env_id!r} has no parallel_env(); name a PettingZoo env module such as mpe2.simple_spread_v3")
    return pettingzoo_adapter(module.parallel_env(**kwargs))

"""Env families: a family name and an id make an adapter.

Each family lives in its own module, imported only when used, so that a missing
optional dependency costs nothing until it is needed, and then fails with the
extra to install (`marl_vec.envs.extras`; ``require`` and
``MissingExtraError`` are re-exported here). The registry sits above the
families: it may import them (lazily), they never import it.

Examples:
    >>> env = make_env("gym", "CartPole-v1")
    >>> env.spec.n_agents
    1
    >>> fn = make_env_fn("pettingzoo", "mpe2.simple_spread_v3", {"N": 2})  # picklable
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from marl_vec.core.adapter import MultiAgentEnv
from marl_vec.core.errors import SetupError
from marl_vec.core.state import WithState
from marl_vec.envs.extras import MissingExtraError, UnknownEnvError, require

__all__ = ["FAMILIES", "AdapterFn", "EnvOptionValueError", "EnvOptionsError", "Family", "MissingExtraError",
           "UnknownEnvError", "adapter_fns", "as_adapter", "family", "make_env", "make_env_fn", "require"]


class EnvOptionsError(SetupError, TypeError):
    """The env refused an option of ``env.kwargs`` (a misspelt or unknown keyword), or the
    value given to one (``N='x'`` where the env wants an int)."""


class EnvOptionValueError(EnvOptionsError, ValueError):
    """The env raised a ValueError on the value given to an option of ``env.kwargs``: still a
    ValueError, for code that caught the env's own, and an [`EnvOptionsError`][marl_vec.envs.registry.EnvOptionsError]."""


@dataclass(frozen=True)
class Family:
    name: str
    module: str  # the marl_vec module holding the family's factory
    factory: str  # factory(id, **kwargs) -> MultiAgentEnv
    extra: str | None  # pip extra that installs its dependencies
    makes: str  # what `id` names, for `marl-vec list` and errors
    # The values of env.kwargs.engine the family offers besides its default (`marl-vec tune` measures each).
    engines: tuple[str, ...] = ()
    # Whether env.kwargs takes ``device`` (the env computes on a device: VMAS's torch one, JaxMARL's
    # JAX one): a config's vec.device then reaches it (marl_vec.tools.config) where the results are
    # asked as one of ``device_backends`` (the array backends the engine makes on its device).
    takes_device: bool = False
    device_backends: tuple[str, ...] = ("torch",)


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("gym", "marl_vec.envs.gym", "make_gym", None, "a gymnasium env id, e.g. CartPole-v1"),
        Family("atari", "marl_vec.envs.atari", "make_atari", "atari", "an ALE game, e.g. ALE/Pong-v5, or pettingzoo.atari.pong_v3",
               engines=("python", "ale_vector", "envpool")),
        Family("pettingzoo", "marl_vec.envs.pettingzoo.family", "make_pettingzoo", "pettingzoo",
               "a PettingZoo env module, e.g. mpe2.simple_spread_v3"),
        Family("football", "marl_vec.envs.football", "make_football", "football",
               "a gfootball scenario, e.g. academy_3_vs_1_with_keeper"),
        Family("starcraft2", "marl_vec.envs.starcraft2", "make_starcraft2", "sc2",
               "a StarCraft II map, e.g. DefeatRoaches or 3m"),
        Family("lbf", "marl_vec.envs.pettingzoo.tuple_agents", "make_lbf", "lbf",
               "a Level-Based Foraging id, e.g. Foraging-8x8-2p-2f-coop-v3"),
        Family("rware", "marl_vec.envs.pettingzoo.tuple_agents", "make_rware", "rware",
               "a Multi-Robot Warehouse id, e.g. rware-tiny-2ag-v2"),
        Family("jaxmarl", "marl_vec.envs.jaxmarl", "make_jaxmarl", "jax",
               "a JaxMARL env on a JAX engine, e.g. smax/3m, jax_mpe/simple_spread, hanabi, overcooked",
               takes_device=True, device_backends=("jax", "torch")),
        Family("vmas", "marl_vec.envs.vmas", "make_vmas", "vmas",
               "a VMAS scenario, one torch batch per group, e.g. balance, transport, navigation, wheel, football",
               takes_device=True),
        Family("mamujoco", "marl_vec.envs.mamujoco", "make_mamujoco", "mamujoco",
               "a Multi-Agent MuJoCo scenario/split, e.g. Ant/2x4, HalfCheetah/6x1, Humanoid/9|8"),
        Family("meltingpot", "marl_vec.envs.meltingpot", "make_meltingpot", "meltingpot",
               "a Melting Pot substrate, e.g. commons_harvest__open, clean_up (49; scenarios, with bots, are refused)"),
    )
}


def family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown env family {name!r}; allowed: {', '.join(FAMILIES)}") from None


def make_env(family_name: str, env_id: str, **kwargs: Any) -> MultiAgentEnv:
    """Build one adapter of ``family_name`` for ``env_id``.

    An id the family's library does not know raises [`UnknownEnvError`][marl_vec.envs.extras.UnknownEnvError], and a
    keyword the env does not take [`EnvOptionsError`][marl_vec.envs.registry.EnvOptionsError]: both name what to change.
    """
    fam = family(family_name)
    module = importlib.import_module(fam.module)
    try:
        return getattr(module, fam.factory)(env_id, **kwargs)
    except SetupError:
        raise
    except (TypeError, ValueError) as exc:
        refused = [k for k in kwargs if re.search(rf"(?<!\w){re.escape(k)}(?!\w)", str(exc))]
        if refused and isinstance(exc, TypeError):  # "got an unexpected keyword argument 'NN'"
            raise EnvOptionsError(
                f"{family_name} env {env_id!r} does not take env.kwargs {', '.join(refused)}: {exc}") from exc
        # A value the env refused deep inside (mpe2's N='x': "'str' object cannot be interpreted as
        # an integer"), if the env builds without it; else a bug or a bad id, whose traceback matters.
        culprits = _refused_values(fam, env_id, kwargs)
        if culprits is None:
            raise
        given = ", ".join(f"{k}={kwargs[k]!r} ({_a(type(kwargs[k]).__name__)})" for k in culprits)
        raise (EnvOptionValueError if isinstance(exc, ValueError) else EnvOptionsError)(
            f"{family_name} env {env_id!r} refused env.kwargs {given}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        if _unknown_gymnasium_id(exc):
            raise UnknownEnvError(f"no env {env_id!r} in gymnasium's registry: {exc}") from exc
        raise


def _refused_values(fam: Family, env_id: str, kwargs: dict[str, Any]) -> list[str] | None:
    """The given options to blame for a failed build: the one without which the env builds (the
    first such, in the order given), else all of them if it builds with none; None if it fails
    without them too (they are not the cause). Only called once a build failed: it builds again."""
    if not kwargs:
        return None
    factory = getattr(importlib.import_module(fam.module), fam.factory)
    trials = [[k] for k in kwargs] if len(kwargs) > 1 else []
    for culprits in [*trials, list(kwargs)]:
        try:
            env = factory(env_id, **{k: v for k, v in kwargs.items() if k not in culprits})
        except Exception:  # any failure: without these options it fails too, so they are not the cause
            continue
        close = getattr(env, "close", None)
        if callable(close):
            close()
        return culprits
    return None


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _unknown_gymnasium_id(exc: Exception) -> bool:
    """gymnasium.make's NameNotFound, VersionNotFound, NamespaceNotFound or DeprecatedEnv (gym and atari ids)."""
    errors = sys.modules.get("gymnasium.error")
    return errors is not None and isinstance(exc, (errors.UnregisteredEnv, errors.DeprecatedEnv))


def make_env_fn(family_name: str, env_id: str, kwargs: dict[str, Any] | None = None) -> Callable[[], MultiAgentEnv]:
    """A picklable zero-argument env_fn, for ``make_vec`` and the process backends."""
    family(family_name)  # fail now, not in a worker
    return functools.partial(make_env, family_name, env_id, **(kwargs or {}))


def as_adapter(env: Any) -> MultiAgentEnv:
    """Wrap what an env_fn returned: an adapter as is, an RLlib MultiAgentEnv (`marl_vec.envs.rllib`),
    a gymnasium Env, a PettingZoo ParallelEnv or a PettingZoo AECEnv (a turn-based game,
    `marl_vec.envs.pettingzoo.aec`)."""
    if isinstance(env, MultiAgentEnv):
        return env
    # Before gymnasium: RLlib's MultiAgentEnv subclasses gymnasium.Env. Only where ray.rllib is
    # imported already (an RLlib env exists only there), so ray is never imported here.
    if "ray.rllib.env.multi_agent_env" in sys.modules:
        from marl_vec.envs.rllib import RLlibAdapter, is_rllib_env

        if is_rllib_env(env):
            return RLlibAdapter(env)
    import gymnasium

    if isinstance(env, gymnasium.Env):
        from marl_vec.envs.gym import GymAdapter

        return GymAdapter(env)
    import pettingzoo

    if isinstance(env, pettingzoo.ParallelEnv):
        from marl_vec.envs.pettingzoo.family import pettingzoo_adapter

        return pettingzoo_adapter(env)
    if isinstance(env, pettingzoo.AECEnv):  # turn-based: one agent moves per step
        from marl_vec.envs.pettingzoo.aec import AECAdapter

        return AECAdapter(env)
    raise TypeError(
        f"an env_fn returned {type(env).__name__}; allowed: a marl_vec MultiAgentEnv, "
        "an RLlib MultiAgentEnv, a gymnasium.Env, a PettingZoo ParallelEnv or a PettingZoo AECEnv"
    )


class AdapterFn:
    """A picklable adapter factory: ``fn()`` wrapped by `as_adapter`.

    The backends hand these to `EnvGroup`, which calls them (at construction and
    to rebuild a failed env) and never needs to know the families.

    Examples:
        >>> import gymnasium as gym
        >>> make = AdapterFn(lambda: gym.make("CartPole-v1"))
        >>> type(make()).__name__
        'GymAdapter'
    """

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def __call__(self) -> MultiAgentEnv:
        return as_adapter(self.fn())

    def __repr__(self) -> str:
        return f"AdapterFn({self.fn!r})"


def adapter_fns(env_fns: Sequence[Callable[[], Any]]) -> list[Callable[[], MultiAgentEnv]]:
    """``env_fns`` as adapter factories (those that already are stay as they are)."""
    return [fn if isinstance(fn, (AdapterFn, WithState)) else AdapterFn(fn) for fn in env_fns]

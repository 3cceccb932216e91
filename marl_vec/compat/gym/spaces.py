"""The spaces of the gymnasium faces ([`GymVectorEnv`][marl_vec.compat.gym.vector.GymVectorEnv], SB3's VecEnv).

A face reports the sub-envs' own space objects where they are the ones the
spec was made from (so ``action_space.sample()`` draws as gymnasium's would),
else spaces made from the spec; and refuses sub-envs whose spaces differ with
``SyncVectorEnv``'s RuntimeError and words, so that code matching gymnasium's
message matches ours.

Examples:
    >>> import gymnasium as gym
    >>> _check_same([gym.spaces.Discrete(2), gym.spaces.Discrete(3)], "action")
    Traceback (most recent call last):
    ...
    RuntimeError: Sub-environment action space doesn't make the `single_action_space`, action_space=Discrete(3), single_action_space=Discrete(2) (sub-environment 1)
"""

from __future__ import annotations

from typing import Any

import gymnasium

from marl_vec.core.spec import EnvSpec, SpecMismatchError
from marl_vec.vec.base import VecEnv


def observation_space_of(spec: EnvSpec, native: Any = None) -> gymnasium.spaces.Space:
    """One agent's observation space: the native env's when it matches the spec, else the spec's."""
    own = spec.single_agent_observation_space
    if isinstance(native, gymnasium.spaces.Space) and (
        native == own or (not spec.obs_is_tree and native.shape == spec.obs_shape and native.dtype == spec.obs_dtype)
    ):
        return native
    return own


def action_space_of(spec: EnvSpec) -> gymnasium.spaces.Space:
    """One agent's action space, as marl_vec takes it (Discrete keeps its ``start``)."""
    return spec.single_agent_action_space


def _native_action_space(spec: EnvSpec, native: Any) -> gymnasium.spaces.Space:
    """Env 0's own action space where it is the one the spec was made from, else one made from the spec."""
    own = action_space_of(spec)
    if isinstance(native, gymnasium.spaces.Space) and native == own:
        return native
    # gymnasium's MultiBinary compares ``n`` as given: MultiBinary(3) != MultiBinary((3,))
    if isinstance(native, gymnasium.spaces.MultiBinary) and isinstance(own, gymnasium.spaces.MultiBinary) \
            and native.shape == own.shape:
        return native
    if isinstance(native, gymnasium.spaces.Discrete) and spec.discrete and int(native.n) == spec.n_actions:
        return native
    if isinstance(native, gymnasium.spaces.Box) and not spec.discrete and native.shape == spec.action_shape:
        return native
    return action_space_of(spec)


def _attr_or_none(venv: VecEnv, name: str, indices: list[int] | None = None) -> list[Any]:
    """``venv.get_attr(name)``, or Nones for adapters without it (each backend wraps the error its own way)."""
    n = venv.num_envs if indices is None else len(indices)
    try:
        return venv.get_attr(name, indices=indices)
    except Exception:  # noqa: BLE001 - AttributeError here, wrapped by subproc/ray
        return [None] * n


def _check_same(spaces: list[Any], what: str) -> None:
    """SyncVectorEnv refuses sub-envs whose spaces differ from env 0's (Box bounds included)."""
    single = spaces[0]
    for i, space in enumerate(spaces):
        if space is not None and space != single:
            raise RuntimeError(_differ_message(what, "same", single, space, i))


def _differ_message(what: str, observation_mode: Any, single: Any, space: Any, index: int) -> str:
    """SyncVectorEnv's words for sub-env ``index`` whose space differs from env 0's
    (so that code matching gymnasium's message matches ours), with the env named."""
    if what == "action":
        return (f"Sub-environment action space doesn't make the `single_action_space`, action_space={space}, "
                f"single_action_space={single} (sub-environment {index})")
    if observation_mode == "same":
        return (f"GymVectorEnv as SyncVectorEnv(..., observation_mode='same') however the sub-environments "
                f"observation spaces are not equivalent. single_observation_space={single}, sub-environment "
                f"{index} observation_space={space}. If this is intentional, use `observation_mode='different'` "
                f"instead.")
    return (f"GymVectorEnv as SyncVectorEnv(..., observation_mode='different' or custom space) however the "
            f"sub-environments observation spaces do not share a common shape and dtype, "
            f"single_observation_space={single}, sub-environment {index} observation space={space}")


def _mismatch_as_gymnasium(err: SpecMismatchError, observation_mode: Any) -> RuntimeError:
    """A VecEnv's refusal of envs with different specs as SyncVectorEnv's RuntimeError."""
    if err.field == "action":
        first, other = err.first.single_agent_action_space, err.other.single_agent_action_space
        return RuntimeError(_differ_message("action", observation_mode, first, other, err.index) + f"; {err}")
    first, other = err.first.single_agent_observation_space, err.other.single_agent_observation_space
    return RuntimeError(_differ_message("observation", observation_mode, first, other, err.index) + f"; {err}")

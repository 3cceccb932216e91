"""Which gymnasium action spaces marl_vec takes, as action specs.

``action_spec_of`` is shared by the gymnasium family and the PettingZoo adapters (each
agent's space); a space it cannot take is refused with a TypeError naming what is allowed.
"""

from __future__ import annotations


import gymnasium as gym
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.spec import (ActionSpec, ContinuousAction, DiscreteAction, MultiBinaryAction,
                           MultiDiscreteAction, ObjectAction, TreeAction)

ALLOWED_ACTIONS = "Discrete, Box, MultiDiscrete (one axis), MultiBinary, and Dict / Tuple of those (nested)"
ALLOWED_GYM_ACTIONS = ("Discrete, Box, MultiDiscrete, MultiBinary, and Dict / Tuple of those (nested); "
                       "any other space (Text, Graph, Sequence, OneOf, custom) as an object leaf")


def action_spec_of(space: gym.Space, what: str, gymnasium_env: bool = False) -> ActionSpec:
    """The action spec of one agent's gymnasium action space; TypeError naming ``what`` if unsupported.

    ``gymnasium_env``: also the spaces only single-agent gymnasium envs get (object leaves for
    Text, Graph, Sequence, OneOf and custom spaces; MultiDiscrete of any rank).
    """
    if isinstance(space, gym.spaces.Discrete):
        return DiscreteAction(int(space.n), np.dtype(space.dtype), int(space.start))
    if isinstance(space, gym.spaces.Box):
        return ContinuousAction(
            shape=tuple(space.shape),
            low=np.asarray(space.low, dtype=np.float64),
            high=np.asarray(space.high, dtype=np.float64),
            dtype=np.dtype(space.dtype),
        )
    if isinstance(space, gym.spaces.MultiDiscrete) and (space.nvec.ndim == 1 or gymnasium_env):
        grid = None if space.nvec.ndim == 1 else tuple(int(d) for d in space.nvec.shape)
        return MultiDiscreteAction(tuple(int(n) for n in space.nvec.reshape(-1)),
                                   tuple(int(s) for s in space.start.reshape(-1)), np.dtype(space.dtype), grid)
    if isinstance(space, gym.spaces.MultiBinary):
        return MultiBinaryAction(tuple(int(d) for d in space.shape), np.dtype(space.dtype))
    if spaces.is_tree(space):
        try:
            leaves = tuple((path, action_spec_of(leaf, what, gymnasium_env))
                           for path, leaf in spaces.leaves(space, what, objects=gymnasium_env))
        except TypeError:
            leaves = ()
        if leaves and not any(isinstance(leaf, TreeAction) for _, leaf in leaves):
            return TreeAction(space, leaves)  # type: ignore[arg-type]  # leaves are leaf specs: checked above
    if gymnasium_env and isinstance(space, gym.Space) and spaces.is_object_leaf(space):
        return ObjectAction(space)
    allowed = ALLOWED_GYM_ACTIONS if gymnasium_env else ALLOWED_ACTIONS
    raise TypeError(f"{what}: action space {space} is not supported; allowed: {allowed}")

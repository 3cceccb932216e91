"""The Python types of a gymnasium env's own observations, to give a final observation back as the env gave it.

The batch keeps observations in numpy buffers of the space's dtype, so the type an
env returned is gone: FrozenLake's ``int``, another env's ``np.int64`` or 0-d
array, a float64 array under a float32 Box. Gymnasium's ``SyncVectorEnv`` (and
SB3's ``DummyVecEnv``) hand out the env's own object as the final observation. A
`GymAdapter` records the kind of each leaf of its first
reset observation (`obs_kind`); the faces read it through ``get_attr(OBS_KIND_ATTR)``
and rebuild each final observation with `as_native`.

Examples:
    >>> import numpy as np
    >>> kind = obs_kind({"pos": np.zeros(2), "cell": 3})
    >>> kind
    {'pos': ('array', '<f8'), 'cell': ('python', 'int')}
    >>> as_native(np.array(5), kind["cell"], copy=True)
    5
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The attribute a face reads (VecEnv.get_attr) to learn the kinds; GymAdapter answers it.
OBS_KIND_ATTR = "marl_vec_obs_kind"
# Likewise for rewards: the dtype numpy gives the env's own reward (None before its first step).
REWARD_KIND_ATTR = "marl_vec_reward_kind"

_PYTHON = {"int": int, "float": float, "bool": bool}


def obs_kind(obs: Any) -> Any:
    """The kind of each leaf of ``obs`` (dicts and tuples kept as the tree), picklable:
    ``("python", "int" | "float" | "bool")``, ``("scalar", dtype)`` for a numpy scalar,
    ``("array", dtype)`` for an array (0-d too), None for anything else (object leaves
    such as Text or Graph values, lists: given back as the buffers hold them)."""
    if isinstance(obs, dict):
        return {key: obs_kind(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(obs_kind(value) for value in obs)
    if type(obs) in (int, float, bool):
        return ("python", type(obs).__name__)
    if isinstance(obs, np.generic):
        return ("scalar", obs.dtype.str)
    if isinstance(obs, np.ndarray) and not obs.dtype.hasobject:
        return ("array", obs.dtype.str)
    return None


def reward_kind(reward: Any) -> str:
    """The dtype (``dtype.str``) numpy gives ``reward``, as ``np.stack`` of the envs' rewards
    does in Tianshou's vector envs: a Python int is int64, a float float64.

    ```pycon
    >>> reward_kind(1), reward_kind(1.0), reward_kind(np.float32(1))
    ('<i8', '<f8', '<f4')
    ```
    """
    return np.asarray(reward).dtype.str


def as_native(value: np.ndarray, kind: Any, copy: bool) -> Any:
    """One leaf of a final observation (a row of the buffers) as the kind ``kind`` of
    `obs_kind`; ``copy``: the result must not be a view of ``value``. A None kind
    gives ``value`` (a copy when ``copy``).

    ```pycon
    >>> as_native(np.array(1.5, np.float32), ("scalar", "<f4"), copy=False)
    np.float32(1.5)
    ```
    """
    if kind is None:
        return value.copy() if copy else value
    what, name = kind
    if what == "python":
        return _PYTHON[name](value.item())
    dtype = np.dtype(name)
    if what == "scalar":
        return value.astype(dtype, copy=False)[()]
    return value.astype(dtype, copy=copy)

"""Between the VecEnv's arrays and gymnasium's batches: observations, actions and infos.

The VecEnv holds (E, 1, ...) arrays (an agent axis of one) and object arrays for
Text, Graph, Sequence, OneOf and custom spaces; gymnasium batches (E, ...)
arrays and tuples of per-env values. Infos lose marl_vec's own keys and get the
env's ``"episode"`` back.

Examples:
    >>> agent_zero(np.zeros((3, 1, 4))).shape
    (3, 4)
    >>> object_column(["a", "b"]).shape
    (2, 1)
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.obs_types import OBS_KIND_ATTR, as_native
from marl_vec.core.group import ENV_EPISODE_KEY
from marl_vec.vec.base import VecEnv


def agent_zero(tree: Any) -> Any:
    """The agent axis squeezed, leaf by leaf: (E, 1, ...) views -> (E, ...) views."""
    if isinstance(tree, np.ndarray):
        return tree[:, 0]
    return spaces.tree_map(lambda a: a[:, 0], tree)


def final_obs_of(space: gymnasium.spaces.Space, tree: Any, env: int, copy: bool, kind: Any = None) -> Any:
    """Env ``env``'s final observation as the env itself returned it (SyncVectorEnv's
    ``infos["final_obs"][env]``): each leaf of the type ``kind`` says
    (`marl_vec.core.obs_types`: the env's own ``int``, ``np.int64``, 0-d array, array
    dtype, ...), dicts / tuples for Dict / Tuple (copied when ``copy``: the buffers are
    reused). Without a kind (adapters other than GymAdapter): Python ints for Discrete
    leaves, the buffers' arrays elsewhere.

    Examples:
        >>> space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32), gymnasium.spaces.Box(0, 1, (2,))))
        >>> final_obs_of(space, (np.array([[7]]), np.zeros((1, 1, 2), np.float32)), 0, copy=False)
        (7, array([0., 0.], dtype=float32))
        >>> final_obs_of(space, (np.array([[7]]), np.zeros((1, 1, 2), np.float32)), 0, copy=False,
        ...              kind=(("scalar", "<i8"), ("array", "<f8")))
        (np.int64(7), array([0., 0.]))
    """
    if isinstance(space, gymnasium.spaces.Dict):
        kinds = kind if isinstance(kind, dict) else {}
        # In the env's own key order where the kind knows it (gymnasium's Dict space sorts its keys).
        keys = list(kinds) if kinds.keys() == space.spaces.keys() else list(space.spaces)
        return {key: final_obs_of(space.spaces[key], tree[key], env, copy, kinds.get(key)) for key in keys}
    if isinstance(space, gymnasium.spaces.Tuple):
        kinds = kind if isinstance(kind, tuple) and len(kind) == len(space.spaces) else (None,) * len(space.spaces)
        return tuple(final_obs_of(child, tree[i], env, copy, kinds[i]) for i, child in enumerate(space.spaces))
    if spaces.is_object_leaf(space):  # the value itself; a later step replaces it, never changes it
        return tree[env, 0]
    value = tree[env, 0, ...]  # an array, 0-d too
    if isinstance(kind, tuple) and len(kind) == 2:
        return as_native(value, kind, copy)
    if isinstance(space, gymnasium.spaces.Discrete):
        return value.item()
    return value.copy() if copy else value


class FinalObs:
    """`final_obs_of` for a face over ``venv``, each env's leaves of the types its
    env returns (`marl_vec.core.obs_types`, read from the adapters once, at the first
    final observation: the envs have been reset by then).

    ```python
    final = FinalObs(venv)
    final(r.final_obs, i, copy=True)
    ```
    """

    def __init__(self, venv: VecEnv):
        self.venv = venv
        self.space = venv.spec.single_agent_observation_space  # the structure of r.final_obs
        self.kinds: list[Any] | None = None

    def __call__(self, final_obs: Any, env: int, copy: bool) -> Any:
        return final_obs_of(self.space, final_obs, env, copy, self.kind(env))

    def kind(self, env: int) -> Any:
        """The kind of env ``env``'s observations (`marl_vec.core.obs_types.obs_kind`); without
        one (adapters other than GymAdapter), a Discrete observation's is a Python int."""
        if self.kinds is None:
            try:
                self.kinds = list(self.venv.get_attr(OBS_KIND_ATTR))
            except Exception:  # not a GymAdapter (AttributeError here, WorkerError from a worker)
                self.kinds = [None] * self.venv.num_envs
        kind = self.kinds[env]
        if kind is None and isinstance(self.space, gymnasium.spaces.Discrete):
            return ("python", "int")  # as final_obs_of gives it
        return kind


def gym_batch(space: gymnasium.spaces.Space, tree: Any) -> Any:
    """A tree of (E, ...) arrays of ``space``'s structure as gymnasium batches it: object
    leaves (Text, Graph, Sequence, OneOf, custom spaces) as a tuple of per-env values.

    ```pycon
    >>> gym_batch(gymnasium.spaces.Text(4), np.array(["ab", "c"], dtype=object))
    ('ab', 'c')
    ```
    """
    if isinstance(space, gymnasium.spaces.Dict):
        return {key: gym_batch(child, tree[key]) for key, child in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(gym_batch(child, tree[i]) for i, child in enumerate(space.spaces))
    if spaces.is_object_leaf(space):
        return tuple(tree)
    return tree


def object_column(values: Sequence[Any]) -> np.ndarray:
    """Per-env values as an (E, 1) object array, each value kept as it is."""
    out = np.empty((len(values), 1), dtype=object)
    for i, value in enumerate(values):
        out[i, 0] = value
    return out


def _venv_tree(space: gymnasium.spaces.Space, batched: Any, n: int) -> Any:
    """Batched actions of ``space``'s structure (leaves (n, ...) arrays; object leaves
    n values) as the VecEnv's tree of (n, 1, ...) arrays."""
    if isinstance(space, gymnasium.spaces.Dict):
        return {key: _venv_tree(child, batched[key], n) for key, child in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(_venv_tree(child, batched[i], n) for i, child in enumerate(space.spaces))
    if spaces.is_object_leaf(space):
        return object_column(list(batched))
    return batched.reshape(n, 1, *batched.shape[1:])


def _batched_leaves(space: gymnasium.spaces.Space, actions: Any, n: int) -> Any:
    """``actions`` as a tree of arrays of ``space``'s structure with ``n`` rows each, or
    None when it is not one (wrong structure or row count)."""
    if isinstance(space, gymnasium.spaces.Dict):
        if not isinstance(actions, dict) or set(actions) != set(space.spaces):
            return None
        out = {key: _batched_leaves(child, actions[key], n) for key, child in space.spaces.items()}
        return None if any(v is None for v in out.values()) else out
    if isinstance(space, gymnasium.spaces.Tuple):
        if not isinstance(actions, tuple) or len(actions) != len(space.spaces):
            return None
        items = tuple(_batched_leaves(child, a, n) for child, a in zip(space.spaces, actions))
        return None if any(v is None for v in items) else items
    if spaces.is_object_leaf(space):  # a tuple of per-env values, as batch_space's Tuple samples
        return actions if isinstance(actions, (tuple, list)) and len(actions) == n else None
    if not isinstance(actions, np.ndarray) or actions.shape != (n, *(space.shape or ())):
        return None
    return actions


# Keys marl_vec's EnvGroup adds to a step's info; everything else is the env's own.
_GROUP_KEYS = frozenset(("episode", "reset_info", ENV_EPISODE_KEY))


def _env_info(info: dict[str, Any]) -> dict[str, Any]:
    """A step's info as the env gave it: marl_vec's keys removed, the env's own ``"episode"`` restored."""
    if not _GROUP_KEYS.intersection(info):
        return info
    env_info = {k: v for k, v in info.items() if k not in _GROUP_KEYS}
    if ENV_EPISODE_KEY in info:
        env_info["episode"] = info[ENV_EPISODE_KEY]
    return env_info


def _gym_episode(summary: dict[str, Any]) -> dict[str, Any]:
    """marl_vec's episode summary in RecordEpisodeStatistics' names (``r``, ``l``) plus family stats."""
    out = {"r": float(summary["return"]), "l": int(summary["length"])}
    out.update({k: v for k, v in summary.items() if k not in ("return", "length", "agent_returns")})
    return out

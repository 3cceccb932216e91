"""Observations and rewards of the Tianshou face as Tianshou's vector envs give them.

Tianshou ``np.stack``\\ s what each env returned: a Python int reward becomes int64,
an int array observation under a float32 ``Box`` stays int64, a dict observation
stays the env's dict (an object array of one dict per env, keys in the env's order).
The VecEnv's buffers hold the spaces' dtypes instead, so `NativeValues` takes
the kinds a `GymAdapter` records of its env's own values
(`marl_vec.core.obs_types`) and gives each batch back in those types. Envs of
other families keep the VecEnv's dtypes.

When the kinds are read matters in async use: ``get_attr`` waits for the envs in
flight. Observation kinds are read right after a reset (the face resets only with
nothing in flight); reward kinds come in the info of each env's first step, which
the adapters add once the face has asked (``set_attr(REWARD_KIND_ATTR, True)``).

Examples:
    >>> values = NativeValues(venv)
    >>> values.rewards(r.reward[:, 0], r.env_ids.tolist(), r.infos).dtype
    dtype('int64')
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marl_vec.compat.gym.batching import final_obs_of
from marl_vec.core.obs_types import OBS_KIND_ATTR, REWARD_KIND_ATTR
from marl_vec.vec.base import VecEnv

_PYTHON_DTYPES = {"int": np.dtype(np.int64), "float": np.dtype(np.float64), "bool": np.dtype(np.bool_)}


def _dtype_of(kind: Any) -> np.dtype | None:
    """The dtype ``np.stack`` gives a leaf of this kind (None: the buffers' own)."""
    if not isinstance(kind, tuple) or len(kind) != 2:
        return None
    what, name = kind
    return _PYTHON_DTYPES[name] if what == "python" else np.dtype(name)


class NativeValues:
    """The kinds of ``venv``'s envs' own values, and batches rebuilt in them."""

    def __init__(self, venv: VecEnv):
        self.venv = venv
        self.space = venv.spec.single_agent_observation_space
        self.tree = venv.spec.obs_is_tree
        n = venv.num_envs
        self.obs_kinds: list[Any] = [None] * n
        self._obs_dtypes: list[np.dtype | None] = [None] * n  # non-Dict observations: the kinds' dtypes
        self._obs_known = [False] * n
        self.reward_dtypes: list[np.dtype | None] = [None] * n
        try:
            kinds = venv.get_attr(REWARD_KIND_ATTR)
            self.gym = True
        except AttributeError:  # not gymnasium envs: the VecEnv's dtypes
            self.gym = False
            return
        for i, kind in enumerate(kinds):
            if kind is not None:
                self.reward_dtypes[i] = np.dtype(kind)
        missing = [i for i, kind in enumerate(kinds) if kind is None]
        if missing:
            venv.set_attr(REWARD_KIND_ATTR, [True] * len(missing), indices=missing)

    def after_reset(self, env_ids: Sequence[int]) -> None:
        """Read the observation kinds of envs reset for the first time (nothing is in flight)."""
        missing = [i for i in env_ids if not self._obs_known[i]]
        if not self.gym or not missing:
            return
        for i, kind in zip(missing, self.venv.get_attr(OBS_KIND_ATTR, indices=missing)):
            self.obs_kinds[i] = kind
            self._obs_dtypes[i] = _dtype_of(kind)
            self._obs_known[i] = kind is not None

    def obs_rows(self, obs: Any, env_ids: Sequence[int]) -> list[Any]:
        """Row k of the (R, 1, ...) batch ``obs`` (env ``env_ids[k]``) as that env returned it."""
        if self.tree:
            kinds = self.obs_kinds
            return [final_obs_of(self.space, obs, k, False, kinds[e]) for k, e in enumerate(env_ids)]
        rows = obs[:, 0]
        dtypes = [self._obs_dtypes[e] for e in env_ids]
        if None not in dtypes and dtypes:
            dtype = np.result_type(*dtypes)
            if dtype != rows.dtype:
                rows = rows.astype(dtype)
        return list(rows)

    def rewards(self, rew: np.ndarray, env_ids: Sequence[int], infos: Sequence[dict[str, Any]]) -> np.ndarray:
        """``rew`` (R,) in the dtype ``np.stack`` gives the envs' own rewards."""
        if not self.gym:
            return rew
        dtypes = self.reward_dtypes
        for e, info in zip(env_ids, infos):
            if dtypes[e] is None:
                kind = info.get(REWARD_KIND_ATTR)
                if kind is None:  # a restarted env (a new adapter) reports none: ask it
                    kind = self.venv.get_attr(REWARD_KIND_ATTR, indices=[e])[0]
                dtypes[e] = rew.dtype if kind is None else np.dtype(kind)
        dtype = np.result_type(*[dtypes[e] for e in env_ids])
        return rew if dtype == rew.dtype else rew.astype(dtype)

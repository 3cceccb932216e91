"""Checks of one batch of actions of one leaf kind: Box, Discrete, MultiDiscrete, MultiBinary, object.

Each check takes the ``(E, A, *shape)`` actions of one leaf, the ``(E, A)``
agent mask (dead agents' actions are ignored) and raises ``ValueError`` naming
the env, the agent, the action and what is allowed. ``env_ids`` names the envs of
the rows when they are not ``0..E-1`` (the async pool's ``send`` checks only the
rows of the envs it sends). VecEnv keeps its own
allocation-free fast path for plain Discrete actions and uses these for the
rest, and for every leaf of Dict/Tuple action spaces.

Examples:
    >>> import numpy as np
    >>> from marl_vec.core.spec import MultiBinaryAction
    >>> check = LeafCheck(MultiBinaryAction((2,)), ("a",))
    >>> check(np.array([[[0, 2]]]), np.ones((1, 1), bool))
    Traceback (most recent call last):
    ...
    ValueError: action [0, 2] for env 0, agent 'a' is not binary; allowed: 0 and 1
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.spec import (ContinuousAction, DiscreteAction, LeafAction, MultiBinaryAction, MultiDiscreteAction,
                           ObjectAction)


def leaf_label(path: spaces.Path) -> str:
    """``action`` for a leaf space; ``action['move']``, ``action[1]['id']`` inside trees."""
    return "action" + "".join(f"[{p!r}]" for p in path)


class LeafCheck:
    """Checks actions of one leaf spec for ``agent_ids``; ``path``: the leaf's place in a tree."""

    def __init__(self, action: LeafAction, agent_ids: Sequence[str], path: spaces.Path = ()):
        self.action, self.agent_ids, self.what = action, tuple(agent_ids), leaf_label(path)
        A = len(self.agent_ids)
        if isinstance(action, ContinuousAction):
            # Per agent (A, *shape): padded agents have their own bounds, and the
            # padding entries (outside every agent's own shape) are not checked.
            shape = action.shape
            self.low = np.broadcast_to(np.asarray(action.low, dtype=np.float64), (A, *shape))
            self.high = np.broadcast_to(np.asarray(action.high, dtype=np.float64), (A, *shape))
            self.checked: np.ndarray | None = None
            if action.padded and action.agent_shapes is not None:
                checked = np.zeros((A, *shape), dtype=bool)
                for a, native in enumerate(action.agent_shapes):
                    spaces.window(checked[a], native, len(native) != len(shape))[...] = True
                self.checked = checked
        elif isinstance(action, MultiDiscreteAction):  # any rank: shaped like one action
            self.start = np.asarray(action.start, dtype=np.int64).reshape(action.shape)
            self.n = np.asarray(action.nvec, dtype=np.int64).reshape(action.shape)

    def describe(self) -> str:
        """What one agent gives, for shape errors."""
        action = self.action
        if isinstance(action, DiscreteAction):
            return f"integer in {action.start}..{action.start + action.n_actions - 1}"
        if isinstance(action, MultiDiscreteAction):
            if action.grid is not None:
                return f"array of shape {action.grid} of integers (MultiDiscrete)"
            return f"array of {len(action.nvec)} integers (MultiDiscrete)"
        if isinstance(action, ObjectAction):
            return f"value of {action.space()}"
        if isinstance(action, MultiBinaryAction):
            return f"array of shape {action.shape} of 0/1 (MultiBinary)"
        return f"array of shape {action.shape}"

    def _where(self, e: int, a: int, env_ids: Sequence[int] | None) -> str:
        return f"for env {e if env_ids is None else env_ids[e]}, agent {self.agent_ids[a]!r}"

    def _first_bad(self, bad: np.ndarray, env_ids: Sequence[int] | None) -> tuple[int, int, str]:
        e, a = (int(x) for x in np.argwhere(bad)[0])
        return e, a, self._where(e, a, env_ids)

    def __call__(self, actions: np.ndarray, mask: np.ndarray, avail: np.ndarray | None = None,
                 env_ids: Sequence[int] | None = None) -> None:
        """Raise for the first live agent whose action is wrong; row e is env ``env_ids[e]``
        (None: env e)."""
        action = self.action
        if isinstance(action, ContinuousAction):
            self._box(actions, mask, env_ids)
        elif isinstance(action, DiscreteAction):
            self._discrete(actions, mask, avail, env_ids)
        elif isinstance(action, MultiDiscreteAction):
            self._multi_discrete(actions, mask, avail, env_ids)
        elif isinstance(action, ObjectAction):
            self._object(actions, mask, env_ids)
        else:
            self._multi_binary(actions, mask, env_ids)

    def _box(self, actions: np.ndarray, mask: np.ndarray, env_ids: Sequence[int] | None) -> None:
        _check_kind(actions, "fiu", "continuous actions must be numbers")
        axes = tuple(range(2, actions.ndim))
        outside = (actions < self.low) | (actions > self.high) | ~np.isfinite(actions)
        if self.checked is not None:
            outside &= self.checked
        bad = (outside.any(axis=axes) if axes else outside) & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            low, high, value = self.low[a], self.high[a], actions[e, a]
            agent_shapes = self.action.agent_shapes if isinstance(self.action, ContinuousAction) else None
            if self.checked is not None and agent_shapes is not None:  # show the agent's own part
                native = agent_shapes[a]
                flat = len(native) != len(self.action.shape)
                low, high, value = (spaces.window(x, native, flat) for x in (low, high, value))
            raise ValueError(
                f"{self.what} {value.tolist()} {where} is outside the action space [{low.tolist()}, {high.tolist()}]"
            )

    def _discrete(self, actions: np.ndarray, mask: np.ndarray, avail: np.ndarray | None,
                  env_ids: Sequence[int] | None) -> None:
        """Raise for the first live agent whose action is out of range or unavailable."""
        _check_kind(actions, "iu", "discrete actions must be integers")
        action = self.action
        assert isinstance(action, DiscreteAction)
        n, start = action.n_actions, action.start
        index = actions.astype(np.int64) - start  # position in avail_actions
        bad = ((index < 0) | (index >= n)) & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            raise ValueError(f"{self.what} {actions[e, a]} {where} is out of range; allowed: {start}..{start + n - 1}")
        if avail is None:
            return
        chosen = np.take_along_axis(avail, np.clip(index, 0, n - 1)[..., None], axis=2)[..., 0]
        bad = ~chosen & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            allowed = (np.flatnonzero(avail[e, a]) + start).tolist()
            raise ValueError(f"{self.what} {actions[e, a]} {where} is not available; available now: {allowed}")

    def _multi_discrete(self, actions: np.ndarray, mask: np.ndarray, avail: np.ndarray | None,
                        env_ids: Sequence[int] | None) -> None:
        _check_kind(actions, "iu", "MultiDiscrete actions must be integers")
        action = self.action
        assert isinstance(action, MultiDiscreteAction)
        offset = actions.astype(np.int64) - self.start  # value - start, per component
        components = tuple(range(2, offset.ndim))  # one axis, or the grid's axes
        bad = ((offset < 0) | (offset >= self.n)).any(axis=components) & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            allowed = ", ".join(f"{s}..{s + n - 1}" for s, n in zip(action.start, action.nvec))
            raise ValueError(
                f"{self.what} {actions[e, a].tolist()} {where} is out of range; allowed per component"
                f"{'' if action.grid is None else ' (in C order)'}: [{allowed}]"
            )
        if avail is None or np.count_nonzero(avail) == avail.size:
            return
        chosen = np.take_along_axis(avail, offset[..., None], axis=-1)[..., 0]  # avail: (E, A, *shape, max_n)
        bad = ~chosen.all(axis=components) & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            c = int(np.flatnonzero(~chosen[e, a].reshape(-1))[0])
            avail = avail.reshape(*avail.shape[:2], -1, avail.shape[-1])
            values = (np.flatnonzero(avail[e, a, c]) + action.start[c]).tolist()
            raise ValueError(
                f"{self.what} {actions[e, a].tolist()} {where} is not available: component {c} may now take {values}"
            )

    def _object(self, actions: np.ndarray, mask: np.ndarray, env_ids: Sequence[int] | None) -> None:
        """Each live agent's value must be in the space (``space.contains``)."""
        space = self.action.space()
        for e, a in zip(*np.nonzero(mask)):
            value = actions[e, a]
            try:
                inside = space.contains(value)
            except Exception:  # noqa: BLE001 - a value of the wrong kind may make contains() itself raise
                inside = False
            if not inside:
                raise ValueError(f"{self.what} {value!r} {self._where(int(e), int(a), env_ids)} is not in the "
                                 f"action space {space}")

    def _multi_binary(self, actions: np.ndarray, mask: np.ndarray, env_ids: Sequence[int] | None) -> None:
        # Floats too: SB3's PPO and A2C send MultiBinary actions as float32 0./1. (the check
        # below refuses any other value, NaN included; the buffer then holds them as integers).
        _check_kind(actions, "iubf", "MultiBinary actions must be 0/1 integers, bools or floats")
        E, A = actions.shape[:2]
        bad = ((actions != 0) & (actions != 1)).reshape(E, A, -1).any(axis=2) & mask
        if bad.any():
            e, a, where = self._first_bad(bad, env_ids)
            raise ValueError(f"{self.what} {actions[e, a].tolist()} {where} is not binary; allowed: 0 and 1")


def _check_kind(actions: np.ndarray, kinds: str, must_be: str) -> None:
    """Refuse actions whose dtype kind is not one of ``kinds``; ``must_be`` says what they must be.

    ```pycon
    >>> _check_kind(np.zeros(2, bool), "iu", "discrete actions must be integers")
    Traceback (most recent call last):
    ...
    ValueError: discrete actions must be integers, got dtype bool; pass actions.astype(np.int64) (False -> 0, True -> 1)
    ```
    """
    if actions.dtype.kind not in kinds:
        raise ValueError(f"{must_be}, got dtype {actions.dtype}{_cast_hint(actions.dtype, kinds)}")


def refuse_non_integers(actions: np.ndarray, action: LeafAction) -> None:
    """Refuse float, bool (or other) actions of a Discrete or MultiDiscrete leaf, naming the cast.

    Floats are refused rather than rounded or truncated, even whole ones: a copy into the
    integer buffer would silently turn 1.7 into 1, and checking each value for being whole
    would cost an allocation per step. Only the dtype is read, so this runs with
    ``validate=False`` too.
    """
    if actions.dtype.kind not in "iu":
        kind = "MultiDiscrete" if isinstance(action, MultiDiscreteAction) else "discrete"
        _check_kind(actions, "iu", f"{kind} actions must be integers")


def _cast_hint(dtype: np.dtype, kinds: str) -> str:
    """The fix for integer leaves given floats or bools: ``actions.astype(np.int64)``."""
    if kinds != "iu":
        return ""
    if dtype.kind == "f":
        return ("; if they are whole numbers, pass actions.astype(np.int64) "
                "(floats are refused, not rounded, so that 1.7 never becomes 1)")
    if dtype.kind == "b":
        return "; pass actions.astype(np.int64) (False -> 0, True -> 1)"
    return ""

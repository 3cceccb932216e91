"""Writing the caller's actions into the buffers: every action form, checked, with clear errors.

``step()`` takes an array of shape ``(num_envs, n_agents, *action_shape)``,
object values (Text, Graph, ... spaces) or a Dict/Tuple tree of such arrays;
the async pool's ``send()`` takes the same over the rows of ``env_ids`` only.
Discrete actions are checked without allocating (`ActionWriter._all_available`);
where that fast check fails, the per-leaf checks of `marl_vec.vec.action_checks`
name the first live agent whose action is wrong. Nothing is written unless every leaf is valid.
In turn-based games only the agent to move is read (`marl_vec.vec.turns`).

Examples:
    >>> as_object_array([("ab",), ("c",)], (2, 1)).shape
    (2, 1)

`ActionWriter` is a mixin of [`VecEnv`][marl_vec.vec.base.VecEnv].
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.spec import DiscreteAction, EnvSpec, MultiDiscreteAction, ObjectAction, TreeAction
from marl_vec.vec.action_checks import LeafCheck, leaf_label, refuse_non_integers
from marl_vec.vec.turns import TurnActions


class ActionWriter:
    """Checking actions and writing them into ``buffers.actions``, for [`VecEnv`][marl_vec.vec.base.VecEnv]."""

    buffers: BatchBuffers
    spec: EnvSpec
    num_envs: int
    validate: bool

    def _init_actions(self, spec: EnvSpec, num_envs: int) -> None:
        """What the checks read at every step, computed once from the spec."""
        action = spec.action
        A = spec.n_agents
        # Read at every step by the validation.
        self._actions_shape = (num_envs, A, *spec.action_shape)
        self._discrete = spec.discrete
        self._action = action
        if isinstance(action, DiscreteAction):
            self._n_actions = action.n_actions
            self._start = action.start
            # Scratch for the allocation-free availability check: flat index of
            # (env, agent, action) = base + action - start.
            self._flat_base = np.arange(num_envs * A, dtype=np.int64) * action.n_actions
            self._flat_index = np.empty_like(self._flat_base)
            self._shifted = np.empty((num_envs, A), dtype=np.int64)  # actions - start
            self._chosen = np.empty(num_envs * A, dtype=bool)
            self._in_range = np.empty((num_envs, A), dtype=bool)
            self._unsigned: dict[np.dtype, np.dtype] = {}  # action dtype -> its unsigned twin
        # Turn-based games with Discrete moves: only the movers' actions are read (NaN elsewhere is fine).
        self._turns = TurnActions(spec) if spec.turn_based and isinstance(action, DiscreteAction) else None
        self._objects_in = isinstance(action, ObjectAction)  # actions are values, kept in an object array
        self._integers_in = isinstance(action, (DiscreteAction, MultiDiscreteAction))  # no floats, even unvalidated
        # (path, check) of the action kind (for Discrete: what explains a failed fast
        # check), or of each leaf of Dict/Tuple actions (see action_checks.py).
        self._leaf_checks: list[tuple[spaces.Path, LeafCheck]] = (
            [(path, LeafCheck(leaf, spec.agents, path)) for path, leaf in action.leaves]
            if isinstance(action, TreeAction) else [((), LeafCheck(action, spec.agents))]
        )

    def _write_actions(self, actions: Any) -> None:
        if self._turns is not None:
            buf = self.buffers
            self._turns.write(actions, buf.actions, buf.acting, buf.avail_actions, self.validate)
            return
        if isinstance(self._action, TreeAction):
            self._write_tree_actions(actions)
            return
        buf = self.buffers.actions
        actions = as_object_array(actions, buf.shape) if self._objects_in else np.asarray(actions)
        if self.validate:
            self._validate(actions)
        elif actions.shape != buf.shape:
            raise ValueError(f"actions must have shape {buf.shape}, got {actions.shape}")
        elif self._integers_in and actions.dtype.kind not in "iu":  # the copy below would truncate floats
            refuse_non_integers(actions, self._action)
        buf[...] = actions  # casts like np.copyto(casting="unsafe"), for less call overhead

    def _validate(self, actions: np.ndarray) -> None:
        if actions.shape != self._actions_shape:
            raise self._shape_error(actions, self._actions_shape, self._leaf_checks[0][1])
        if self._discrete:
            if actions.dtype.kind not in "iu":
                refuse_non_integers(actions, self._action)
            if self._all_available(actions):
                return
        # Raises for the first live agent whose action is wrong; quiet when only dead
        # agents' actions were off (those are ignored).
        self._leaf_checks[0][1](actions, self.buffers.movers(), self.buffers.avail_actions)

    def _shape_error(self, actions: np.ndarray, shape: tuple[int, ...], check: LeafCheck,
                     call: str = "") -> ValueError:
        """``call``: ``"send() "`` for the async pool, whose actions have a row per sent env."""
        A = self.spec.n_agents
        envs = f"len(env_ids)={shape[0]}" if call else f"num_envs={self.num_envs}"
        return ValueError(
            f"{call}{check.what.replace('action', 'actions', 1)} must have shape {shape} ({envs}, n_agents={A}, "
            f"one {check.describe()} per agent), got {actions.shape}"
        )

    def _write_tree_actions(self, actions: Any) -> None:
        """Dict/Tuple actions: the same tree of (E, A, *leaf_shape) arrays, each leaf checked."""
        mask = self.buffers.movers()
        arrays = spaces.tree_leaves(self.buffers.actions)
        for (path, check), buf in zip(self._leaf_checks, arrays):
            value = self._action_leaf(actions, path)
            value = as_object_array(value, buf.shape) if buf.dtype.hasobject else np.asarray(value)
            if value.shape != buf.shape:
                raise self._shape_error(value, buf.shape, check)
            if self.validate:
                check(value, mask)
            elif isinstance(check.action, (DiscreteAction, MultiDiscreteAction)):
                refuse_non_integers(value, check.action)
        for buf, (path, _) in zip(arrays, self._leaf_checks):  # written only once all are valid
            value = actions
            for key in path:
                value = value[key]
            buf[...] = as_object_array(value, buf.shape) if buf.dtype.hasobject else value

    def _action_leaf(self, actions: Any, path: spaces.Path) -> Any:
        """The leaf at ``path`` of a tree of actions (Dict/Tuple action spaces)."""
        value: Any = actions
        for key in path:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                raise ValueError(
                    f"actions must be a tree like the action space {self.spec.action_space}: "
                    f"{leaf_label(path)} is missing"
                ) from None
        return value

    def _write_action_rows(self, actions: Any, env_ids: list[int]) -> None:
        """The async pool's ``send()``: as `_write_actions`, over the rows of
        ``env_ids`` only (row k of ``actions`` is env ``env_ids[k]``): every action form
        ``step()`` takes (arrays, object values, Dict/Tuple trees), the same checks and
        messages, naming the envs. The other rows are not read: their workers may be
        writing them now. Nothing is written unless every leaf is valid.
        """
        buf = self.buffers
        if self._turns is not None:
            moves = np.zeros((len(env_ids), self.spec.n_agents), dtype=buf.actions.dtype)
            self._turns.write(actions, moves, buf.acting[env_ids],
                              None if buf.avail_actions is None else buf.avail_actions[env_ids], self.validate, env_ids)
            buf.actions[env_ids] = moves
            return
        tree = isinstance(self._action, TreeAction)
        mask = buf.movers()[env_ids]
        avail = None if tree or buf.avail_actions is None else buf.avail_actions[env_ids]
        checked: list[tuple[np.ndarray, np.ndarray]] = []
        for (path, check), leaf in zip(self._leaf_checks, spaces.tree_leaves(buf.actions)):
            value = self._action_leaf(actions, path) if tree else actions
            shape = (len(env_ids), *leaf.shape[1:])
            value = as_object_array(value, shape) if leaf.dtype.hasobject else np.asarray(value)
            if value.shape != shape:
                raise self._shape_error(value, shape, check, "send() ")
            if self.validate:
                check(value, mask, avail, env_ids)
            elif isinstance(check.action, (DiscreteAction, MultiDiscreteAction)):
                refuse_non_integers(value, check.action)
            checked.append((leaf, value))
        for leaf, value in checked:
            leaf[env_ids] = value

    def _all_available(self, actions: np.ndarray) -> bool:
        """The common case, checked without allocating: every action in range and available.

        ``actions`` may have any integer dtype. Numpy reductions such as ``min``/``all``
        cost about a microsecond each on small arrays, ``count_nonzero`` a fifth of
        that; the checks are built from it.
        """
        if self._start:
            np.subtract(actions, self._start, out=self._shifted, casting="unsafe")
            actions = self._shifted
        # Viewed as unsigned, a negative action is huge: one comparison checks both ends.
        dtype = actions.dtype
        unsigned_dtype = self._unsigned.get(dtype)
        if unsigned_dtype is None:
            unsigned_dtype = self._unsigned[dtype] = np.dtype(dtype.str.replace("i", "u"))
        unsigned = actions.view(unsigned_dtype)
        in_range = self._in_range
        np.less(unsigned, self._n_actions, out=in_range)
        if np.count_nonzero(in_range) != in_range.size:
            return False
        avail = cast(np.ndarray, self.buffers.avail_actions)  # discrete actions: never None
        if np.count_nonzero(avail) == avail.size:  # every action available (e.g. gymnasium envs)
            return True
        if dtype.kind == "i":
            np.add(self._flat_base, actions.reshape(-1), out=self._flat_index)
        else:  # uint64 + int64 has no integer common type; in range here, the cast to int64 is exact
            np.add(self._flat_base, actions.reshape(-1), out=self._flat_index, dtype=np.int64, casting="unsafe")
        avail.reshape(-1).take(self._flat_index, out=self._chosen)
        return np.count_nonzero(self._chosen) == self._chosen.size


def as_object_array(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` (nested sequences, e.g. one tuple of A values per env) as an object array of
    ``shape``, each value kept as it is: ``np.asarray`` would turn tuples and arrays
    (a Graph's nodes, a Sequence's items) into more axes.

    ```pycon
    >>> as_object_array([("ab",), ("c",)], (2, 1))[1, 0]
    'c'
    ```
    """
    if isinstance(values, np.ndarray) and values.dtype.hasobject and values.shape == shape:
        return values
    out = np.empty(shape, dtype=object)

    def fill(index: tuple[int, ...], value: Any) -> None:
        if len(index) == len(shape):
            out[index] = value
            return
        n = shape[len(index)]
        try:
            items = list(value) if not isinstance(value, (str, bytes)) else None
        except TypeError:
            items = None
        if items is None or len(items) != n:
            where = f" at {list(index)}" if index else ""
            raise ValueError(f"expected {n} items{where} (object actions of shape {shape}: one value per env "
                             f"and agent), got {type(value).__name__} {value!r}")
        for k, item in enumerate(items):
            fill((*index, k), item)

    fill((), values)
    return out

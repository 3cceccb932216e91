"""BatchBuffers: every per-step array of a batch, allocated once from the spec.

All arrays have a leading env axis ``E``. They live either in ordinary memory
(DummyVecEnv) or in one shared-memory block that worker processes attach to by
name (SubprocVecEnv), so that a step moves no array data through pipes.

Adapters never see the whole batch: an `EnvGroup` hands each adapter the
`RowViews` of its own env, built once.

Examples:
    >>> import numpy as np
    >>> from marl_vec.core.spec import EnvSpec, DiscreteAction
    >>> spec = EnvSpec(("a",), (3,), np.float32, (3,), np.float32, DiscreteAction(2))
    >>> buf = BatchBuffers(spec, num_envs=4)
    >>> buf.obs.shape, buf.avail_actions.shape
    ((4, 1, 3), (4, 1, 2))
    >>> buf.row(2).obs.base is not None   # a view into the batch, not a copy
    True
"""

from __future__ import annotations

import secrets
import weakref
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory
from typing import Any, Iterator

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.spec import EnvSpec, TreeAction

_ALIGN = 64  # cache-line aligned fields: workers writing neighbouring fields do not share lines


def obs_leaves(spec: EnvSpec) -> list[tuple[spaces.Path, tuple[int, ...], np.dtype]]:
    """Path, one agent's shape and dtype of every observation leaf (one for a leaf space)."""
    if spec.obs_space is None:
        return [((), spec.obs_shape, spec.obs_dtype)]
    return [(path, *spaces.leaf_shape_dtype(leaf)) for path, leaf in spaces.leaves(spec.obs_space, objects=True)]


def buffer_layout(spec: EnvSpec, num_envs: int) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """Name, shape and dtype of every batch array, in storage order.

    Observations (and final observations) take one array per leaf of the
    observation space, named by `marl_vec.core.spaces.path_name`.
    """
    E, A = num_envs, spec.n_agents
    obs = obs_leaves(spec)
    action = spec.action
    if isinstance(action, TreeAction):  # Dict/Tuple actions: one array per leaf
        actions = [(spaces.path_name("actions", path), (E, A, *leaf.shape), leaf.dtype) for path, leaf in action.leaves]
    else:
        actions = [("actions", (E, A, *spec.action_shape), action.dtype)]
    layout = [
        *actions,
        *[(spaces.path_name("obs", path), (E, A, *shape), dtype) for path, shape, dtype in obs],
        *([] if spec.state_is_obs or not spec.has_state else [("state", (E, *spec.state_shape), spec.state_dtype)]),
        ("agent_mask", (E, A), np.dtype(bool)),
        # Turn-based games: the agent to move (simultaneous-move envs use agent_mask).
        *([("acting", (E, A), np.dtype(bool))] if spec.turn_based else []),
        ("reward", (E, A), spec.reward_dtype),
        ("terminated", (E, A), np.dtype(bool)),
        ("truncated", (E, A), np.dtype(bool)),
        ("done", (E,), np.dtype(bool)),
        *[(spaces.path_name("final_obs", path), (E, A, *shape), dtype) for path, shape, dtype in obs],
        *([] if spec.state_is_obs or not spec.has_state else [("final_state", (E, *spec.state_shape), spec.state_dtype)]),
        ("final_acting", (E, A), np.dtype(bool)),  # acting (or agent_mask) at an episode's last step
    ]
    mask_shape = spec.action.mask_shape
    if mask_shape is not None:
        layout += [
            ("avail_actions", (E, A, *mask_shape), np.dtype(bool)),
            ("final_avail_actions", (E, A, *mask_shape), np.dtype(bool)),
        ]
    return [(name, shape, np.dtype(dtype)) for name, shape, dtype in layout]


def _layout_offsets(layout: list[tuple[str, tuple[int, ...], np.dtype]]) -> tuple[list[int], int]:
    """Byte offsets of the arrays in the shared block; object arrays (-1) are never in it."""
    offsets, total = [], 0
    for _, shape, dtype in layout:
        if dtype.hasobject:
            offsets.append(-1)
            continue
        total = -(-total // _ALIGN) * _ALIGN
        offsets.append(total)
        total += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return offsets, max(total, 1)


@dataclass
class RowViews:
    """One env's views into the batch arrays; what an adapter writes into.

    ``avail_actions`` is None for actions without masks (Box, MultiBinary), ``state``
    None when the batch keeps no state (``spec.has_state`` False).
    ``obs`` and ``state`` are dicts / tuples of views for Dict / Tuple observation spaces. `BatchBuffers.block`
    returns the same fields for a range of envs, with their leading env axis.
    """

    actions: Any  # an array, or for Dict/Tuple action spaces a tree of arrays
    obs: Any  # an array, or for Dict/Tuple observation spaces a dict/tuple tree of arrays
    state: Any  # likewise
    avail_actions: np.ndarray | None
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    acting: np.ndarray | None = None  # turn-based games only: the agent to move


class BatchBuffers:
    """The preallocated ``(E, A, ...)`` arrays of a batch.

    Object leaves (Text, Graph, ... spaces; see `marl_vec.core.spaces`) are object
    arrays in this process's memory even for a shared batch: a process that steps
    envs for another sends their rows along with its answer (`object_rows`,
    `write_object_rows`), and receives object actions with its step command.
    ``object_fields`` / ``object_actions`` name them; both are empty for array spaces.

    Args:
        spec: the spec every env of the batch shares.
        num_envs: E.
        shared: put every array in one shared-memory block (``self.shm_name``).
        attach: name of an existing block to attach to instead of allocating
            (a worker process); ``shared`` is implied.
        tracked: register a block this process creates with multiprocessing's resource
            tracker, which unlinks it if this process is killed. That tracker is a
            process of its own (about 7 MB); a SubprocVecEnv whose forked workers
            unlink the block when their parent vanishes (`unlink_block`) passes False.
        name: the name of the block to create (None: a free one is picked); see
            `block_name`.
        aligned: in ordinary memory, put every array in one block with each field
            64-byte aligned (as in a shared block): JAX then views a field without a
            copy (DLPack; `marl_vec.vec.device_arrays`).
    """

    actions: Any  # an array, or for Dict/Tuple action spaces a tree of arrays
    obs: Any  # an array, or for Dict/Tuple observation spaces a dict/tuple tree of arrays
    state: Any  # likewise
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    acting: np.ndarray | None  # turn-based games only (spec.turn_based)
    final_acting: np.ndarray
    final_obs: Any
    final_state: Any
    avail_actions: np.ndarray | None
    final_avail_actions: np.ndarray | None

    def __init__(self, spec: EnvSpec, num_envs: int, shared: bool = False, attach: str | None = None,
                 tracked: bool = True, name: str | None = None, aligned: bool = False):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.spec = spec
        self.num_envs = num_envs
        self.layout = buffer_layout(spec, num_envs)
        self._shm: shared_memory.SharedMemory | None = None
        self._owner = False
        self._tracked = tracked
        offsets, total = _layout_offsets(self.layout)
        if attach is not None:
            self._shm = _untracked(name=attach)
        elif shared:
            self._shm = (_SharedBlock(create=True, size=total, name=name) if tracked
                         else _untracked(create=True, size=total, name=name))
            self._owner = True
        self.avail_actions = None
        self.final_avail_actions = None
        self._arrays: dict[str, np.ndarray] = {}
        block: np.ndarray | None = None
        if self._shm is not None:
            # Every array is a view of this one. Its base, a memoryview that np.frombuffer
            # makes, holds an export of the mapping, so the mapping cannot be unmapped
            # while any view lives (a copy=False result the caller keeps after close()):
            # it is unmapped only when the last view is gone (see close()).
            block = np.frombuffer(self._shm.buf, dtype=np.uint8)
            weakref.finalize(block, _unmap, self._shm)
        elif aligned:
            raw = np.zeros(total + _ALIGN, dtype=np.uint8)
            start = (-raw.ctypes.data) % _ALIGN
            block = raw[start:start + total]
        self.state = self.final_state = None
        self.acting = None
        for (name, shape, dtype), offset in zip(self.layout, offsets):
            if dtype.hasobject:  # never shared (see the class docstring)
                array = np.empty(shape, dtype=dtype)
            elif block is not None:
                size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                array = block[offset:offset + size].view(dtype).reshape(shape)
                if self._owner:
                    array.fill(0)
            else:
                array = np.zeros(shape, dtype=dtype)
            self._arrays[name] = array
            if "/" not in name:
                setattr(self, name, array)
        object_names = [name for name, _, dtype in self.layout if dtype.hasobject]
        self.object_actions = [name for name in object_names if name.split("/")[0] == "actions"]
        self.object_fields = [name for name in object_names if name not in self.object_actions]
        if isinstance(spec.action, TreeAction):
            self.actions = spaces.assemble(spec.action.tree, {
                path: self._arrays[spaces.path_name("actions", path)] for path, _ in spec.action.leaves})
        if spec.obs_space is not None and spaces.is_tree(spec.obs_space):
            # obs and final_obs are trees of their leaves' arrays.
            for field in ("obs", "final_obs"):
                setattr(self, field, spaces.assemble(
                    spec.obs_space, {path: self._arrays[spaces.path_name(field, path)]
                                     for path, _ in spaces.leaves(spec.obs_space, objects=True)}))
        if spec.state_is_obs:
            # (E, A, *obs_shape) and (E, *state_shape) are the same memory, leaf by leaf.
            def as_state(leaf: np.ndarray) -> np.ndarray:
                return leaf.reshape((num_envs, *spec.state_leaf_shape(leaf.shape[2:])))

            self.state = spaces.tree_map(as_state, self.obs)
            self.final_state = spaces.tree_map(as_state, self.final_obs)
        self._rows = [self._make_row(i) for i in range(num_envs)]

    def movers(self) -> np.ndarray:
        """The (E, A) agents whose actions are read: ``acting`` in turn-based games,
        else ``agent_mask`` (the live agents)."""
        return self.agent_mask if self.acting is None else self.acting

    def leaves(self, field: str) -> list[np.ndarray]:
        """The arrays of ``field`` (``obs``, ``state``, ``avail_actions``, ...): one, or the
        leaves of its tree; none for a field this batch does not have."""
        value = getattr(self, field)
        return [] if value is None else spaces.tree_leaves(value)

    @property
    def shm_name(self) -> str | None:
        return self._shm.name if self._shm is not None else None

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._arrays.values())

    def _make_row(self, i: int) -> RowViews:
        return RowViews(
            actions=spaces.tree_map(lambda a: a[i], self.actions),
            obs=spaces.tree_map(lambda a: a[i], self.obs),
            state=None if self.state is None else spaces.tree_map(lambda a: a[i, ...], self.state),  # a 0-d view, not a scalar, when the state is a scalar
            avail_actions=None if self.avail_actions is None else self.avail_actions[i],
            agent_mask=self.agent_mask[i],
            reward=self.reward[i],
            terminated=self.terminated[i],
            truncated=self.truncated[i],
            acting=None if self.acting is None else self.acting[i],
        )

    def row(self, i: int) -> RowViews:
        """The cached views of env ``i``."""
        return self._rows[i]

    def rows(self, start: int, stop: int) -> list[RowViews]:
        return self._rows[start:stop]

    def block(self, start: int, stop: int) -> RowViews:
        """Views of rows ``[start, stop)`` with their leading env axis: a group's
        whole share of every field, for writes that cover all its envs at once."""
        return RowViews(
            actions=spaces.tree_map(lambda a: a[start:stop], self.actions),
            obs=spaces.tree_map(lambda a: a[start:stop], self.obs),
            state=None if self.state is None else spaces.tree_map(lambda a: a[start:stop], self.state),
            avail_actions=None if self.avail_actions is None else self.avail_actions[start:stop],
            agent_mask=self.agent_mask[start:stop],
            reward=self.reward[start:stop],
            terminated=self.terminated[start:stop],
            truncated=self.truncated[start:stop],
            acting=None if self.acting is None else self.acting[start:stop],
        )

    def object_rows(self, start: int, stop: int, names: list[str]) -> list[np.ndarray]:
        """Rows ``[start, stop)`` of the object arrays ``names`` (copies: their values
        as they are now), to send to the process that holds the other side of the batch."""
        return [self._arrays[name][start:stop].copy() for name in names]

    def write_object_rows(self, start: int, names: list[str], rows: list[np.ndarray]) -> None:
        """Put rows that `object_rows` gave (in another process) into place from ``start``."""
        for name, values in zip(names, rows):
            self._arrays[name][start:start + len(values)] = values

    def object_rows_of(self, rows: list[int], names: list[str]) -> list[np.ndarray]:
        """As `object_rows`, for the rows ``rows`` (in that order; the async pool's envs)."""
        return [self._arrays[name][rows] for name in names]

    def write_object_rows_of(self, rows: list[int], names: list[str], values: list[np.ndarray]) -> None:
        """Put rows that `object_rows_of` gave into rows ``rows``."""
        for name, array in zip(names, values):
            self._arrays[name][rows] = array

    def arrays(self) -> Iterator[tuple[str, np.ndarray]]:
        yield from self._arrays.items()

    def close(self) -> None:
        """Release the shared block: unlink its name (if this process created it) at
        once, and unmap it when the last view of it is gone.

        A ``copy=False`` result the caller still holds stays readable after close();
        the memory is given back when it is collected. Nothing is left in /dev/shm.
        """
        shm, self._shm = self._shm, None
        if shm is None:
            return
        # Dropping our views lets the mapping go now when nobody else holds one.
        for name in ("actions", "obs", "state", "agent_mask", "reward", "terminated", "truncated", "done",
                     "final_obs", "final_state", "avail_actions", "final_avail_actions", "acting", "final_acting"):
            setattr(self, name, None)
        self._arrays = {}
        self._rows = []
        if self._owner and not self._tracked:  # unregistering would start the tracker
            unlink_block(shm.name)
        elif self._owner:
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _SharedBlock(shared_memory.SharedMemory):
    """A SharedMemory that does not complain when collected while views of it live.

    That happens only at interpreter exit (otherwise `_unmap` keeps it alive
    until its last view is gone); the process's end unmaps the memory anyway.
    """

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, BufferError):
            pass


def _unmap(shm: shared_memory.SharedMemory) -> None:
    """Unmap a block whose last view is gone (or at interpreter exit, where views may remain)."""
    try:
        shm.close()
    except BufferError:  # at exit, with views still alive: the process's end unmaps it
        pass


def block_name() -> str:
    """A fresh name for a shared block (64 random bits; short enough for macOS's 31
    characters), for a creator that must tell other processes the name before the
    block exists: forked workers, which unlink it should their parent be killed
    between the block's creation and the message that names it."""
    return f"mvb_{secrets.token_hex(8)}"


def unlink_block(name: str) -> None:
    """Remove block ``name`` from /dev/shm (if still there) without the resource tracker:
    what a worker does when its parent vanished without closing (killed), for a block
    made with ``tracked=False``. Processes that map it keep their mapping."""
    try:
        shared_memory._posixshmem.shm_unlink("/" + name.lstrip("/"))  # type: ignore[attr-defined]
    except (FileNotFoundError, AttributeError):  # gone already; or no POSIX shm here (Windows)
        pass


def _untracked(**kwargs: Any) -> shared_memory.SharedMemory:
    """Attach to (``name=``) or create (``create=True, size=``) a block without telling
    the resource tracker.

    The creating process owns the block. Worker processes (fork, spawn and
    forkserver alike) share their parent's resource tracker, so a worker that
    registered on attach (Python < 3.13 does) and unregistered afterwards would
    remove the *owner's* registration: the block would then leak if the owner were
    killed, and the owner's own unlink would make the tracker print a KeyError.
    So the attach is never registered at all.
    """
    try:
        return _SharedBlock(track=False, **kwargs)  # type: ignore[call-arg]  # Python >= 3.13
    except TypeError:
        pass
    register = resource_tracker.register

    def register_all_but_shm(res_name: str, rtype: str) -> None:
        if rtype != "shared_memory":
            register(res_name, rtype)

    resource_tracker.register = register_all_but_shm  # type: ignore[assignment]
    try:
        return _SharedBlock(**kwargs)
    finally:
        resource_tracker.register = register  # type: ignore[assignment]

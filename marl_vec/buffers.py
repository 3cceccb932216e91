"""BatchBuffers: every per-step array of a batch, allocated once from the spec.

All arrays have a leading env axis ``E``. They live either in ordinary memory
(DummyVecEnv) or in one shared-memory block that worker processes attach to by
name (SubprocVecEnv), so that a step moves no array data through pipes.

Adapters never see the whole batch: an :class:`EnvGroup` hands each adapter the
:class:`RowViews` of its own env, built once.

Example:
    >>> import numpy as np
    >>> from marl_vec.spec import EnvSpec, DiscreteAction
    >>> spec = EnvSpec(("a",), (3,), np.float32, (3,), np.float32, DiscreteAction(2))
    >>> buf = BatchBuffers(spec, num_envs=4)
    >>> buf.obs.shape, buf.avail_actions.shape
    ((4, 1, 3), (4, 1, 2))
    >>> buf.row(2).obs.base is not None   # a view into the batch, not a copy
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory
from typing import Iterator

import numpy as np

from marl_vec.spec import EnvSpec

_ALIGN = 64  # cache-line aligned fields: workers writing neighbouring fields do not share lines


def buffer_layout(spec: EnvSpec, num_envs: int) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """Name, shape and dtype of every batch array, in storage order."""
    E, A = num_envs, spec.n_agents
    layout = [
        ("actions", (E, A, *spec.action_shape), spec.action.dtype),
        ("obs", (E, A, *spec.obs_shape), spec.obs_dtype),
        *([] if spec.state_is_obs or not spec.has_state else [("state", (E, *spec.state_shape), spec.state_dtype)]),
        ("agent_mask", (E, A), np.dtype(bool)),
        ("reward", (E, A), np.dtype(np.float32)),
        ("terminated", (E, A), np.dtype(bool)),
        ("truncated", (E, A), np.dtype(bool)),
        ("done", (E,), np.dtype(bool)),
        ("final_obs", (E, A, *spec.obs_shape), spec.obs_dtype),
        *([] if spec.state_is_obs or not spec.has_state else [("final_state", (E, *spec.state_shape), spec.state_dtype)]),
    ]
    if spec.discrete:
        n = spec.n_actions
        assert n is not None  # discrete actions always have n_actions
        layout += [
            ("avail_actions", (E, A, n), np.dtype(bool)),
            ("final_avail_actions", (E, A, n), np.dtype(bool)),
        ]
    return [(name, shape, np.dtype(dtype)) for name, shape, dtype in layout]


def _layout_offsets(layout: list[tuple[str, tuple[int, ...], np.dtype]]) -> tuple[list[int], int]:
    offsets, total = [], 0
    for _, shape, dtype in layout:
        total = -(-total // _ALIGN) * _ALIGN
        offsets.append(total)
        total += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return offsets, max(total, 1)


@dataclass
class RowViews:
    """One env's views into the batch arrays; what an adapter writes into.

    ``avail_actions`` is None for continuous actions, ``state`` None when the batch
    keeps no state (``spec.has_state`` False). :meth:`BatchBuffers.block`
    returns the same fields for a range of envs, with their leading env axis.
    """

    actions: np.ndarray
    obs: np.ndarray
    state: np.ndarray | None
    avail_actions: np.ndarray | None
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


class BatchBuffers:
    """The preallocated ``(E, A, ...)`` arrays of a batch.

    Args:
        spec: the spec every env of the batch shares.
        num_envs: E.
        shared: put every array in one shared-memory block (``self.shm_name``).
        attach: name of an existing block to attach to instead of allocating
            (a worker process); ``shared`` is implied.
    """

    actions: np.ndarray
    obs: np.ndarray
    state: np.ndarray | None  # None: spec.has_state False
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    final_obs: np.ndarray
    final_state: np.ndarray | None
    avail_actions: np.ndarray | None
    final_avail_actions: np.ndarray | None

    def __init__(self, spec: EnvSpec, num_envs: int, shared: bool = False, attach: str | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.spec = spec
        self.num_envs = num_envs
        self.layout = buffer_layout(spec, num_envs)
        self._shm: shared_memory.SharedMemory | None = None
        self._owner = False
        offsets, total = _layout_offsets(self.layout)
        if attach is not None:
            self._shm = _attach_untracked(attach)
        elif shared:
            self._shm = shared_memory.SharedMemory(create=True, size=total)
            self._owner = True
        self.avail_actions = None
        self.final_avail_actions = None
        self.state = self.final_state = None
        for (name, shape, dtype), offset in zip(self.layout, offsets):
            if self._shm is not None:
                array = np.ndarray(shape, dtype=dtype, buffer=self._shm.buf, offset=offset)
                if self._owner:
                    array.fill(0)
            else:
                array = np.zeros(shape, dtype=dtype)
            setattr(self, name, array)
        if spec.state_is_obs:
            # (E, A, *obs_shape) and (E, *state_shape) are the same memory.
            self.state = self.obs.reshape((num_envs, *spec.state_shape))
            self.final_state = self.final_obs.reshape((num_envs, *spec.state_shape))
        self._rows = [self._make_row(i) for i in range(num_envs)]

    @property
    def shm_name(self) -> str | None:
        return self._shm.name if self._shm is not None else None

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name, _, _ in self.layout)

    def _make_row(self, i: int) -> RowViews:
        return RowViews(
            actions=self.actions[i],
            obs=self.obs[i],
            state=None if self.state is None else self.state[i, ...],  # a 0-d view, not a scalar, for a scalar state
            avail_actions=None if self.avail_actions is None else self.avail_actions[i],
            agent_mask=self.agent_mask[i],
            reward=self.reward[i],
            terminated=self.terminated[i],
            truncated=self.truncated[i],
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
            actions=self.actions[start:stop],
            obs=self.obs[start:stop],
            state=None if self.state is None else self.state[start:stop],
            avail_actions=None if self.avail_actions is None else self.avail_actions[start:stop],
            agent_mask=self.agent_mask[start:stop],
            reward=self.reward[start:stop],
            terminated=self.terminated[start:stop],
            truncated=self.truncated[start:stop],
        )

    def arrays(self) -> Iterator[tuple[str, np.ndarray]]:
        for name, _, _ in self.layout:
            yield name, getattr(self, name)

    def close(self) -> None:
        """Release the shared block (and unlink it if this process created it)."""
        shm, self._shm = self._shm, None
        if shm is None:
            return
        # Views into shm.buf must go before the mmap can close.
        for name, _, _ in self.layout:
            setattr(self, name, None)
        self._rows = []
        try:
            shm.close()
        except BufferError:
            # A caller still holds a copy=False view; the mapping stays until it is
            # collected, but the name is unlinked below so nothing outlives us.
            pass
        if self._owner:
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _attach_untracked(name: str) -> shared_memory.SharedMemory:
    """Attach to block ``name`` without telling the resource tracker.

    The creating process owns the block. Worker processes (fork, spawn and
    forkserver alike) share their parent's resource tracker, so a worker that
    registered on attach (Python < 3.13 does) and unregistered afterwards would
    remove the *owner's* registration: the block would then leak if the owner were
    killed, and the owner's own unlink would make the tracker print a KeyError.
    So the attach is never registered at all.
    """
    try:
        return shared_memory.SharedMemory(name=name, track=False)  # type: ignore[call-arg]  # Python >= 3.13
    except TypeError:
        pass
    register = resource_tracker.register

    def register_all_but_shm(res_name: str, rtype: str) -> None:
        if rtype != "shared_memory":
            register(res_name, rtype)

    resource_tracker.register = register_all_but_shm  # type: ignore[assignment]
    try:
        return shared_memory.SharedMemory(name=name)
    finally:
        resource_tracker.register = register  # type: ignore[assignment]

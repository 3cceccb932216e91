"""The Ray actor of a RayVecEnv: one EnvGroup over the buffers of its own block of envs.

The driver (`marl_vec.vec.ray.vec_env`) makes one actor per contiguous block of envs.
An actor answers Ray calls (``reset``, ``step``, ``command("call", ...)``, ...) with its arrays,
or, once `GroupHost.link` has moved it onto the driver's shared-memory
block, serves the same commands over a unix socket (`marl_vec.vec.ray.link`).

Imports: the buffers, the EnvGroup, the adapter registry, `marl_vec.vec.ray.link`
and `marl_vec.vec.ray.session` (for Ray itself). Never the driver module.

Example (what RayVecEnv does; not run here)::

    actor = ray.remote(GroupHost).remote(env_fns, start, "same_step", env_seed, {})
    out, finals, infos = ray.get(actor.reset.remote(None, None))
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.errors import SameEnvError, SetupError
from marl_vec.core.spec import SpecMismatchError
from marl_vec.vec.base import with_reward_dtype
from marl_vec.vec.device_arrays import HostOnlyError, refuse_env_device
from marl_vec.vec.ray.session import ray_module
from marl_vec.vec.worker import run_command

# Arrays an actor sends back after every step or reset, in this order; the
# final_* arrays travel only for the rows of envs that have just finished.
STEP_FIELDS = ("obs", "state", "avail_actions", "agent_mask", "acting", "reward", "terminated", "truncated", "done")
FINAL_FIELDS = ("final_obs", "final_state", "final_avail_actions", "final_acting")
# Calls an actor answers through `GroupHost.command`, by the dispatch worker
# processes use (the others are methods of their own: their answers carry arrays).
COMMANDS = ("call", "get_attr", "set_attr", "render")


def _traceback_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


@dataclass
class FailedStep:
    """The info of env ``env_index`` in a `GroupHost.pool_step` where it raised
    (``text``: its traceback); the driver raises it and the env leaves the pool."""

    env_index: int
    text: str


def _one_env_failed(exc: BaseException, settled: list | None, start: int) -> int | None:
    """The global index of the env whose error ``exc`` is, when it raised part-way through a
    step of the group starting at ``start`` and the envs before it were settled; else None
    (the whole block's error: the caller re-raises it)."""
    failed = getattr(exc, "marl_vec_env_index", None)
    if failed is None or settled is None or len(settled) != failed - start:
        return None
    return failed


class GroupHost:
    """Body of a Ray actor: one EnvGroup over buffers of its own block only."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]], start: int, autoreset: str,
                 env_seed: int | None, group_kwargs: dict[str, Any], reward_dtype: str | None = None):
        from marl_vec.core.adapter import check_distinct_envs
        from marl_vec.envs.registry import as_adapter
        from marl_vec.core.group import EnvGroup

        # Envs of this block whose specs differ, or a setup error (a missing extra, an unknown
        # id): the driver raises it itself (see spec()), as in this process, instead of a dead
        # actor's error after Ray printed its traceback.
        self.mismatch: SpecMismatchError | SetupError | SameEnvError | HostOnlyError | None = None
        adapters: list = []
        try:
            for fn in env_fns:
                adapters.append(as_adapter(fn()))
        except SetupError as err:
            self.mismatch = err
            for adapter in adapters:
                adapter.close()
            return
        try:
            check_distinct_envs(adapters, start)
            for j, adapter in enumerate(adapters[1:], 1):
                adapters[0].spec.check_same(adapter.spec, start + j)
            refuse_env_device("RayVecEnv", adapters[0].spec)  # before the envs' engines are built
        except (SpecMismatchError, SameEnvError, HostOnlyError) as err:
            self.mismatch = err
            for adapter in adapters:
                adapter.close()
            return
        try:
            spec = with_reward_dtype(adapters[0].spec, reward_dtype)  # the driver's layout
            self.buffers = BatchBuffers(spec, len(adapters))
            # row_offset: row 0 of these buffers is global env `start`, so seeds and
            # messages use global indices while the buffers hold only this block.
            self.group = EnvGroup(env_fns, self.buffers, start, autoreset, env_seed, adapters=adapters,
                                  row_offset=start, **group_kwargs)
        except BaseException:
            for adapter in adapters:
                adapter.close()
            raise
        self.start = start
        self._env_fns, self._autoreset, self._env_seed = env_fns, autoreset, env_seed
        self._group_kwargs = group_kwargs
        buf = self.buffers
        # Every array, trees of observations leaf by leaf.
        self._out = tuple(a for name in STEP_FIELDS for a in buf.leaves(name))
        self._finals = tuple(a for name in FINAL_FIELDS for a in buf.leaves(name))
        self._keeps_final = self.group.mode.keeps_final

    def spec(self):
        """The block's spec, or the SpecMismatchError of envs of the block that differ, or their SetupError."""
        return self.mismatch if self.mismatch is not None else self.buffers.spec

    def node_id(self) -> str:
        return ray_module().get_runtime_context().get_node_id()

    def link(self, shm_name: str, num_envs: int, socket_path: str, authkey: bytes) -> str | None:
        """Move the group onto the driver's shared block and serve it over a unix socket.

        Called once, before the first reset, and only when the driver runs on this
        machine. From then on the driver steps this group through the link alone
        (a serving thread owns it; Ray calls no longer touch it). Returns the
        socket's address, or None when the block cannot be mapped here (the driver
        then keeps using Ray calls).
        """
        from marl_vec.core.group import EnvGroup
        from marl_vec.vec.ray.link import serve_in_thread

        try:
            shared = BatchBuffers(self.buffers.spec, num_envs, attach=shm_name)
        except OSError:  # no such block here (another machine after all), or no access
            return None
        # The same adapters, bound to their rows of the shared block (row_offset 0:
        # the shared block holds the whole batch).
        self.group = EnvGroup(self._env_fns, shared, self.start, self._autoreset, self._env_seed,
                              adapters=self.group.adapters, **self._group_kwargs)
        self.buffers = shared
        return serve_in_thread(self.group, shared, self.start, socket_path, authkey)

    def reset(self, seed: int | None, env_ids: list[int] | None):
        infos = self.group.reset(seed, env_ids)
        ids = range(len(self.group)) if env_ids is None else env_ids
        return self._out, None, {j: info for j, info in zip(ids, infos) if info}

    def step(self, actions: np.ndarray):
        """A synchronous step of the block. An env that raises part-way (no restart left)
        answers as the rows of the block, the envs before it with their step (EnvGroup's
        bookkeeping), and a `FailedStep` as its info, which the driver raises once the
        rows are in its buffers; the envs after it are not stepped."""
        group = self.group
        group.settled = None  # set by the group when an env raises part-way through the step
        try:
            return self._step(actions)
        except Exception as exc:  # noqa: BLE001 - one env's error goes to the driver with the rows
            failed = _one_env_failed(exc, group.settled, self.start)
            if failed is None:
                raise
            settled = group.settled
            assert settled is not None
            k = failed - self.start
            infos: dict[int, Any] = {j: info for j, info in enumerate(settled) if info}
            infos[k] = FailedStep(failed, _traceback_text(exc))
            return self._step_envs([], infos, k)

    def _step(self, actions: np.ndarray):
        spaces.tree_map(np.copyto, self.group.actions, actions)  # Dict/Tuple actions: leaf by leaf
        infos = self.group.step()
        finals = None
        done = self.group.done
        if self._keeps_final and done.any():
            rows = np.flatnonzero(done)
            finals = (rows, tuple(a[rows] for a in self._finals))
        # Arrays are serialised as this method returns, before the next call can change them.
        return self._out, finals, {j: info for j, info in enumerate(infos) if info}

    def pool_step(self, actions: np.ndarray, local_ids: list[int]):
        """A pool step of the block's envs ``local_ids`` (all of them, but those out of the
        pool after raising): as `step`, but an env that raises (no restart left) leaves
        only itself out. The envs before it keep their step (EnvGroup's bookkeeping), the envs
        after it are stepped one by one, and its info is a `FailedStep` naming it (the
        driver raises it, and it leaves the pool)."""
        group = self.group
        if len(local_ids) < len(group):  # envs that raised are left out: the others one by one
            if not group.steps_single_envs:  # a native engine steps only its whole group
                why = "its block steps as one engine call, which needs the envs of the block that raised: reset() them"
                return self._step_envs([], {j: FailedStep(self.start + j, why) for j in local_ids})
            spaces.tree_map(np.copyto, group.actions, actions)
            return self._step_envs(local_ids, {})
        group.settled = None  # set by the group when an env raises part-way through the step
        try:
            return self._step(actions)
        except Exception as exc:  # noqa: BLE001 - reported to the driver as this env's failure
            failed = _one_env_failed(exc, group.settled, self.start)
            settled = group.settled
            if failed is None or settled is None:  # not one env's error part-way (the whole block's): raised
                raise
            failure = FailedStep(failed, _traceback_text(exc))
        k = failed - self.start
        infos: dict[int, Any] = {j: info for j, info in enumerate(settled) if info}
        infos[k] = failure
        if not group.steps_single_envs:  # a native engine steps only whole groups: the rest fail too
            infos.update({j: failure for j in range(k + 1, len(group))})
            return self._step_envs([], infos, k)
        return self._step_envs(range(k + 1, len(group)), infos, k)

    def _step_envs(self, local_ids: Sequence[int], infos: dict[int, Any], stepped: int = 0):
        """Step envs ``local_ids`` one by one (the actions are in place; envs ``0 .. stepped - 1``
        stepped already); an env that raises gets a `FailedStep` as its info.
        Answers as `step`, ``infos`` added to."""
        group = self.group
        for j in local_ids:
            try:
                info = group.step_env(j)
            except Exception as exc:  # noqa: BLE001 - reported to the driver as env j's failure
                info = FailedStep(self.start + j, _traceback_text(exc))
            if info:
                infos[j] = info
        # final_* of the envs that finished in this step (a failed env's done is stale).
        now = [*range(stepped), *local_ids]
        rows = np.array([j for j in now if group.done[j] and not isinstance(infos.get(j), FailedStep)], np.int64)
        finals = (rows, tuple(a[rows] for a in self._finals)) if self._keeps_final and rows.size else None
        return self._out, finals, infos

    def command(self, command: str, args: tuple) -> Any:
        """One of `COMMANDS`, answered as a worker process answers it (``args``: local env ids)."""
        return run_command(self.group, command, args)

    def close(self) -> None:
        if self.mismatch is None:  # else its envs are closed already
            self.group.close()


"""SubprocVecEnv: blocks of envs in worker processes, stepping over shared memory.

``W`` worker processes each host one `EnvGroup` over a
contiguous block of envs. Every step buffer (actions, obs, state, masks,
rewards, flags, final_*) lives in one shared-memory block that all processes
map, so a step sends one byte to each worker and gets back an empty answer, or
the non-empty infos of its block.

Start method: ``fork`` on Linux by default. Workers start in milliseconds,
share the parent's imported libraries copy-on-write (a lower memory footprint
for the whole process tree) and take any env_fn, lambdas included. When the
parent already runs other threads, forking can deadlock on a lock held by one
of them, so the default is then ``forkserver``: Python threads and native ones
(JAX, torch's pool, EnvPool, ale-py's vector env, OpenMP), counted in
``/proc/self/task``, all but OpenBLAS's idle workers, which numpy starts at
import and which fork safely (`marl_vec.vec.native_threads`). Where fork
does not exist or is unsafe (macOS, Windows) it is ``spawn``. Under spawn and
forkserver the env_fns are sent with cloudpickle, and the main script must
guard its code with ``if __name__ == "__main__":`` (the workers import it).

Faults never hang the caller: every wait is bounded by ``timeout`` and watches
the workers' process sentinels, so an env's exception arrives as a
[`WorkerError`][marl_vec.core.errors.WorkerError] naming the env, the worker and the
original traceback, and a killed worker as a [`WorkerDiedError`][marl_vec.core.errors.WorkerDiedError].

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> with mv.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=0, num_workers=2) as venv:
    ...     r = venv.reset()
    ...     r = venv.step(np.zeros((4, 1), dtype=np.int64))
    ...     r.obs.shape
    (4, 1, 4)

This module holds the options and the VecEnv calls; the rest, one idea a module:
`lifecycle` (start method, starting, replacing and
shutting down workers), `transport` (commands and
answers over the pipes), `faults` (dead workers and
their errors), `pool` (the async pool's hooks).
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import weakref
from typing import Any, Callable, Sequence

from marl_vec.vec.device_arrays import refuse_env_device
from marl_vec.core.buffers import BatchBuffers, block_name
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import PoolNotReadyError, WorkerDiedError, WorkerError
from marl_vec.vec.base import VecEnv, check_backend_args
from marl_vec.vec.pool import AsyncPool, PoolStepResult
from marl_vec.vec.subproc.faults import SubprocFaults, _Lost
from marl_vec.vec.subproc.lifecycle import (START_TIMEOUT, SubprocLifecycle, _blocks, _cpu_count, _shutdown,
                                            default_start_method)
from marl_vec.vec.subproc.pool import SubprocPool
from marl_vec.vec.subproc.transport import SubprocTransport
from marl_vec.vec.worker import STEP

__all__ = ["SubprocVecEnv", "PoolStepResult", "PoolNotReadyError", "WorkerError", "WorkerDiedError",
           "default_start_method"]


class SubprocVecEnv(SubprocPool, SubprocTransport, SubprocLifecycle, SubprocFaults, AsyncPool, VecEnv):
    """Runs ``len(env_fns)`` envs in ``num_workers`` processes over shared memory.

    Args:
        env_fns: zero-argument callables returning an adapter, a ``gymnasium.Env``
            or a PettingZoo ``ParallelEnv``. Any callable works under fork; under
            spawn and forkserver they must be picklable by cloudpickle.
        env_seed: env i is first reset with ``env_seed + i`` (None: unseeded).
        autoreset: ``same_step`` (default), ``next_step``, ``disabled``, ``one_episode``, ``fast``.
        copy: return copies of the buffers (False: views that the next call overwrites).
        validate: check actions' shape, range and availability.
        stats_window: how many of the last finished episodes ``episode_statistics()`` averages over.
        num_workers: worker processes (default: ``min(num_envs, usable cores)``).
        start_method: ``fork``, ``spawn`` or ``forkserver`` (default: see the module doc).
        restart_on_error: per-env budget of rebuilds after an env raises, and
            per-worker budget of replacements after a worker process dies in a step
            (same_step and fast modes); 0 raises a [`WorkerError`][marl_vec.core.errors.WorkerError] at the first error.
        timeout: seconds any command may take before the workers are declared hung
            (None: no limit; a dead worker is still detected at once). Building the
            envs at start may take ``max(timeout, 120)`` s.
        close_timeout: seconds ``close()`` waits for workers to exit before killing them.
        reward_dtype: ``"float32"`` or ``"float64"`` for the reward array; None
            (default): the family's (float64 for gymnasium envs, else float32).
        state: what the state holds: ``auto`` (default), ``env``, ``concat`` or ``none``
            (see `marl_vec.core.state`).
        batch_size: envs per `recv` of the async pool (default ``num_envs``), any
            number in ``[1, num_envs]`` (see `marl_vec.vec.pool`).
        step_in_main: the main process steps the last block itself while the workers
            step theirs (``num_workers + 1`` blocks; default ``num_workers``: usable cores
            - 1), see `marl_vec.vec.subproc.local`. Same results, one process fewer.
            In the async pool (``send``/``recv``) the block is one more member: ``send``
            steps its envs of the call here, after sending the workers theirs. ``timeout``
            does not bound an env of this block (it runs inline; Ctrl-C does).
        spin_us: microseconds a worker keeps polling its pipe after each answer
            before it sleeps (default 0: it sleeps at once). On cheap envs a fast
            trainer's next command then finds it awake, which saves the kernel's
            wake-up; the cost is up to that much CPU a step per worker, so use it
            where each worker has a core of its own (see docs/backends/subproc.md).
            This process then also polls for the workers' answers for up to
            ``spin_us`` before it sleeps (in ``step``, every other command and the
            async pool's ``recv``), but only where it has a core to spare:
            ``num_workers`` below the usable cores (as with ``step_in_main``'s
            default, usable cores - 1); else it would take a core from a worker
            still stepping. ``main_spins`` says whether it does.

    Attributes:
        main_spins: whether this process polls for answers before it sleeps
            (``spin_us > 0`` and ``num_workers`` < usable cores).
    """


    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        env_seed: int | None = 0,
        autoreset: AutoresetMode | str = AutoresetMode.SAME_STEP,
        copy: bool = True,
        validate: bool = True,
        stats_window: int = 100,
        num_workers: int | None = None,
        start_method: str | None = None,
        restart_on_error: int = 0,
        state: str = "auto",
        timeout: float | None = 300.0,
        close_timeout: float = 10.0,
        reward_dtype: str | None = None,
        batch_size: int | None = None,
        step_in_main: bool = False,
        spin_us: float = 0.0,
    ):
        env_fns, mode = check_backend_args("SubprocVecEnv", env_fns, state, autoreset, restart_on_error, reward_dtype)
        num_envs = len(env_fns)
        if isinstance(spin_us, bool) or not isinstance(spin_us, (int, float)) or not 0 <= spin_us <= 1e6:
            raise ValueError(f"spin_us must be a number of microseconds in [0, 1e6] (0: off), got {spin_us!r}")
        if not isinstance(step_in_main, bool):
            raise ValueError(f"step_in_main must be True or False, got {step_in_main!r}")
        local = int(step_in_main)  # blocks beyond the workers'
        if step_in_main and num_envs < 2:
            raise ValueError(f"step_in_main needs num_envs >= 2 (a block for a worker and one for this process), "
                             f"got num_envs={num_envs}")
        if num_workers is None:
            num_workers = max(1, min(num_envs, _cpu_count()) - local)
        if (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                or not 1 <= num_workers <= num_envs - local):
            raise ValueError(f"num_workers must be an integer in [1, num_envs{' - 1' if local else ''}="
                             f"{num_envs - local}], got {num_workers!r}")
        allowed = mp.get_all_start_methods()
        method = default_start_method() if start_method is None else start_method
        if method not in allowed:
            # multiprocessing's own words at the end: callers (SB3's tests) match them.
            raise ValueError(f"unknown start_method {start_method!r}; allowed here: {', '.join(allowed)} "
                             f"(multiprocessing: cannot find context for {start_method!r})")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, or None, got {timeout!r}")

        self.start_method = method
        self.num_workers = num_workers
        self.timeout = timeout
        self._env_fns, self._mode, self._env_seed = env_fns, mode, env_seed
        self._restart_on_error, self._num_envs = restart_on_error, num_envs
        self.step_in_main = step_in_main
        self._spin = float(spin_us) * 1e-6
        # This process spins only on a core no worker needs: one a spinning wait would
        # otherwise take from a worker still stepping (2 workers on 2 cores: 0.71x).
        self.main_spins = spin_us > 0 and num_workers < _cpu_count()
        self._main_spin = self._spin if self.main_spins else 0.0
        self.worker_restarts = [0] * (num_workers + local)  # dead workers replaced, per block
        self._blocks = _blocks(num_envs, num_workers + local)  # the main process's block last
        self._init_pool(batch_size, num_envs, self._blocks)
        self._pool_pollers: dict[tuple[int, ...], Any] = {}  # workers in flight -> (select.poll, fd -> worker)
        self._pool_readable: set[int] = set()  # workers whose pipe the last poll found readable
        self._pool_local: list[int] = []  # step_in_main: this process's envs sent, not stepped yet
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._pending = [False] * (num_workers + local)  # per block: an answer is owed
        self._step_replies: dict[int, Any] = {}  # the current step's answers read so far
        self._broken: WorkerError | None = None
        self._buffers_holder: list[BatchBuffers] = []
        self._object_actions: list[str] = []  # object action arrays (Text, Graph, ... spaces)
        # Forked workers learn the shared block's name at birth, so that they can unlink it
        # if this process is killed at any moment after it made the block, even before the
        # message that asks them to attach (worker_main).
        self._block_name = block_name() if method == "fork" else None
        # Cleanup runs on close(), on garbage collection and at interpreter exit,
        # whichever comes first; it holds no reference to self.
        self._finalizer = weakref.finalize(
            self, _shutdown, self._procs, self._conns, self._buffers_holder, close_timeout
        )
        try:
            for w in range(num_workers):
                self._start_worker(w, env_seed)
            if step_in_main:  # after the forks: no worker inherits its envs
                self._start_local(num_workers, env_seed)
            # Building envs may take long (a game launching): a generous bound of its own.
            start_timeout = None if timeout is None else max(timeout, START_TIMEOUT)
            replies = self._collect("start", range(num_workers + local), start_timeout)
            spec = self._check_specs(replies)
            refuse_env_device("SubprocVecEnv", spec)  # before the workers build the envs' engines
            super().__init__(spec, num_envs, mode, copy, validate, stats_window, reward_dtype)
            # Forked workers unlink the block if this process is killed (worker_main): no
            # resource tracker process (~7 MB) needed. Other start methods run one anyway.
            self.buffers = BatchBuffers(self.spec, num_envs, shared=True, tracked=method != "fork",
                                        name=self._block_name)
            self._buffers_holder.append(self.buffers)
            self._object_actions = self.buffers.object_actions
            # The workers lay out the block from the same spec (reward dtype included).
            self._send_all(pickle.dumps(("attach", self.buffers.shm_name, self.spec)))
            single = self._collect("start", range(num_workers + local), start_timeout)  # steps single envs?
            self._pool_set_whole([w for w in range(num_workers + local) if not single[w]],
                                 "these envs' engine steps a worker's whole block in one call (Atari: engine: python "
                                 "steps single envs)")
        except BaseException as exc:
            self._finalizer()
            if method != "fork" and isinstance(exc, WorkerDiedError):  # the usual cause, named
                why = " (the default here: this process runs other threads)" if start_method is None else ""
                exc.add_note(f"marl_vec: the workers start by {method!r}{why} and import the main script: guard "
                             f"its code with `if __name__ == \"__main__\":`, or pass start_method='fork'")
            raise
        self.worker_pids = [p.pid for p in self._procs[:num_workers]]

    # -- VecEnv -----------------------------------------------------------------

    def _reset(self, seed: int | None, env_ids: list[int] | None) -> list[dict[str, Any]]:
        if env_ids is None:
            per_worker: dict[int, tuple] = {w: (seed, None) for w in range(len(self._blocks))}
        else:
            per_worker = {w: (seed, local) for w, local in self._per_worker(env_ids).items()}
        replies = self._command("reset", per_worker)
        self._pool_restart(env_ids)
        return self._gather_infos(replies)

    def _step_async(self) -> None:
        self._check_usable()
        # The actions are in shared memory already; the byte only says "go".
        for w in range(len(self._blocks)):  # the main process's block last: it steps as it is sent
            self._send(w, STEP, "step")

    def _step_wait(self) -> list[dict[str, Any]]:
        if self._broken is not None:
            raise self._broken
        # Answers read before an interrupt stay in self._step_replies; a later call
        # waits only for the rest.
        replies = self._step_replies
        pending = self._pending
        try:
            self._collect("step", [w for w in range(len(self._blocks)) if pending[w]], replace=True, into=replies)
        finally:
            if not any(pending):
                self._step_replies = {}
        lost = {w: reply for w, reply in replies.items() if isinstance(reply, _Lost)}
        infos = self._gather_infos({w: reply for w, reply in replies.items() if w not in lost})
        for w, reply in lost.items():
            start = self._blocks[w][0]
            for j, info in self._replace_worker(w, reply.what).items():
                infos[start + j] = info
        self._pool_restart(step=True)
        return infos

    def _call(self, name: str, args: tuple, kwargs: dict, indices: list[int]) -> list[Any]:
        return self._ordered(indices, "call", lambda local: (name, args, kwargs, local))

    def _get_attr(self, name: str, indices: list[int]) -> list[Any]:
        return self._ordered(indices, "get_attr", lambda local: (name, local))

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        per_worker: dict[int, tuple[list, list]] = {}
        for i, value in zip(indices, values):
            w = self._worker_of(i)
            local, vals = per_worker.setdefault(w, ([], []))
            local.append(i - self._blocks[w][0])
            vals.append(value)
        self._command("set_attr", {w: (name, vals, local) for w, (local, vals) in per_worker.items()})

    def _ordered(self, indices: list[int], command: str, make_args: Callable[[list[int]], tuple]) -> list[Any]:
        per_worker = self._per_worker(indices)
        replies = self._command(command, {w: make_args(local) for w, local in per_worker.items()})
        cursors = {w: iter(replies[w]) for w in per_worker}
        return [next(cursors[self._worker_of(i)]) for i in indices]

    def _render(self) -> list[Any]:
        replies = self._command("render", {w: () for w in range(len(self._blocks))})
        return [frame for w in range(len(self._blocks)) for frame in replies[w]]

    def _close(self) -> None:
        self._finalizer()

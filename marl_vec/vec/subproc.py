"""SubprocVecEnv: blocks of envs in worker processes, stepping over shared memory.

``W`` worker processes each host one :class:`~marl_vec.group.EnvGroup` over a
contiguous block of envs. Every step buffer (actions, obs, state, masks,
rewards, flags, final_*) lives in one shared-memory block that all processes
map, so a step sends one byte to each worker and gets back an empty answer, or
the non-empty infos of its block.

Start method: ``fork`` on Linux by default. Workers start in milliseconds,
share the parent's imported libraries copy-on-write (a lower memory footprint
for the whole process tree) and take any env_fn, lambdas included. When the
parent already runs other Python threads, forking can deadlock on a lock held
by one of them, so the default is then ``forkserver``; where fork does not exist
or is unsafe (macOS, Windows) it is ``spawn``. Under spawn and forkserver the
env_fns are sent with cloudpickle.

Faults never hang the caller: every wait is bounded by ``timeout`` and watches
the workers' process sentinels, so an env's exception arrives as a
:class:`~marl_vec.errors.WorkerError` naming the env, the worker and the
original traceback, and a killed worker as a :class:`~marl_vec.errors.WorkerDiedError`.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> with mv.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=0, num_workers=2) as venv:
    ...     r = venv.reset()
    ...     r = venv.step(np.zeros((4, 1), dtype=np.int64))
    ...     r.obs.shape
    (4, 1, 4)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import weakref
from multiprocessing.connection import wait as _wait_any
from typing import Any, Callable, Sequence

from marl_vec.buffers import BatchBuffers
from marl_vec.episode import AutoresetMode
from marl_vec.errors import WorkerDiedError, WorkerError
from marl_vec.spec import EnvSpec
from marl_vec.vec.base import VecEnv
from marl_vec.vec.worker import STEP, decode, worker_main

__all__ = ["SubprocVecEnv", "WorkerError", "WorkerDiedError", "default_start_method"]

_CLOSE = pickle.dumps(("close",))
START_TIMEOUT = 120.0  # seconds the workers may take to build their envs (at least)


def default_start_method() -> str:
    """``fork`` on Linux (``forkserver`` if other threads run), else ``spawn``."""
    methods = mp.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods:
        if threading.active_count() > 1 and "forkserver" in methods:
            return "forkserver"
        return "fork"
    return "spawn"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _blocks(num_envs: int, num_workers: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) blocks, sizes differing by at most one."""
    base, extra = divmod(num_envs, num_workers)
    out, start = [], 0
    for w in range(num_workers):
        stop = start + base + (1 if w < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is not answering"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


class SubprocVecEnv(VecEnv):
    """Runs ``len(env_fns)`` envs in ``num_workers`` processes over shared memory.

    Args:
        env_fns: zero-argument callables returning an adapter, a ``gymnasium.Env``
            or a PettingZoo ``ParallelEnv``. Any callable works under fork; under
            spawn and forkserver they must be picklable by cloudpickle.
        env_seed: env i is first reset with ``env_seed + i`` (None: unseeded).
        autoreset: ``same_step`` (default), ``next_step``, ``disabled``, ``one_episode``, ``fast``.
        copy: return copies of the buffers (False: views that the next call overwrites).
        validate: check actions' shape, range and availability.
        num_workers: worker processes (default: ``min(num_envs, usable cores)``).
        start_method: ``fork``, ``spawn`` or ``forkserver`` (default: see the module doc).
        restart_on_error: per-env budget of rebuilds after an env raises; 0 raises
            a :class:`WorkerError` at the first error.
        timeout: seconds any command may take before the workers are declared hung
            (None: no limit; a dead worker is still detected at once). Building the
            envs at start may take ``max(timeout, 120)`` s.
        close_timeout: seconds ``close()`` waits for workers to exit before killing them.
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
        timeout: float | None = 300.0,
        close_timeout: float = 10.0,
    ):
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("SubprocVecEnv needs at least one env_fn")
        for i, fn in enumerate(env_fns):
            if not callable(fn):
                raise TypeError(f"env_fns[{i}] is a {type(fn).__name__}, not a zero-argument callable")
        num_envs = len(env_fns)
        if num_workers is None:
            num_workers = min(num_envs, _cpu_count())
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be an integer in [1, num_envs={num_envs}], got {num_workers!r}")
        allowed = mp.get_all_start_methods()
        method = default_start_method() if start_method is None else start_method
        if method not in allowed:
            raise ValueError(f"unknown start_method {start_method!r}; allowed here: {', '.join(allowed)}")
        if isinstance(restart_on_error, bool) or not isinstance(restart_on_error, int) or restart_on_error < 0:
            raise ValueError(f"restart_on_error must be an integer >= 0, got {restart_on_error!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, or None, got {timeout!r}")
        mode = AutoresetMode.parse(autoreset)

        self.start_method = method
        self.num_workers = num_workers
        self.timeout = timeout
        self._blocks = _blocks(num_envs, num_workers)
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._pending = [False] * num_workers
        self._broken: WorkerError | None = None
        self._buffers_holder: list[BatchBuffers] = []
        # Cleanup runs on close(), on garbage collection and at interpreter exit,
        # whichever comes first; it holds no reference to self.
        self._finalizer = weakref.finalize(
            self, _shutdown, self._procs, self._conns, self._buffers_holder, close_timeout
        )
        try:
            self._start_workers(env_fns, method, mode, env_seed, restart_on_error, num_envs)
            # Building envs may take long (a game launching): a generous bound of its own.
            start_timeout = None if timeout is None else max(timeout, START_TIMEOUT)
            replies = self._collect("start", range(num_workers), start_timeout)
            spec = self._check_specs(replies)
            super().__init__(spec, num_envs, mode, copy, validate, stats_window)
            self.buffers = BatchBuffers(spec, num_envs, shared=True)
            self._buffers_holder.append(self.buffers)
            self._send_all(pickle.dumps(("attach", self.buffers.shm_name)))
            self._collect("start", range(num_workers), start_timeout)
        except BaseException:
            self._finalizer()
            raise
        self.worker_pids = [p.pid for p in self._procs]

    # -- start ------------------------------------------------------------------

    def _start_workers(
        self, env_fns: list, method: str, mode: AutoresetMode, env_seed: int | None, restart_on_error: int, num_envs: int
    ) -> None:
        ctx = mp.get_context(method)
        for w, (start, stop) in enumerate(self._blocks):
            block: Any = env_fns[start:stop]
            if method != "fork":
                block = _pickle_env_fns(block, start, method)
            parent, child = ctx.Pipe(duplex=True)
            self._conns.append(parent)
            inherited = list(self._conns) if method == "fork" else []  # spawn copies only what it is given
            process = ctx.Process(  # type: ignore[attr-defined]  # get_context(str) is typed BaseContext; each real context has Process
                target=worker_main,
                args=(w, child, block, start, num_envs, mode.value, env_seed, restart_on_error, inherited,
                      None if method == "fork" else dict(os.environ)),
                name=f"marl_vec-subproc-{w}",
                daemon=True,  # multiprocessing terminates daemons at exit, a last safety net
            )
            process.start()
            self._procs.append(process)
            # Our copy of the child's end must go, or a dead worker's pipe never reads EOF.
            child.close()

    def _check_specs(self, replies: dict[int, Any]) -> EnvSpec:
        spec = replies[0][1][0]
        for w, (_pid, specs) in replies.items():
            start = self._blocks[w][0]
            for j, other in enumerate(specs):
                spec.check_same(other, start + j)
        return spec

    # -- talking to workers -------------------------------------------------------

    def _send(self, w: int, data: bytes, command: str) -> None:
        try:
            self._conns[w].send_bytes(data)
        except OSError:  # BrokenPipeError / ConnectionResetError: the worker is gone
            self._pending[w] = False
            raise self._died(w, command) from None
        self._pending[w] = True

    def _send_all(self, data: bytes, command: str = "start") -> None:
        for w in range(self.num_workers):
            self._send(w, data, command)

    def _died(self, w: int, command: str) -> WorkerDiedError:
        process = self._procs[w]
        process.join(1.0)  # reap it, so its exit code is known
        start, stop = self._blocks[w]
        err = WorkerDiedError(
            command, w, None,
            f"worker process {process.pid} (envs {start}..{stop - 1}) {_describe_exit(process.exitcode)}; "
            "this SubprocVecEnv cannot continue: close() it and make a new one",
        )
        self._broken = err
        return err

    def _collect(self, command: str, workers: Sequence[int] | range, timeout: float | None = -1.0) -> dict[int, Any]:
        """Wait for one answer from each of ``workers``; raise the first error after all arrived.

        Every wait is bounded by ``timeout`` (negative: ``self.timeout``) and also
        watches the workers' process sentinels, so a dead worker is noticed at once.
        """
        conns, procs = self._conns, self._procs
        waiting = list(workers)
        results: dict[int, Any] = {}
        error: WorkerError | None = None
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = _wait_any([conns[w] for w in waiting] + [procs[w].sentinel for w in waiting], remaining)
            if not ready:
                names = ", ".join(str(w) for w in waiting)
                self._broken = WorkerError(
                    command, waiting[0], None,
                    f"worker(s) {names} did not answer {command!r} within timeout={timeout} s; "
                    "close() this SubprocVecEnv (it kills them)",
                )
                raise self._broken
            for w in list(waiting):
                if conns[w] not in ready:
                    if procs[w].sentinel not in ready:
                        continue
                    if not conns[w].poll():  # it exited without a word
                        raise self._died(w, command)
                try:
                    data = conns[w].recv_bytes()
                except (EOFError, OSError):
                    self._pending[w] = False
                    raise self._died(w, command) from None
                self._pending[w] = False
                waiting.remove(w)
                status, payload = decode(data)
                if status == "error":
                    env_index, what, text = payload
                    error = error or WorkerError(command, w, env_index, what, text)
                else:
                    results[w] = payload
        if error is not None:
            raise error
        return results

    def _drain(self) -> None:
        """Discard answers still owed from an interrupted call (e.g. KeyboardInterrupt in step_wait)."""
        owed = [w for w, p in enumerate(self._pending) if p]
        if owed:
            try:
                self._collect("drain", owed)
            except WorkerDiedError:
                raise
            except WorkerError:  # the interrupted command's error: nobody is waiting for it any more
                if self._broken is not None:
                    raise

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise self._broken
        if any(self._pending):
            self._drain()

    def _per_worker(self, indices: list[int]) -> dict[int, list[int]]:
        """Global env indices -> {worker: local indices}, in the order given."""
        out: dict[int, list[int]] = {}
        for i in indices:
            w = self._worker_of(i)
            out.setdefault(w, []).append(i - self._blocks[w][0])
        return out

    def _worker_of(self, i: int) -> int:
        for w, (start, stop) in enumerate(self._blocks):
            if start <= i < stop:
                return w
        raise IndexError(i)

    def _command(self, command: str, per_worker: dict[int, tuple]) -> dict[int, Any]:
        self._check_usable()
        for w, args in per_worker.items():
            self._send(w, pickle.dumps((command, *args), protocol=pickle.HIGHEST_PROTOCOL), command)
        return self._collect(command, list(per_worker))

    # -- VecEnv -----------------------------------------------------------------

    def _reset(self, seed: int | None, env_ids: list[int] | None) -> list[dict[str, Any]]:
        if env_ids is None:
            per_worker: dict[int, tuple] = {w: (seed, None) for w in range(self.num_workers)}
        else:
            per_worker = {w: (seed, local) for w, local in self._per_worker(env_ids).items()}
        replies = self._command("reset", per_worker)
        return self._gather_infos(replies)

    def _gather_infos(self, replies: dict[int, Any]) -> list[dict[str, Any]]:
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for w, nonempty in replies.items():
            if nonempty:
                start = self._blocks[w][0]
                for j, info in nonempty.items():
                    infos[start + j] = info
        return infos

    def _step_async(self) -> None:
        self._check_usable()
        # The actions are in shared memory already; the byte only says "go".
        for w in range(self.num_workers):
            self._send(w, STEP, "step")

    def _step_wait(self) -> list[dict[str, Any]]:
        return self._gather_infos(self._collect("step", range(self.num_workers)))

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
        replies = self._command("render", {w: () for w in range(self.num_workers)})
        return [frame for w in range(self.num_workers) for frame in replies[w]]

    def _close(self) -> None:
        self._finalizer()


def _pickle_env_fns(block: list, start: int, method: str) -> bytes:
    try:
        import cloudpickle as pickler  # lambdas and closures too
    except ImportError:  # gymnasium depends on it; plain pickle is the fallback
        pickler = pickle  # type: ignore[assignment]
    try:
        return pickler.dumps(block)
    except Exception as exc:  # pickling raises many types (PicklingError, TypeError, AttributeError)
        raise TypeError(
            f"env_fns[{start}:{start + len(block)}] cannot be pickled for start_method={method!r} ({exc}); "
            "pass picklable env_fns (e.g. marl_vec.envs.registry.make_env_fn) or use start_method='fork'"
        ) from exc


def _shutdown(procs: list, conns: list, buffers_holder: list, close_timeout: float) -> None:
    """Stop every worker (politely, then terminate, then kill) and free the shared block.

    Bounded: at most ``close_timeout`` + a few seconds, whatever state the workers are in.
    """
    for conn in conns:
        try:
            conn.send_bytes(_CLOSE)
        except (OSError, ValueError):  # dead worker or closed pipe: it is stopped below anyway
            pass
    deadline = time.monotonic() + close_timeout
    for process in procs:
        process.join(max(0.0, deadline - time.monotonic()))
    for stop in ("terminate", "kill"):
        alive = [p for p in procs if p.is_alive()]
        for process in alive:
            getattr(process, stop)()
        for process in alive:
            process.join(2.0)
    for conn in conns:
        conn.close()
    for process in procs:
        try:
            process.close()  # frees its sentinel fd; refused only if it still runs
        except ValueError:
            pass
    for buffers in buffers_holder:
        buffers.close()
    procs.clear()
    conns.clear()
    buffers_holder.clear()

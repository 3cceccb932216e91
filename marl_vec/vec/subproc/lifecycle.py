"""SubprocVecEnv's worker lifecycle: the start method, starting a worker, replacing one, shutting all down.

A worker process hosts one `EnvGroup` over a contiguous
block of envs (`_blocks`). It is started with the env_fns of its block
(pickled with cloudpickle unless forked), answers ``start`` with its envs'
specs, then maps the shared block (``attach``). A worker that died in a step
is replaced by a new one over the same block, seeded anew
(`rebuild_seed`). `_shutdown` stops every worker,
politely then by force, and is bounded in time whatever state they are in.

Examples:
    >>> _blocks(num_envs=5, num_workers=2)
    [(0, 3), (3, 5)]
    >>> default_start_method() in ("fork", "forkserver", "spawn")
    True

`SubprocLifecycle` is a mixin of [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv].
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
from typing import Any, Callable

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import SameEnvError, WorkerError
from marl_vec.core.group import rebuild_seed
from marl_vec.core.spec import EnvSpec
from marl_vec.vec.native_threads import threads_beside_main
from marl_vec.vec.subproc.local import LocalHost
from marl_vec.vec.worker import worker_main

_CLOSE = pickle.dumps(("close",))
START_TIMEOUT = 120.0  # seconds the workers may take to build their envs (at least)


def default_start_method() -> str:
    """``fork`` on Linux (``forkserver`` if threads other than the main one run, native
    ones included: see `marl_vec.vec.native_threads`), else ``spawn``."""
    methods = mp.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods:
        if (threading.active_count() > 1 or threads_beside_main()) and "forkserver" in methods:
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


class SubprocLifecycle:
    """Starting and restarting worker processes, for [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv]."""

    start_method: str
    timeout: float | None
    spec: EnvSpec
    buffers: BatchBuffers
    worker_restarts: list[int]
    worker_pids: list[int]
    _blocks: list[tuple[int, int]]
    _env_fns: list[Callable[[], Any]]
    _env_seed: int | None
    _mode: AutoresetMode
    _num_envs: int
    _restart_on_error: int
    _spin: float  # seconds a worker polls for the next command before sleeping (spin_us)
    _block_name: str | None  # the shared block's name, made before the forks (fork only)
    _procs: list[Any]
    _conns: list[Any]
    _broken: WorkerError | None
    _pool_partial: list[bytes]
    _pool_pollers: dict[tuple[int, ...], Any]
    _pool_readable: set[int]

    def _start_worker(self, w: int, env_seed: int | None) -> None:
        """Start worker w over its block (again, when it replaces a dead one)."""
        method = self.start_method
        ctx = mp.get_context(method)
        start, stop = self._blocks[w]
        block: Any = self._env_fns[start:stop]
        if method != "fork":
            block = _pickle_env_fns(block, start, method)
        if method == "forkserver":
            _preload_forkserver()
        parent, child = ctx.Pipe(duplex=True)
        if w < len(self._conns):
            self._conns[w] = parent
        else:
            self._conns.append(parent)
        # spawn copies only what it is given; the main process's block is no pipe to close
        inherited = [c for c in self._conns if not isinstance(c, LocalHost)] if method == "fork" else []
        process = ctx.Process(  # type: ignore[attr-defined]  # every real context has Process
            target=worker_main,
            args=(w, child, block, start, self._num_envs, self._mode.value, env_seed, self._restart_on_error,
                  inherited, None if method == "fork" else dict(os.environ), self._spin, self._block_name),
            name=f"marl_vec-subproc-{w}",
            daemon=True,  # multiprocessing terminates daemons at exit, a last safety net
        )
        process.start()
        if w < len(self._procs):
            self._procs[w] = process
        else:
            self._procs.append(process)
        # Our copy of the child's end must go, or a dead worker's pipe never reads EOF.
        child.close()

    def _start_local(self, w: int, env_seed: int | None) -> None:
        """Build block w (the last) in this process (``step_in_main``): it answers as a worker."""
        start, stop = self._blocks[w]
        host = LocalHost(self._env_fns[start:stop], start, self._num_envs, self._mode.value, env_seed,
                         self._restart_on_error)
        self._conns.append(host)
        self._procs.append(host)

    def _check_specs(self, replies: dict[int, Any]) -> EnvSpec:
        for _pid, specs in replies.values():
            if isinstance(specs, SameEnvError):  # a worker's envs are one object: bad input, not a crash
                raise specs
        spec = replies[0][1][0]
        for w, (_pid, specs) in replies.items():
            start = self._blocks[w][0]
            for j, other in enumerate(specs):
                spec.check_same(other, start + j)
        return spec

    def _restart_process(self, w: int, what: str) -> int:
        """Start a new worker w over its block (envs built, not reset); returns its restart count."""
        self.worker_restarts[w] += 1
        self._pool_partial[w] = b""
        self._pool_pollers.clear()  # its pipe and sentinel are new
        self._pool_readable.discard(w)
        restarts = self.worker_restarts[w]
        old = self._procs[w]
        if old.is_alive():  # its pipe broke, yet it lingers; killed before its pipe closes, or
            old.kill()      # it would read EOF, take us for dead and unlink the shared block
            old.join(2.0)
        self._conns[w].close()
        old.close()  # frees its sentinel
        start, stop = self._blocks[w]
        try:
            self._start_worker(w, rebuild_seed(self._env_seed, start, restarts))
            start_timeout = None if self.timeout is None else max(self.timeout, START_TIMEOUT)
            _pid, specs = self._collect("start", [w], start_timeout)[w]
            for j, other in enumerate(specs):
                self.spec.check_same(other, start + j)
            self._send(w, pickle.dumps(("attach", self.buffers.shm_name, self.spec)), "start")
            self._collect("start", [w], start_timeout)
        except Exception as exc:  # the replacement failed: this batch cannot go on
            self._broken = WorkerError("restart", w, None, f"replacing dead worker {w} ({what}) failed: {exc!r}")
            raise self._broken from exc
        self.worker_pids[w] = self._procs[w].pid
        return restarts


# What every worker imports before building its envs: preloaded once by the fork server
# (if it is not running yet), its workers share these pages instead of importing them each.
WORKER_MODULES = ("marl_vec.vec.worker", "marl_vec.core.group", "marl_vec.core.buffers", "marl_vec.envs.registry", "cloudpickle")


def _preload_forkserver() -> None:
    """Add `WORKER_MODULES` to the fork server's preload list (keeping the caller's)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    preload = getattr(server, "_preload_modules", None)
    if not isinstance(preload, list) or all(m in preload for m in WORKER_MODULES):
        return
    forkserver.set_forkserver_preload(preload + [m for m in WORKER_MODULES if m not in preload])


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

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
by one of them, so the default is then ``forkserver``. Native threads are not
counted (numpy's BLAS pool is always there, and forks safely); but a parent
that holds an EnvPool engine (``engine: envpool`` in this process) must pass
``start_method="forkserver"``: a forked worker can abort on EnvPool's threads; where fork does not exist
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
import select
import signal
import sys
import threading
import time
import weakref
from multiprocessing.connection import wait as _wait_any
from typing import Any, Callable, Sequence

from marl_vec.buffers import BatchBuffers
from marl_vec.episode import AutoresetMode
from marl_vec.group import rebuild_seed
from marl_vec.errors import PoolNotReadyError, WorkerDiedError, WorkerError
from marl_vec.spec import EnvSpec
from marl_vec.state import with_state
from marl_vec.vec.base import VecEnv
from marl_vec.vec.pool import AsyncPool, PoolStepResult
from marl_vec.vec.worker import STEP, ObjectReply, decode, worker_main

__all__ = ["SubprocVecEnv", "PoolStepResult", "PoolNotReadyError", "WorkerError", "WorkerDiedError",
           "default_start_method"]

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


class SubprocVecEnv(AsyncPool, VecEnv):
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
        restart_on_error: per-env budget of rebuilds after an env raises, and
            per-worker budget of replacements after a worker process dies in a step
            (same_step and fast modes); 0 raises a :class:`WorkerError` at the first error.
        timeout: seconds any command may take before the workers are declared hung
            (None: no limit; a dead worker is still detected at once). Building the
            envs at start may take ``max(timeout, 120)`` s.
        close_timeout: seconds ``close()`` waits for workers to exit before killing them.
        reward_dtype: ``"float32"`` or ``"float64"`` for the reward array; None
            (default): the family's (float64 for gymnasium envs, else float32).
        state: what the state holds: ``auto`` (default), ``env``, ``concat`` or ``none``
            (see :mod:`marl_vec.state`).
        batch_size: envs per :meth:`recv` of the async pool (default ``num_envs``), any
            number in ``[1, num_envs]`` (see :mod:`marl_vec.vec.pool`).
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
    ):
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("SubprocVecEnv needs at least one env_fn")
        env_fns = with_state(env_fns, state)
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
        self._env_fns, self._mode, self._env_seed = env_fns, mode, env_seed
        self._restart_on_error, self._num_envs = restart_on_error, num_envs
        self.worker_restarts = [0] * num_workers  # dead workers replaced, per block
        self._blocks = _blocks(num_envs, num_workers)
        self._init_pool(batch_size, num_envs, self._blocks)
        self._pool_pollers: dict[tuple[int, ...], Any] = {}  # workers in flight -> (select.poll, fd -> worker)
        self._pool_readable: set[int] = set()  # workers whose pipe the last poll found readable
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._pending = [False] * num_workers  # per worker: an answer is owed
        self._step_replies: dict[int, Any] = {}  # the current step's answers read so far
        self._broken: WorkerError | None = None
        self._buffers_holder: list[BatchBuffers] = []
        self._object_actions: list[str] = []  # object action arrays (Text, Graph, ... spaces)
        # Cleanup runs on close(), on garbage collection and at interpreter exit,
        # whichever comes first; it holds no reference to self.
        self._finalizer = weakref.finalize(
            self, _shutdown, self._procs, self._conns, self._buffers_holder, close_timeout
        )
        try:
            for w in range(num_workers):
                self._start_worker(w, env_seed)
            # Building envs may take long (a game launching): a generous bound of its own.
            start_timeout = None if timeout is None else max(timeout, START_TIMEOUT)
            replies = self._collect("start", range(num_workers), start_timeout)
            spec = self._check_specs(replies)
            super().__init__(spec, num_envs, mode, copy, validate, stats_window, reward_dtype)
            self.buffers = BatchBuffers(self.spec, num_envs, shared=True)
            self._buffers_holder.append(self.buffers)
            self._object_actions = self.buffers.object_actions
            # The workers lay out the block from the same spec (reward dtype included).
            self._send_all(pickle.dumps(("attach", self.buffers.shm_name, self.spec)))
            single = self._collect("start", range(num_workers), start_timeout)  # steps single envs?
            self._pool_set_whole([w for w in range(num_workers) if not single[w]],
                                 "these envs' engine steps a worker's whole block in one call (Atari: engine: python "
                                 "steps single envs)")
        except BaseException:
            self._finalizer()
            raise
        self.worker_pids = [p.pid for p in self._procs]

    # -- start ------------------------------------------------------------------

    def _start_worker(self, w: int, env_seed: int | None) -> None:
        """Start worker w over its block (again, when it replaces a dead one)."""
        method = self.start_method
        ctx = mp.get_context(method)
        start, stop = self._blocks[w]
        block: Any = self._env_fns[start:stop]
        if method != "fork":
            block = _pickle_env_fns(block, start, method)
        parent, child = ctx.Pipe(duplex=True)
        if w < len(self._conns):
            self._conns[w] = parent
        else:
            self._conns.append(parent)
        inherited = list(self._conns) if method == "fork" else []  # spawn copies only what it is given
        process = ctx.Process(  # type: ignore[attr-defined]  # every real context has Process
            target=worker_main,
            args=(w, child, block, start, self._num_envs, self._mode.value, env_seed, self._restart_on_error,
                  inherited, None if method == "fork" else dict(os.environ)),
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

    def _check_specs(self, replies: dict[int, Any]) -> EnvSpec:
        spec = replies[0][1][0]
        for w, (_pid, specs) in replies.items():
            start = self._blocks[w][0]
            for j, other in enumerate(specs):
                spec.check_same(other, start + j)
        return spec

    # -- talking to workers -------------------------------------------------------

    def _send(self, w: int, data: bytes, command: str) -> None:
        if data is STEP and self._object_actions:  # object actions cannot wait in shared memory
            start, stop = self._blocks[w]
            data = pickle.dumps(("step", self.buffers.object_rows(start, stop, self._object_actions)),
                                protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._conns[w].send_bytes(data)
        except OSError:  # BrokenPipeError / ConnectionResetError: the worker is gone
            if command == "step":  # _collect finds it by its sentinel, to report or replace it
                self._pending[w] = True
                return
            self._pending[w] = False
            raise self._died(w, command) from None
        self._pending[w] = True

    def _send_all(self, data: bytes, command: str = "start") -> None:
        for w in range(self.num_workers):
            self._send(w, data, command)

    def _death(self, w: int) -> str:
        """How worker w died (it is reaped first, so its exit code is known)."""
        process = self._procs[w]
        process.join(1.0)
        start, stop = self._blocks[w]
        return f"worker process {process.pid} (envs {start}..{stop - 1}) {_describe_exit(process.exitcode)}"

    def _died(self, w: int, command: str) -> WorkerDiedError:
        """Worker w is dead and not replaced: the error to raise, which also breaks this SubprocVecEnv."""
        err = WorkerDiedError(
            command, w, None,
            f"{self._death(w)}; this SubprocVecEnv cannot continue: close() it and make a new one"
            f"{self._why_not_replaced(w)}",
        )
        self._broken = err
        return err

    def _why_not_replaced(self, w: int) -> str:
        """Why dead worker w is not replaced, for its error message; empty when it may be
        (or when no replacement was asked for: nothing to explain)."""
        if not self._restart_on_error:
            return ""
        if not self._mode.keeps_final:
            return (f" (a dead worker is replaced only in the same_step and fast autoreset modes, "
                    f"not in {self._mode.value!r})")
        if self.worker_restarts[w] >= self._restart_on_error:
            return (f" (after {self.worker_restarts[w]} replacement(s) of this worker, "
                    f"its whole restart_on_error budget)")
        return ""

    def _collect(self, command: str, workers: Sequence[int] | range, timeout: float | None = -1.0,
                 replace: bool = False, into: dict[int, Any] | None = None) -> dict[int, Any]:
        """Wait for one answer from each of ``workers``; raise the first error after all arrived.

        Every wait is bounded by ``timeout`` (negative: ``self.timeout``) and also
        watches the workers' process sentinels, so a dead worker is noticed at once.
        ``replace``: a dead worker that may be replaced answers a :class:`_Lost`.
        ``into``: where answers go as they arrive (an env's error as its WorkerError),
        so that a wait cut short by an interrupt can be resumed without losing any.
        """
        conns, procs = self._conns, self._procs
        waiting = list(workers)
        results: dict[int, Any] = {} if into is None else into
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
                conn = conns[w]
                if conn not in ready and procs[w].sentinel not in ready:
                    continue
                data: bytes | None = None
                # A worker that exited may have answered first: read what its pipe holds.
                if conn in ready or conn.poll():
                    try:
                        data = conn.recv_bytes()
                    except (EOFError, OSError):
                        data = None
                self._pending[w] = False
                waiting.remove(w)
                if data is None:  # it died without a word
                    if replace and self._restart_on_error and not self._why_not_replaced(w):
                        results[w] = _Lost(self._death(w))
                        continue
                    raise self._died(w, command)
                status, payload = decode(data)
                if status == "error":
                    env_index, what, text = payload
                    results[w] = WorkerError(command, w, env_index, what, text)
                else:
                    if isinstance(payload, ObjectReply):  # object leaves of its block (not shared)
                        self.buffers.write_object_rows(self._blocks[w][0], self.buffers.object_fields, payload.rows)
                        payload = payload.payload
                    results[w] = payload
        for answer in results.values():
            if isinstance(answer, WorkerError):
                raise answer
        return results

    def _owes_answers(self) -> bool:
        return self._broken is None and any(self._pending)

    def _drain(self) -> None:
        """Discard answers still owed from an interrupted call other than a step (a step's
        are collected by :meth:`VecEnv._check_idle`, through :meth:`_step_wait`)."""
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
        self._pool_restart()
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
        if self._broken is not None:
            raise self._broken
        # Answers read before an interrupt stay in self._step_replies; a later call
        # waits only for the rest.
        replies = self._step_replies
        pending = self._pending
        try:
            self._collect("step", [w for w in range(self.num_workers) if pending[w]], replace=True, into=replies)
        finally:
            if not any(pending):
                self._step_replies = {}
        lost = {w: reply for w, reply in replies.items() if isinstance(reply, _Lost)}
        infos = self._gather_infos({w: reply for w, reply in replies.items() if w not in lost})
        for w, reply in lost.items():
            start = self._blocks[w][0]
            for j, info in self._replace_worker(w, reply.what).items():
                infos[start + j] = info
        self._pool_restart()
        return infos

    def _replace_worker(self, w: int, what: str) -> dict[int, dict[str, Any]]:
        """Worker w died in a step: start a new one; its envs end their episodes as
        truncated (:meth:`VecEnv._restart_block`). A replacement that fails breaks the batch."""
        restarts = self._restart_process(w, what)
        start, stop = self._blocks[w]
        return self._restart_block(range(start, stop), lambda: self._command("reset", {w: (None, None)})[w],
                                   {"error": what, "worker_restarts": restarts})

    def _restart_process(self, w: int, what: str) -> int:
        """Start a new worker w over its block (envs built, not reset); returns its restart count."""
        self.worker_restarts[w] += 1
        self._pool_partial[w] = b""
        self._pool_pollers.clear()  # its pipe and sentinel are new
        self._pool_readable.discard(w)
        restarts = self.worker_restarts[w]
        self._conns[w].close()
        old = self._procs[w]
        if old.is_alive():  # its pipe broke, yet it lingers
            old.kill()
            old.join(2.0)
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

    def _check_idle(self, call: str) -> None:
        self._check_open()
        self._pool_drain()  # pool steps in flight finish first; their results are dropped
        super()._check_idle(call)

    # -- the async pool (marl_vec.vec.pool) ---------------------------------------

    def _pool_check_usable(self) -> None:
        if self._broken is not None:
            raise self._broken

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        try:
            self._conns[w].send_bytes(self._pool_step_command(w, local_ids))
        except OSError:  # the worker is gone: its sentinel reports it to _pool_answer
            pass

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        # select.poll directly, one poller per set of workers in flight (kept until a worker
        # is replaced): multiprocessing's wait() builds a selector per call (~10x dearer).
        key = tuple(flying)
        made = self._pool_pollers.get(key)
        if made is None:
            poller, fds = select.poll(), {}
            for w in flying:
                for fd, is_conn in ((self._conns[w].fileno(), True), (self._procs[w].sentinel, False)):
                    poller.register(fd, select.POLLIN)
                    fds[fd] = (w, is_conn)
            made = self._pool_pollers[key] = (poller, fds)
        poller, fds = made
        events = poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999)))
        answered, readable = set(), self._pool_readable
        readable.clear()  # only this poll's word counts: a pipe read in full must not be read again
        for fd, _ in events:
            w, is_conn = fds[fd]
            answered.add(w)
            if is_conn:
                readable.add(w)
        return [w for w in flying if w in answered]

    def _pool_answer(self, w: int) -> None:
        """Every answer worker w has sent, read in one go (:meth:`AsyncPool._pool_read`); a
        dead worker is replaced, once signals flow again (a forked worker inherits the mask)."""
        readable = w in self._pool_readable  # else only its sentinel fired: it died
        self._pool_readable.discard(w)
        if readable and not self._pool_read(w, self._conns[w].fileno(),
                                            lambda env, what, text: WorkerError("step", w, env, what, text)):
            return
        if self._pool_flying[w] and not self._procs[w].is_alive():
            self._pool_lost(w)

    def _pool_lost(self, w: int) -> None:
        """Worker w died with envs in flight: a new worker takes its block; each of its envs
        restarts at its next step (those in flight are sent again at once)."""
        what = self._death(w)
        if not (self._restart_on_error and not self._why_not_replaced(w)):
            raise self._died(w, "step")
        restarts = self._restart_process(w, what)
        start, stop = self._blocks[w]
        details = {"error": what, "worker_restarts": restarts}
        for i in range(start, stop):
            self._pool_restarted[i] = details
        flight = self._pool_flying[w]
        if flight:
            self._pool_go(w, [i - start for i in flight])

    def _pool_timed_out(self, flying: list[int]) -> None:
        self._broken = WorkerError(
            "step", flying[0], None,
            f"worker(s) {', '.join(map(str, flying))} did not answer 'step' within timeout={self.timeout} s; "
            "close() this SubprocVecEnv (it kills them)",
        )
        raise self._broken

    def _pool_settle(self, envs: list[int]) -> None:
        self._command("reset", {w: (None, local) for w, local in self._per_worker(envs).items()})

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


class _Lost:
    """The answer of a worker that died in a step and may be replaced."""

    def __init__(self, what: str):
        self.what = what


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

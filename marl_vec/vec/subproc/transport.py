"""SubprocVecEnv's transport: commands over each worker's pipe, answers over the same pipe.

The step buffers live in shared memory, so a step sends one byte (`STEP`)
and a worker answers with the non-empty infos of its block; other commands
(reset, call, get_attr, ...) are pickled tuples. Every wait is bounded by
``timeout`` and also watches the workers' process sentinels, so a dead worker
is noticed at once; an answer owed by an interrupted call is read and dropped
(`SubprocTransport._drain`) before the next command.

Waiting for answers: ``select.poll`` over the workers' pipes and sentinels. Where
this process has a core to spare (``SubprocVecEnv.main_spins``), it first polls
without sleeping for up to ``spin_us`` (`SubprocTransport._wait_events`):
an answer that comes within that time is read without the kernel's wake-up of a
sleeping process (150-250 us on a VM), the cost of a cheap env's batch step.

Example (every command goes through one call):

    ```pycon
    >>> venv._command("get_attr", {0: ("spec", [0])})
    {0: [...]}
    ```

`SubprocTransport` is a mixin of [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv].
"""

from __future__ import annotations

import functools
import pickle
import time
from typing import Any, Sequence

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.errors import WorkerDiedError, WorkerError
from marl_vec.vec.subproc.faults import _Lost
from marl_vec.vec.subproc.local import LocalHost
from marl_vec.vec.worker import STEP, ObjectReply, decode, poll_until


class SubprocTransport:
    """Sending commands to workers and collecting their answers, for [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv]."""

    num_envs: int
    num_workers: int
    timeout: float | None
    buffers: BatchBuffers
    _blocks: list[tuple[int, int]]
    _restart_on_error: int
    _procs: list[Any]
    _conns: list[Any]
    _pending: list[bool]  # per worker: an answer is owed
    _broken: WorkerError | None
    _object_actions: list[str]
    _poller: Any  # SubprocPool's: a cached select.poll over workers' pipes and sentinels
    _main_spin: float  # seconds this process polls for answers before it sleeps (0: it sleeps at once)

    def _wait_events(self, workers: Sequence[int], timeout: float | None) -> tuple[list[tuple[int, int]], dict]:
        """``(events, fd -> (worker, is its pipe))``: the pipes and sentinels of ``workers``
        that are ready, waiting up to ``timeout`` s (None: no limit) for one.

        With ``_main_spin``, polls without sleeping for that long first (within
        ``timeout``), then sleeps in the poll for the rest. An interrupt during the
        spin raises here as it would from the sleeping poll, with nothing read.
        """
        # select.poll, one poller per set of workers (multiprocessing's wait() builds a
        # selector per call: about a tenth of a cheap env's step, on every step).
        poller, fds = self._poller(workers)
        spin = self._main_spin
        if spin:
            clock = time.monotonic
            began = clock()
            until = began + (spin if timeout is None else min(spin, timeout))
            events = poll_until(functools.partial(poller.poll, 0), until, clock)
            if events:
                return events, fds
            if timeout is not None:
                timeout = max(0.0, timeout - (clock() - began))
        return poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))), fds

    def _send(self, w: int, data: bytes, command: str) -> None:
        if data is STEP and self._object_actions:  # object actions cannot wait in shared memory
            start, stop = self._blocks[w]
            data = pickle.dumps(("step", self.buffers.object_rows(start, stop, self._object_actions)),
                                protocol=pickle.HIGHEST_PROTOCOL)
        conn = self._conns[w]
        try:
            conn.send_bytes(data)
        except OSError:  # BrokenPipeError / ConnectionResetError: the worker is gone
            if command == "step":  # _collect finds it by its sentinel, to report or replace it
                self._pending[w] = True
                return
            self._pending[w] = False
            raise self._died(w, command) from None
        except KeyboardInterrupt:
            if type(conn) is LocalHost:  # a second Ctrl-C cut the main process's block short
                self._broken = WorkerError(command, w, None, "interrupted twice while this process ran its block "
                                           "(step_in_main): the block is incomplete; close() this SubprocVecEnv")
            raise
        self._pending[w] = True
        if type(conn) is LocalHost and conn.take_interrupt():  # deferred: the block's answer is whole
            raise KeyboardInterrupt

    def _send_all(self, data: bytes, command: str = "start") -> None:
        for w in range(len(self._blocks)):
            self._send(w, data, command)

    def _collect(self, command: str, workers: Sequence[int] | range, timeout: float | None = -1.0,
                 replace: bool = False, into: dict[int, Any] | None = None) -> dict[int, Any]:
        """Wait for one answer from each of ``workers``; raise the first error after all arrived.

        Every wait is bounded by ``timeout`` (negative: ``self.timeout``) and also
        watches the workers' process sentinels, so a dead worker is noticed at once.
        ``replace``: a dead worker that may be replaced answers a `_Lost`.
        ``into``: where answers go as they arrive (an env's error as its WorkerError),
        so that a wait cut short by an interrupt can be resumed without losing any.
        """
        conns = self._conns
        waiting = list(workers)
        results: dict[int, Any] = {} if into is None else into
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            events, fds = self._wait_events(waiting, remaining)
            ready: set[tuple[int, bool]] = {fds[fd] for fd, _ in events}
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
                if (w, True) not in ready and (w, False) not in ready:
                    continue
                data: bytes | None = None
                # A worker that exited may have answered first: read what its pipe holds.
                if (w, True) in ready or conn.poll():
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
        are collected by `VecEnv._check_idle`, through `_step_wait`)."""
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
        for w in sorted(per_worker):  # a block in the main process (the last) runs as it is sent
            self._send(w, pickle.dumps((command, *per_worker[w]), protocol=pickle.HIGHEST_PROTOCOL), command)
        return self._collect(command, list(per_worker))

    def _gather_infos(self, replies: dict[int, Any]) -> list[dict[str, Any]]:
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for w, nonempty in replies.items():
            if nonempty:
                start = self._blocks[w][0]
                for j, info in nonempty.items():
                    infos[start + j] = info
        return infos

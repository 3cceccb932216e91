"""SubprocVecEnv's hooks for the async pool (`marl_vec.vec.pool`): send, poll, read, replace.

A worker steps the envs it was sent one by one and signals each over its pipe
as soon as its rows are in shared memory. `SubprocPool._pool_answered`
polls the pipes and process sentinels with ``select.poll`` (one poller per set
of workers in flight); a worker that died with envs in flight is replaced, and
its envs in flight are sent again.

With ``step_in_main`` the block in this process is one more member of the pool:
`SubprocPool.send` sends the workers their envs first, then this process
steps its own envs of the call with the code a worker runs
(`LocalHost`), whose answers wait in its queue
for `AsyncPool.recv` as a worker's wait in its pipe. ``send`` then returns
once those envs have stepped; their trajectories are the same as anywhere else.

Examples:
    >>> venv = mv.SubprocVecEnv(fns, num_workers=2, batch_size=2)
    >>> venv.reset(); r = venv.recv()
    >>> venv.send(actions_for(r.env_ids), r.env_ids)

`SubprocPool` is a mixin of [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv].
"""

from __future__ import annotations

import select
import signal
from typing import Any, Sequence

import numpy as np

from marl_vec.core.errors import WorkerError
from marl_vec.vec.pool import _SIGNALS, _EnvFailed, _sigmask
from marl_vec.vec.subproc.local import LocalHost


class SubprocPool:
    """The async pool's per-backend hooks, for [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv]."""

    timeout: float | None
    step_in_main: bool
    _blocks: list[tuple[int, int]]
    _restart_on_error: int
    _procs: list[Any]
    _conns: list[Any]
    _broken: WorkerError | None
    _pool_pollers: dict[tuple[int, ...], Any]  # workers in flight -> (select.poll, fd -> worker)
    _pool_readable: set[int]  # workers whose pipe the last poll found readable
    _wait_events: Any  # SubprocTransport's: poll the workers' pipes and sentinels (spinning first)
    _pending: list[bool]  # per worker: an answer to a synchronous command is owed
    _waiting: bool  # VecEnv's: a step_async() not collected yet
    _interrupted: bool  # VecEnv's: a step interrupted before it was collected
    _drain: Any  # SubprocTransport's: read and drop the answers an interrupted call owes
    _pool_local: list[int]  # step_in_main: this process's envs sent and not stepped yet (local indices)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """`AsyncPool.send`; envs of this process's block (``step_in_main``) step
        here once the workers have theirs."""
        super().send(actions, env_ids)  # type: ignore[misc]  # AsyncPool's, after this mixin
        self._pool_step_local()

    def _pool_check_usable(self) -> None:
        if self._broken is not None:
            raise self._broken
        # What an interrupted call (not a step: that one the caller collects) still owes is
        # read and dropped first, or its answers would be taken for the envs' step results.
        if any(self._pending) and not (self._waiting or self._interrupted):
            self._drain()

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        conn = self._conns[w]
        if type(conn) is LocalHost:  # stepped after the workers got theirs (send, or the next wait)
            self._pool_local.extend(local_ids)
            return
        try:
            conn.send_bytes(self._pool_step_command(w, local_ids))
        except OSError:  # the worker is gone: its sentinel reports it to _pool_answer
            pass

    def _pool_step_local(self) -> None:
        """Step this process's envs sent and not stepped yet, as its worker would: their
        answers are queued for the next wait. A first Ctrl-C meanwhile is raised once the
        step is whole (the answers are then read by the next wait); a second one cuts the
        block short and breaks the batch, as in a synchronous step."""
        ids = self._pool_local
        if not ids:
            return
        self._pool_local = []
        w = len(self._blocks) - 1
        host = self._conns[w]
        try:
            host.send_bytes(self._pool_step_command(w, ids))
        except KeyboardInterrupt:
            self._broken = WorkerError("step", w, None, "interrupted twice while this process stepped its block "
                                       "(step_in_main): the block is incomplete; close() this SubprocVecEnv")
            raise
        if host.take_interrupt():
            raise KeyboardInterrupt

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        # select.poll directly, one poller per set of workers in flight (kept until a worker
        # is replaced), spinning first where this process has a core to spare, as a step's wait.
        if self._broken is not None:  # hung, or a block cut short: nothing more will answer
            raise self._broken
        self._pool_step_local()  # a send cut short by an interrupt left them: step them now
        events, fds = self._wait_events(flying, timeout)
        answered, readable = set(), self._pool_readable
        readable.clear()  # only this poll's word counts: a pipe read in full must not be read again
        for fd, _ in events:
            w, is_conn = fds[fd]
            answered.add(w)
            if is_conn:
                readable.add(w)
        return [w for w in flying if w in answered]

    def _poller(self, workers: list[int]) -> tuple[Any, dict[int, tuple[int, bool]]]:
        """A ``select.poll`` over the pipes and sentinels of ``workers`` (kept per set of
        workers until one is replaced), and fd -> (worker, is its pipe)."""
        key = tuple(workers)
        made = self._pool_pollers.get(key)
        if made is None:
            poller, fds = select.poll(), {}
            for w in workers:
                for fd, is_conn in ((self._conns[w].fileno(), True), (self._procs[w].sentinel, False)):
                    poller.register(fd, select.POLLIN)
                    fds[fd] = (w, is_conn)
            made = self._pool_pollers[key] = (poller, fds)
        return made

    def _pool_answer(self, w: int) -> None:
        """Every answer worker w has sent, read in one go (`AsyncPool._pool_read`); a
        dead worker is replaced, once signals flow again (a forked worker inherits the mask)."""
        readable = w in self._pool_readable  # else only its sentinel fired: it died
        self._pool_readable.discard(w)
        error_of = lambda env, what, text: WorkerError("step", w, env, what, text)  # noqa: E731
        conn = self._conns[w]
        if type(conn) is LocalHost:
            self._pool_read_local(w, conn, error_of)
            return
        if readable and not self._pool_read(w, conn.fileno(), error_of):
            return
        if self._pool_flying[w] and not self._procs[w].is_alive():
            self._pool_lost(w)

    def _pool_read_local(self, w: int, host: LocalHost, error_of: Any) -> None:
        """Every answer queued by this process's block, recorded as a worker's are
        (`AsyncPool._pool_read`: signals wait until they are, errors raised after)."""
        if host.closed:  # a second Ctrl-C cut its step short (_pool_step_local): the batch is broken
            raise self._broken or WorkerError("step", w, None, "this process's block is closed")
        errors: list[BaseException] = []
        seen: set[bytes] = set()
        blocked = _sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            while host.poll():
                self._pool_take(w, host.recv_bytes(), errors, seen, error_of)
        finally:
            _sigmask(signal.SIG_SETMASK, blocked)
        if errors:
            raise _EnvFailed(*errors)

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

"""SubprocVecEnv's hooks for the async pool (:mod:`marl_vec.vec.pool`): send, poll, read, replace.

A worker steps the envs it was sent one by one and signals each over its pipe
as soon as its rows are in shared memory. :meth:`SubprocPool._pool_answered`
polls the pipes and process sentinels with ``select.poll`` (one poller per set
of workers in flight); a worker that died with envs in flight is replaced, and
its envs in flight are sent again.

Example:
    >>> venv = mv.SubprocVecEnv(fns, num_workers=2, batch_size=2)  # doctest: +SKIP
    >>> venv.reset(); r = venv.recv()  # doctest: +SKIP
    >>> venv.send(actions_for(r.env_ids), r.env_ids)  # doctest: +SKIP

:class:`SubprocPool` is a mixin of :class:`~marl_vec.vec.subproc.vec_env.SubprocVecEnv`.
"""

from __future__ import annotations

import select
from typing import Any

from marl_vec.core.errors import WorkerError


class SubprocPool:
    """The async pool's per-backend hooks, for :class:`~marl_vec.vec.subproc.vec_env.SubprocVecEnv`."""

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

    def _pool_check_usable(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self.step_in_main:
            raise ValueError("the async pool (send/recv) needs every block in a worker process: "
                             "make this SubprocVecEnv with step_in_main=False")

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        try:
            self._conns[w].send_bytes(self._pool_step_command(w, local_ids))
        except OSError:  # the worker is gone: its sentinel reports it to _pool_answer
            pass

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        # select.poll directly, one poller per set of workers in flight (kept until a worker
        # is replaced), spinning first where this process has a core to spare, as a step's wait.
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

"""SubprocVecEnv's error handling: how a worker died, why it is not replaced, replacing it.

An env's exception arrives from its worker as a [`WorkerError`][marl_vec.core.errors.WorkerError]
(by `_collect`). A worker
process that dies is found by its sentinel and named with its pid, its block and
how it exited; it breaks the SubprocVecEnv ([`WorkerDiedError`][marl_vec.core.errors.WorkerDiedError])
unless ``restart_on_error`` lets a new worker take its block (same_step and fast
modes), whose envs then end their episodes as truncated.

Examples:
    >>> _describe_exit(-9)
    'was killed by SIGKILL'
    >>> _describe_exit(1)
    'exited with code 1'

`SubprocFaults` is a mixin of [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv].
"""

from __future__ import annotations

import signal
from typing import Any

from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import WorkerDiedError, WorkerError


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is not answering"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


class _Lost:
    """The answer of a worker that died in a step and may be replaced."""

    def __init__(self, what: str):
        self.what = what


class SubprocFaults:
    """Naming dead workers and replacing them, for [`SubprocVecEnv`][marl_vec.vec.subproc.vec_env.SubprocVecEnv]."""

    worker_restarts: list[int]
    _blocks: list[tuple[int, int]]
    _mode: AutoresetMode
    _restart_on_error: int
    _procs: list[Any]
    _broken: WorkerError | None

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

    def _replace_worker(self, w: int, what: str) -> dict[int, dict[str, Any]]:
        """Worker w died in a step: start a new one; its envs end their episodes as
        truncated (`VecEnv._restart_block`). A replacement that fails breaks the batch."""
        restarts = self._restart_process(w, what)
        start, stop = self._blocks[w]
        return self._restart_block(range(start, stop), lambda: self._command("reset", {w: (None, None)})[w],
                                   {"error": what, "worker_restarts": restarts})

"""How the async pool reads its workers' answers: a pipe's frames cut by hand, one ``os.read`` a go.

One idea: `PoolAnswers`, the part of `marl_vec.vec.pool.AsyncPool` that reads the
answers of a worker process (or of a Ray actor linked to the driver's shared memory)
and records each as the next env of that worker's flight (`AsyncPool._pool_complete`,
`AsyncPool._pool_fail`); `_EnvFailed` carries the envs' errors read in one go.
Signals wait while answers are recorded, so a Ctrl-C never drops one.

May import: ``marl_vec.vec.worker`` (the answers' encoding).
"""

from __future__ import annotations

import os
import signal
import struct
from typing import Any

from marl_vec.vec.worker import decode

_LENGTH, _LONG_LENGTH = struct.Struct("!i"), struct.Struct("!Q")  # multiprocessing.connection's frame headers
_SIGNALS = signal.valid_signals()
try:  # signal.pthread_sigmask turns every returned signal into an enum (~10 us a call): the C function
    from _signal import pthread_sigmask as _sigmask
except ImportError:  # not CPython
    _sigmask = signal.pthread_sigmask


class PoolAnswers:
    """Reads a worker's answers into the pool (a mixin of `marl_vec.vec.pool.AsyncPool`)."""

    _pool_partial: list[bytes]  # per worker: the start of an answer not read whole
    _pool_complete: Any  # AsyncPool's: the next env of worker w's flight finished
    _pool_fail: Any  # AsyncPool's: the next env of worker w's flight raised

    def _pool_read(self, w: int, fd: int, error_of: Any) -> bool:
        """Read every answer worker w has sent over pipe ``fd`` (one per finished env, in its
        flight's order) with one ``os.read``; True at end of file (the worker is gone).

        The answers are multiprocessing's frames (a 4-byte length, then the bytes), cut
        here: per env that saves the two or three system calls of ``recv_bytes``/``poll``.
        A frame cut by the read waits in ``_pool_partial`` for the rest. Signals wait
        until the answers read are recorded, so Ctrl-C never drops one. The envs' errors
        (``error_of(env_index, repr, traceback)``, each) are raised together as
        `_EnvFailed` after; a whole block's error (an engine step: the same answer
        for each env of the block) counts once.
        """
        errors: list[BaseException] = []
        seen: set[bytes] = set()  # the error answers read
        blocked = _sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                return True
            partial = self._pool_partial[w]
            data = partial + chunk if partial else chunk
            pos, end = 0, len(data)
            while end - pos >= 4:
                (size,) = _LENGTH.unpack_from(data, pos)
                head = 4
                if size == -1:  # a long frame: an 8-byte length follows
                    if end - pos < 12:
                        break
                    (size,) = _LONG_LENGTH.unpack_from(data, pos + 4)
                    head = 12
                if end - pos - head < size:
                    break
                start = pos + head
                pos = start + size
                if not size:
                    self._pool_complete(w, None)
                    continue
                self._pool_take(w, data[start:pos], errors, seen, error_of)
            self._pool_partial[w] = data[pos:]
        finally:
            _sigmask(signal.SIG_SETMASK, blocked)
        if errors:
            raise _EnvFailed(*errors)
        return False

    def _pool_take(self, w: int, frame: bytes, errors: list[BaseException], seen: set[bytes], error_of: Any) -> None:
        """Record one answer of worker w (the next env of its flight): its result, or its
        error appended to ``errors`` (``seen``: the error answers read in this go, so that a
        whole block's error, one answer per env of an engine step, counts once)."""
        status, payload = decode(frame)
        if status == "ok":
            self._pool_complete(w, payload)
            return
        self._pool_fail(w)
        if frame not in seen:
            seen.add(frame)
            errors.append(error_of(*payload))


class _EnvFailed(Exception):
    """Raised by a backend's `AsyncPool._pool_answer` once envs' errors are recorded
    (one or more, in the order read; the pool raises each from its own ``recv()``)."""

    def __init__(self, error: BaseException, *more: BaseException):
        super().__init__(str(error))
        self.error = error
        self.errors = [error, *more]

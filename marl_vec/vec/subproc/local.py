"""SubprocVecEnv's block in the main process (``step_in_main=True``), behind a worker's interface.

During a synchronous step the trainer's process only waits for its workers. With
``step_in_main`` it steps the last block of envs itself meanwhile: on 2 cores,
1 worker + the main process use both cores with one process fewer (less memory,
no third process contending for a core) than 2 workers.

`LocalHost` stands in for both the pipe and the process of a worker, so
every command path of SubprocVecEnv (start, attach, step, reset, call, close,
the async pool's steps) treats the block alike: ``send_bytes`` runs the command
at once with the same code a worker runs (`handle`) and queues its answers;
``recv_bytes`` returns them; ``fileno`` is readable while an answer is queued, so
``multiprocessing.connection.wait`` sees the block as an answered worker. The
block is sent its step last, after the workers have theirs.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> fns = [lambda: gym.make("CartPole-v1")] * 4
    >>> with mv.SubprocVecEnv(fns, num_workers=1, step_in_main=True) as venv:
    ...     r = venv.reset()
    ...     r = venv.step(np.zeros((4, 1), dtype=np.int64))
    ...     len(venv.worker_pids), r.obs.shape
    (1, (4, 1, 4))
"""

from __future__ import annotations

import os
import signal
import threading

try:  # the C function: signal.signal wraps the previous handler in an enum (~5 us a call, twice a step)
    from _signal import signal as _set_handler
except ImportError:  # not CPython
    _set_handler = signal.signal
from collections import deque
from typing import Any, Callable

from marl_vec.vec.worker import attach, build_adapters, handle, release


class LocalHost:
    """A block of envs stepped in this process, answering like a worker's pipe and process.

    Args:
        env_fns: the block's env_fns (called here, now).
        start: global index of its first env.
        num_envs, autoreset, env_seed, restart_on_error: as a worker takes them.
    """

    def __init__(self, env_fns: list[Callable[[], Any]], start: int, num_envs: int, autoreset: str,
                 env_seed: int | None, restart_on_error: int):
        self._answers: deque[bytes] = deque()
        # One byte while answers are queued (readable = answered), not one per answer: a pool step of
        # more envs than a pipe holds bytes (64 KiB on Linux) would block on its own unread answers.
        self._ready_r, self._ready_w = os.pipe()
        self._never_r, self._never_w = os.pipe()  # the "process sentinel": never ready (it cannot die)
        self._config = (start, num_envs, autoreset, env_seed, restart_on_error)
        self._group: Any = None
        self._buffers: Any = None
        self._objects = False
        self.closed = False
        self.interrupted = False  # a Ctrl-C arrived while a command ran: raised once its answer is queued
        self.pid = os.getpid()
        self.exitcode: int | None = None
        self.sentinel = self._never_r
        self._put = _queue(self._answers, self._ready_w)
        built = build_adapters(self._put, env_fns, start)
        self._built = built  # (env_fns, adapters) until attached; None: failed (its error queued)

    # -- the pipe ---------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        """Run one command now; its answer is queued for `recv_bytes`."""
        if self.closed:
            raise BrokenPipeError("the main process's block is closed")
        if self._group is None:  # the parent's "attach", or its giving up
            built, self._built = self._built, None
            if built is None:
                raise BrokenPipeError("the main process's block failed to start")
            start, num_envs, autoreset, env_seed, restart_on_error = self._config
            attached = attach(self._put, data, built[0], built[1], start, num_envs, autoreset, env_seed,
                              restart_on_error)
            if attached is None:
                self.close()
                return
            self._group, self._buffers = attached
            self._objects = bool(self._group.buffers.object_fields)
            return
        with _InterruptsDeferred(self):
            if not handle(data, self._put, self._group, self._config[0], self._objects):
                self._release()

    def take_interrupt(self) -> bool:
        """Whether a Ctrl-C arrived during the last command (the caller raises it now)."""
        interrupted, self.interrupted = self.interrupted, False
        return interrupted

    def recv_bytes(self) -> bytes:
        if not self._answers:
            raise EOFError("the main process's block has no answer queued")
        answer = self._answers.popleft()
        if not self._answers:  # the last one: the pipe stops being readable
            os.read(self._ready_r, 1)
        return answer

    def poll(self, timeout: float | None = 0.0) -> bool:
        return bool(self._answers)

    def fileno(self) -> int:
        return self._ready_r

    # -- the process ------------------------------------------------------------------

    def is_alive(self) -> bool:
        return not self.closed

    def join(self, timeout: float | None = None) -> None:
        """Nothing runs apart from the caller: nothing to wait for."""

    def terminate(self) -> None:
        self._release()

    kill = terminate

    def _release(self) -> None:
        group, self._group = self._group, None
        buffers, self._buffers = self._buffers, None
        release(group, buffers)
        built, self._built = self._built, None
        if built is not None:
            for adapter in built[1]:
                try:
                    adapter.close()
                except Exception:  # closing anyway; the caller's own error matters more
                    pass
        self.closed = True
        self.exitcode = 0

    def close(self) -> None:
        """Close the block's envs (if still open) and the pipe; closing twice is fine."""
        self._release()
        fds, self._fds_open = getattr(self, "_fds_open", True), False
        if fds:
            for fd in (self._ready_r, self._ready_w, self._never_r, self._never_w):
                os.close(fd)


def _queue(answers: deque[bytes], ready_w: int) -> Callable[[bytes], None]:
    """The block's ``send``: queue an answer, the ready pipe marked while any is queued. A plain function,
    not a method: the worker code writes a whole block's pool answers straight to the fd of
    the object a bound ``send`` belongs to (a Connection's), and this block's fd is only
    the read end of its ready pipe."""
    def put(answer: bytes) -> None:
        if not answers:  # the first one queued: the pipe's one byte (see LocalHost)
            os.write(ready_w, b"a")
        answers.append(answer)

    return put


class _InterruptsDeferred:
    """While the block runs a command, a first Ctrl-C only marks ``host.interrupted`` (the
    command finishes whole, like a worker's, and the caller raises the interrupt after);
    a second one raises at once, as a hung env must stay interruptible: the block is then
    half-stepped, and the host closes itself, so the batch reports itself broken rather
    than going on silently wrong. Only in the main thread, where signal handlers live."""

    def __init__(self, host: LocalHost):
        self.host = host
        self.previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = _set_handler(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.host.interrupted:
            self.host.interrupted = False
            raise KeyboardInterrupt
        self.host.interrupted = True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.previous is not None:
            _set_handler(signal.SIGINT, self.previous)
        if exc_type is KeyboardInterrupt:
            self.host.terminate()

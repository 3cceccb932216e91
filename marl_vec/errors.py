"""Errors that cross a process boundary: what failed, where, and its original traceback.

An exception raised by an env inside a worker process cannot always be pickled,
and its traceback never can, so it reaches the caller as a :class:`WorkerError`
that carries the original traceback as text.

Example:
    >>> err = WorkerError("step", worker=1, env_index=5, error="RuntimeError('boom')",
    ...                   traceback_text="Traceback (most recent call last): ...")
    >>> str(err).splitlines()[0]
    "env 5 (worker 1) failed in step: RuntimeError('boom')"
    >>> err.env_index, err.worker
    (5, 1)
"""

from __future__ import annotations


class SetupError(Exception):
    """Mixin of the errors that mean "what was asked for cannot be made here".

    A missing extra, an unknown env id, an option the env does not take, a bad
    config, a game not installed: the message says what to change, and a traceback
    would add nothing. ``marl-vec`` prints such an error as one line with status 2,
    also when a worker process raised it (:attr:`WorkerError.cause`). Each one
    also derives from the builtin error it always was (``ImportError``,
    ``ValueError``, ``TypeError``, ``FileNotFoundError``).

    Example:
        >>> class BadOption(SetupError, TypeError): ...
        >>> isinstance(BadOption("no option 'NN'"), TypeError)
        True
    """


class WorkerError(RuntimeError):
    """A command failed in a worker process (an env raised, or the worker broke).

    Attributes:
        command: what the worker was doing (``step``, ``reset``, ``call``, ``start``, ...).
        worker: index of the worker process.
        env_index: global index of the env that raised, or None when not one env's fault.
        error: ``repr`` of the original exception (or what went wrong).
        traceback_text: the original traceback, formatted in the worker.
        cause: the original exception itself, when it is a :class:`SetupError`
            (a worker sends those whole, so that the caller can show just their
            message); else None.
    """

    def __init__(
        self,
        command: str,
        worker: int,
        env_index: int | None,
        error: str | BaseException,
        traceback_text: str = "",
    ):
        # A worker sends a SetupError itself in place of its repr (worker.encode_error).
        self.cause = error if isinstance(error, SetupError) else None
        if isinstance(error, BaseException):
            error = repr(error)
        self.command = command
        self.worker = worker
        self.env_index = env_index
        self.error = error
        self.traceback_text = traceback_text
        where = f"env {env_index} (worker {worker})" if env_index is not None else f"worker {worker}"
        message = f"{where} failed in {command}: {error}"
        if traceback_text:
            message += "\n--- original traceback (in the worker process) ---\n" + traceback_text.rstrip()
        super().__init__(message)

    def __reduce__(self):  # picklable, so a caller may send it on
        error = self.cause if self.cause is not None else self.error
        return (type(self), (self.command, self.worker, self.env_index, error, self.traceback_text))


class WorkerDiedError(WorkerError):
    """A worker process exited without answering (killed, segfault, out of memory)."""


class PoolNotReadyError(RuntimeError):
    """The async pool's ``send``/``recv`` used out of order (:mod:`marl_vec.vec.pool`).

    Raised, with the envs concerned named, when ``send`` is given an env that
    ``recv`` has not returned since its last ``send`` (no env is stepped twice
    without a ``recv`` in between), when ``recv`` cannot gather ``batch_size`` envs
    (the caller holds the others, received and not sent), or before ``reset()``.
    Nothing was sent or stepped: the pool is as it was.

    Example:
        >>> err = PoolNotReadyError("send() got env 3, which is stepping")
        >>> isinstance(err, RuntimeError)
        True
    """


class AlreadyPendingCallError(RuntimeError):
    """A call was made while a step is pending (``step_async`` done, ``step_wait`` not yet).

    The pending step is untouched: collect it with ``step_wait()``, then make the call.
    The name and meaning follow gymnasium's ``AlreadyPendingCallError``.

    Example:
        >>> err = AlreadyPendingCallError("get_attr")
        >>> str(err).startswith("get_attr() called while a step is pending")
        True
    """

    def __init__(self, call: str):
        self.call = call
        what = "twice without step_wait()" if call == "step_async" else "while a step is pending"
        super().__init__(
            f"{call}() called {what} (step_async() was called, step_wait() not yet); "
            "call step_wait() first to collect the pending step"
        )

    def __reduce__(self):
        return (type(self), (self.call,))

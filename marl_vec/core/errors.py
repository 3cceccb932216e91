"""Errors that cross a process boundary: what failed, where, and its original traceback.

An exception raised by an env inside a worker process cannot always be pickled,
and its traceback never can, so it reaches the caller as a [`WorkerError`][marl_vec.core.errors.WorkerError]
that carries the original traceback as text.

Examples:
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
    also when a worker process raised it (`WorkerError.cause`). Each one
    also derives from the builtin error it always was (``ImportError``,
    ``ValueError``, ``TypeError``, ``FileNotFoundError``).

    Examples:
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
        cause: the original exception itself, when it is a [`SetupError`][marl_vec.core.errors.SetupError]
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


class SameEnvError(ValueError):
    """Two env_fns of one batch returned the same env object (``[lambda: env] * n``).

    One object would be stepped once per env at every step: never what was meant.
    Raised by every backend (from a worker process too, as this type), wherever two
    envs of one group, or wrappers around one env, are the same object.

    Examples:
        >>> isinstance(SameEnvError("env_fns 0 and 1 returned the same env object"), ValueError)
        True
    """


class MissingAttribute:
    """An env's answer to ``get_attr``/``call`` of an attribute it lacks (``EnvGroup``).

    It travels back from any process as an ordinary value, and ``VecEnv.get_attr``/
    ``call`` raise its `error` in the caller: an ``AttributeError`` on every
    backend, which SB3's ``has_attr`` (and sb3-contrib's masking probe) rely on.

    Examples:
        >>> str(MissingAttribute(3, "foo", "'Env' object has no attribute 'foo'").error())
        "env 3 has no attribute 'foo' ('Env' object has no attribute 'foo')"
    """

    __slots__ = ("env_index", "name", "reason")

    def __init__(self, env_index: int, name: str, reason: str):
        self.env_index, self.name, self.reason = env_index, name, reason

    def __reduce__(self):
        return (MissingAttribute, (self.env_index, self.name, self.reason))

    def error(self) -> AttributeError:
        return AttributeError(f"env {self.env_index} has no attribute {self.name!r} ({self.reason})")

    @staticmethod
    def raise_first(values: list) -> list:
        """``values``, or the AttributeError of the first env that lacked the attribute."""
        for value in values:
            if type(value) is MissingAttribute:
                raise value.error()
        return values


class WorkerDiedError(WorkerError):
    """A worker process exited without answering (killed, segfault, out of memory)."""


class PoolNotReadyError(RuntimeError):
    """The async pool's ``send``/``recv`` used out of order (`marl_vec.vec.pool`).

    Raised, with the envs concerned named, when ``send`` is given an env that
    ``recv`` has not returned since its last ``send`` (no env is stepped twice
    without a ``recv`` in between), when ``recv`` cannot gather ``batch_size`` envs
    (the caller holds the others, received and not sent), or before ``reset()``.
    Nothing was sent or stepped: the pool is as it was.

    Examples:
        >>> err = PoolNotReadyError("send() got env 3, which is stepping")
        >>> isinstance(err, RuntimeError)
        True
    """


class AlreadyPendingCallError(RuntimeError):
    """A call was made while a step is pending (``step_async`` done, ``step_wait`` not yet).

    The pending step is untouched: collect it with ``step_wait()``, then make the call.
    The name and meaning follow gymnasium's ``AlreadyPendingCallError``.

    Examples:
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

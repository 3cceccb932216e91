"""The loop of a SubprocVecEnv worker process: one EnvGroup, driven by commands.

A worker builds its block of envs, reports their spec, attaches to the batch's
shared-memory block and then serves commands until told to close (or until its
pipe breaks because the parent went away). All array data goes through shared
memory; the pipe carries only commands, non-empty infos and errors.

Wire format, chosen so that the hot path pickles nothing in the common case:

- parent -> worker: `STEP` (one byte), `POOL_STEP` followed by local env
  indices (`encode_pool_step`), or a pickled ``(command, *args)`` tuple.
- worker -> parent: ``b""`` (done, nothing to say: a step with only empty infos)
  or a pickled ``("ok", payload)`` / ``("error", (env_index, repr, traceback))``.
  A pool step answers once per env, in the order given, as soon as that env's rows
  are written: the answers are the async pool's per-env completion signals.
- Only for spaces with object leaves (Text, Graph, ...; never in shared memory):
  a step is ``("step", object_action_rows)``, a pool step ``("pool_step", local_ids,
  object_action_rows)`` (the rows of those envs), and step and reset answers are an
  `ObjectReply` carrying the block's rows of the object arrays (a pool step's
  answer: its env's row).

Example (what SubprocVecEnv does; not run here)::

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=worker_main, args=(0, child, env_fns, 0, len(env_fns), "same_step", 0, 0), daemon=True)
"""

from __future__ import annotations

import collections
import copyreg
import io
import os
import pickle
import signal
import struct
import time
import traceback
from array import array
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from marl_vec.core.errors import SetupError

T = TypeVar("T")

STEP = b"s"
POOL_STEP = b"p"
OK_EMPTY = b""


def encode_pool_step(local_ids: Sequence[int], object_actions: list | None = None) -> bytes:
    """The async pool's command: step these local envs one by one, answering after each.

    ``object_actions``: the rows of ``local_ids`` of the object action arrays, for action
    spaces with object leaves (they are not in shared memory, so they come along).
    """
    if object_actions is not None:
        return pickle.dumps(("pool_step", list(local_ids), object_actions), protocol=pickle.HIGHEST_PROTOCOL)
    return POOL_STEP + array("I", local_ids).tobytes()


def _scalar_reducer(kind: type) -> Callable[[Any], tuple]:
    return lambda x: (kind, (x.item(),))


# Numpy scalars rebuilt from their Python value: the same type and the same value (``item()`` is
# exact for these), pickled about 3x faster than numpy's own reduce (measured on MaMuJoCo Ant's
# infos, 9 float64 per env: 120 against 41 us for 8 envs; a worker sends them every step).
_FAST_SCALARS = {kind: _scalar_reducer(kind) for kind in (
    np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
    np.uint64, np.uint32, np.uint16, np.uint8, np.bool_)}
_DISPATCH = collections.ChainMap(_FAST_SCALARS, copyreg.dispatch_table)


def dumps(obj: Any) -> bytes:
    """``pickle.dumps`` at the highest protocol, numpy scalars the fast way (see ``_FAST_SCALARS``).

    ```pycon
    >>> loaded = pickle.loads(dumps({"x": np.float32(0.5)}))
    >>> type(loaded["x"]).__name__, float(loaded["x"])
    ('float32', 0.5)
    ```
    """
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(obj)
    return out.getvalue()


def encode_ok(payload: Any) -> bytes:
    """An answer: empty bytes when there is nothing to send back."""
    return OK_EMPTY if payload is None else dumps(("ok", payload))


def encode_error(exc: BaseException, default_env: int | None = None) -> bytes:
    """An error as plain strings: the exception object may not pickle, its traceback never does.

    A [`SetupError`][marl_vec.core.errors.SetupError] of marl_vec's own (a missing extra, an
    unknown env id, ...) goes whole in place of its repr, so the caller can show its
    message alone (``WorkerError.cause``). Only marl_vec's: the parent can always
    import their classes to unpickle them.
    """
    env_index = getattr(exc, "marl_vec_env_index", default_env)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, SetupError) and type(exc).__module__.startswith("marl_vec."):
        try:
            return pickle.dumps(("error", (env_index, exc, text)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an unpicklable argument: its repr still says what failed
            pass
    return pickle.dumps(("error", (env_index, repr(exc), text)), protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> tuple[str, Any]:
    if not data:
        return "ok", None
    return pickle.loads(data)


class ObjectReply:
    """A step or reset answer plus the worker's rows of the object arrays (see the module doc)."""

    __slots__ = ("payload", "rows")

    def __init__(self, payload: Any, rows: list):
        self.payload, self.rows = payload, rows

    def __reduce__(self) -> Any:
        return ObjectReply, (self.payload, self.rows)


def _step_reply(group: Any, objects: bool) -> bytes:
    """Step ``group`` and encode its answer (only non-empty infos; object rows if any)."""
    try:
        infos = group.step()
    except Exception as exc:
        return encode_error(exc)
    nonempty = _nonempty(infos)
    if objects:
        return encode_ok(ObjectReply(nonempty, group.object_rows()))
    return OK_EMPTY if nonempty is None else encode_ok(nonempty)


def _nonempty(infos: Sequence[dict[str, Any]], local_ids: Sequence[int] | None = None) -> dict[int, dict] | None:
    """Only the infos that say something cross the pipe, keyed by local index."""
    ids = range(len(infos)) if local_ids is None else local_ids
    out = {j: info for j, info in zip(ids, infos) if info}
    return out or None


def worker_main(
    worker: int,
    conn: Any,
    env_fns: Any,
    start: int,
    num_envs: int,
    autoreset: str,
    env_seed: int | None,
    restart_on_error: int,
    inherited: Sequence[Any] = (),
    environ: dict[str, str] | None = None,
    spin: float = 0.0,
    block_name: str | None = None,
) -> None:
    """Entry point of a worker process (also under spawn: importable, arguments picklable).

    Args:
        worker: this worker's index, for messages.
        conn: its end of the pipe to the parent.
        env_fns: its block of env_fns, or their cloudpickle bytes (spawn, forkserver).
        start: global index of its first env.
        num_envs: E of the whole batch (the shared buffers hold every env).
        autoreset, env_seed, restart_on_error: passed to its `EnvGroup`.
        inherited: under fork, the parent's ends of every pipe made so far (this
            worker's own included); closed at once, or the worker would never read
            EOF when the parent dies, and would keep its siblings from reading it.
        environ: the parent's environment variables when it made this worker. A
            forkserver child inherits the server's, fixed when the server started,
            so a variable set later (SC2PATH, say) would be missing without this.
        spin: seconds to poll for the next command before sleeping (see `serve`).
        block_name: under fork, the name the parent gives (or gave) its shared block:
            unlinked here if the parent vanishes, even before this worker attached.
    """
    for other in inherited:
        other.close()
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    # Ctrl-C reaches every process of the terminal's foreground group; only the
    # parent decides what an interrupt means, and it closes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = None
    buffers = None
    try:
        send = conn.send_bytes
        built = build_adapters(send, env_fns, start)
        if built is None:
            return
        env_fns, adapters = built
        attached = attach(send, conn.recv_bytes(), env_fns, adapters, start, num_envs, autoreset, env_seed,
                          restart_on_error)
        if attached is None:
            return
        group, buffers = attached
        serve(conn, group, start, spin)
    except (EOFError, OSError, KeyboardInterrupt):
        # The parent is gone (or killed us politely): nothing to answer to. A parent that
        # closes unlinks the block itself; one that was killed cannot (a forked batch's
        # block is not in the resource tracker's care), so the workers do.
        name = buffers.shm_name if buffers is not None else block_name
        if environ is None and name:  # forked (see SubprocVecEnv)
            from marl_vec.core.buffers import unlink_block

            unlink_block(name)
    finally:
        release(group, buffers)


def build_adapters(send: Any, env_fns: Any, start: int) -> tuple[list, list] | None:
    """Build a block's adapters and ``send`` its ``start`` answer: ``(pid, specs)``, the
    `SameEnvError` of a block whose envs are one object, or the error that
    stopped it. Returns ``(env_fns, adapters)`` (env_fns unpickled), or None when the
    block cannot go on (its adapters closed)."""
    from marl_vec.core.adapter import check_distinct_envs
    from marl_vec.envs.registry import as_adapter
    from marl_vec.core.errors import SameEnvError

    adapters: list = []
    try:
        if isinstance(env_fns, bytes):
            import cloudpickle

            env_fns = cloudpickle.loads(env_fns)
        for j, fn in enumerate(env_fns):
            try:
                adapters.append(as_adapter(fn()))
            except Exception as exc:
                exc.marl_vec_env_index = start + j  # type: ignore[attr-defined]
                raise
        try:
            check_distinct_envs(adapters, start)
        except SameEnvError as err:  # raised by the parent as it is (see SubprocVecEnv._check_specs)
            send(encode_ok((os.getpid(), err)))
            _close_all(adapters)
            return None
        send(encode_ok((os.getpid(), [a.spec for a in adapters])))
    except Exception as exc:
        send(encode_error(exc))
        _close_all(adapters)
        return None
    return env_fns, adapters


def attach(send: Any, data: bytes, env_fns: list, adapters: list, start: int, num_envs: int, autoreset: str,
           env_seed: int | None, restart_on_error: int) -> tuple[Any, Any] | None:
    """Answer the parent's ``attach`` command (``data``): map the shared block and make the
    `EnvGroup` over the adapters; returns ``(group, buffers)``, or None when the
    parent gave up or attaching failed (the adapters are closed, the error sent)."""
    from marl_vec.core.buffers import BatchBuffers
    from marl_vec.core.group import EnvGroup

    command, *args = pickle.loads(data)
    if command != "attach":  # the parent gave up (another worker failed)
        _close_all(adapters)
        return None
    buffers = None
    try:
        shm_name, spec = args  # the parent's spec: its layout of the block
        buffers = BatchBuffers(spec, num_envs, attach=shm_name)
        group = EnvGroup(
            env_fns, buffers, start, autoreset, env_seed, adapters=adapters, restart_on_error=restart_on_error
        )
    except Exception as exc:
        send(encode_error(exc))
        _close_all(adapters)
        if buffers is not None:
            buffers.close()
        return None
    send(encode_ok(group.steps_single_envs))  # the pool's unit: one env, or the block
    return group, buffers


def release(group: Any, buffers: Any) -> None:
    """Close a block's group and unmap its buffers (best effort: the block is going away)."""
    if group is not None:
        try:
            group.close()
        except Exception:  # the worker is going away; the parent reported what mattered
            pass
    if buffers is not None:
        buffers.close()


def _close_all(adapters: list) -> None:
    for adapter in adapters:
        try:
            adapter.close()
        except Exception:  # best effort while failing anyway
            pass


def serve(conn: Any, group: Any, start: int, spin: float = 0.0) -> None:
    """Answer commands on ``conn`` with ``group`` until ``close``; EOFError when the other end goes.

    Shared by worker processes and by Ray actors linked to their driver over a socket.
    ``spin``: seconds to poll the pipe after each answer before sleeping in ``recv``
    (SubprocVecEnv's ``spin_us``): the next command of a fast trainer then finds the
    worker awake, which saves the kernel's wake-up (tens of microseconds a step).
    """
    recv, send = conn.recv_bytes, conn.send_bytes
    objects = bool(group.buffers.object_fields)
    if spin <= 0:
        while handle(recv(), send, group, start, objects):
            pass
        return
    poll, clock = conn.poll, time.perf_counter
    while True:
        poll_until(poll, clock() + spin, clock)
        if not handle(recv(), send, group, start, objects):
            return


def poll_until(poll: Callable[[], T], until: float, clock: Callable[[], float]) -> T:
    """Call ``poll`` over and over without sleeping until it answers something true or
    ``clock()`` reaches ``until``; its last answer. The spin of ``spin_us``, on both
    sides of a pipe: a worker waiting for a command (`serve`), the trainer's
    process waiting for answers (``SubprocTransport._wait_events``).

    ```pycon
    >>> poll_until(lambda: [], 0.0, lambda: 1.0)
    []
    ```
    """
    while True:
        got = poll()
        if got or clock() >= until:
            return got


def handle(data: bytes, send: Any, group: Any, start: int, objects: bool) -> bool:
    """Answer one command (``data``) with ``group`` through ``send``; False after ``close``.

    The body of `serve`, and what SubprocVecEnv's block in the main process
    (``step_in_main``) runs for each command it is sent.
    """
    if data == STEP:
        send(_step_reply(group, objects))
        return True
    if data[:1] == POOL_STEP:
        ids = array("I")
        ids.frombytes(data[1:])
        pool_step(send, group, start, ids, objects)
        return True
    command, *args = pickle.loads(data)
    if command == "step":  # object actions come with the step
        group.write_object_actions(args[0])
        send(_step_reply(group, objects))
        return True
    if command == "pool_step":  # likewise, for the envs of a pool step
        local_ids, rows = args
        group.write_object_actions(rows, local_ids)
        pool_step(send, group, start, local_ids, objects)
        return True
    if command == "close":
        try:
            group.close()
        except Exception as exc:
            send(encode_error(exc))
        else:
            send(OK_EMPTY)
        return False
    try:
        payload = run_command(group, command, args)
        if objects and command == "reset":
            payload = ObjectReply(payload, group.object_rows())
        reply = encode_ok(payload)  # pickling a result may fail too
    except Exception as exc:
        reply = encode_error(exc)
    send(reply)
    return True


def pool_step(send: Any, group: Any, start: int, local_ids: Sequence[int], objects: bool = False) -> None:
    """Step ``local_ids`` (`pool_outcomes`), answering after each env (its rows are written by then).

    An env's error is its answer; the other envs still step. A group that steps only
    whole blocks (a native engine) is sent its whole block, and answers once per env after
    it, in one write (its error: the same answer for each env, which the pool counts once).
    ``objects``: the batch has object leaves; each answer is an `ObjectReply` with
    the env's rows of them.
    """
    for together, outcomes in pool_outcomes(group, local_ids):
        replies = [encode_error(outcome, None if together else start + j) if isinstance(outcome, Exception)
                   else _env_reply(group, j, outcome, objects) for j, outcome in outcomes]
        if together:
            _send_together(send, replies)
        else:
            send(replies[0])


def pool_outcomes(group: Any, local_ids: Sequence[int], step_block: Callable[[], list] | None = None,
                  ) -> Iterator[tuple[bool, list[tuple[int, Any]]]]:
    """The async pool's step of ``group``'s envs ``local_ids``, as each finishes: ``(together,
    [(j, info or None, or the exception env j raised), ...])``, one env at a time, or the whole
    block at once (``together``) where the group steps only whole blocks (a native engine:
    ``step_block()``, the group's step by default; a block's error is every env's outcome).

    The one logic of a pool step, wherever the group lives: a worker process, this process's
    block (``step_in_main``) and DummyVecEnv (whose device engine's step is ``step_block``).
    """
    if group.steps_single_envs or group.unstarted:  # a replaced engine block: restarts need no engine step
        step_env = group.step_env
        for j in local_ids:
            try:
                outcome: Any = step_env(j) or None
            except Exception as exc:
                outcome = exc
            yield False, [(j, outcome)]
        return
    try:
        infos = (group.step if step_block is None else step_block)()
    except Exception as exc:
        yield True, [(j, exc) for j in local_ids]
        return
    yield True, [(j, infos[j] or None) for j in local_ids]


def _env_reply(group: Any, j: int, info: dict | None, objects: bool) -> bytes:
    """A pool step's answer for local env j: its info when not empty, its object rows if any."""
    if objects:
        return encode_ok(ObjectReply(info, group.object_rows([j])))
    return OK_EMPTY if info is None else encode_ok(info)


def _send_together(send: Any, messages: list[bytes]) -> None:
    """Send a whole block's answers in one write, so that the trainer reads them in one
    piece and its batch is the block (answered one by one, another block's answers could
    slip in between and mix the batch). ``send`` is a Connection's ``send_bytes``: the
    frames are multiprocessing's (a 4-byte big-endian length, then the bytes)."""
    conn = getattr(send, "__self__", None)
    if conn is None or not hasattr(conn, "fileno") or any(len(m) >= 0x7FFFFFFF for m in messages):
        for message in messages:
            send(message)
        return
    data = memoryview(b"".join(struct.pack("!i", len(m)) + m for m in messages))
    fd = conn.fileno()
    while data:
        data = data[os.write(fd, data):]


def run_command(group: Any, command: str, args: Sequence[Any]) -> Any:
    """Answer ``command`` with ``group``: ``reset`` (its non-empty infos by local index),
    ``call``, ``get_attr``, ``set_attr``, ``render`` (``args`` as the EnvGroup methods of
    those names take them) or ``ping``.

    The one dispatch of the calls every host of a group answers alike: worker processes
    and linked Ray actors (over their pipe or socket, `serve`) and Ray actors
    answering Ray calls (``GroupHost.command``).
    """
    if command == "reset":
        seed, local_ids = args
        return _nonempty(group.reset(seed, local_ids), local_ids)
    if command == "call":
        name, call_args, kwargs, local_ids = args
        return group.call(name, call_args, kwargs, local_ids)
    if command == "get_attr":
        name, local_ids = args
        return group.get_attr(name, local_ids)
    if command == "set_attr":
        name, values, local_ids = args
        group.set_attr(name, values, local_ids)
        return None
    if command == "render":
        return group.render()
    if command == "ping":
        return None
    raise ValueError(f"unknown worker command {command!r}")

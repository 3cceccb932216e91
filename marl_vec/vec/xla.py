"""Any env inside ``jit``: EnvPool's XLA interface (``handle, recv, send, step``) for every backend.

``handle, recv, send, step = venv.xla()`` gives four pure functions of a handle that
step the batch from inside ``jax.jit``, ``jax.lax.scan`` and ``jax.lax.while_loop``,
as EnvPool's ``xla()`` does for its own C++ envs, here for every family and backend
(DummyVecEnv, SubprocVecEnv, the async pool, RayVecEnv):

- ``step(handle, actions) -> (handle, XlaResult)``: ``venv.step(actions)``.
  With ``env_ids``: ``recv(send(handle, actions, env_ids))``, as EnvPool's.
- ``send(handle, actions, env_ids=None) -> handle``: the async pool's ``venv.send``
  (every backend has it; ``batch_size`` envs per ``recv``); ``None``: every env.
- ``recv(handle) -> (handle, XlaResult)``: the pool's ``venv.recv()``, the next
  ``batch_size`` ready envs, their ids in ``env_ids``. After a reset every env is
  ready: ``recv`` first, then ``send`` the envs it returned (as with EnvPool).
- ``fns.reset(handle, env_ids=None) -> (handle, XlaResult)``: ``venv.reset(env_ids=...)``,
  ``env_ids`` a boolean mask of shape ``(E,)`` (a fixed shape, as XLA needs).

Each is one host call, ``jax.experimental.io_callback(ordered=True)``, that takes the
handle and returns it: the handle carries the order from call to call, and the
ordered effect keeps XLA from reordering, merging or dropping env steps. On the CPU
the call runs in the calling thread, so a Ctrl-C (KeyboardInterrupt) stops it
between or inside steps. Results are `XlaResult`s of JAX arrays with
[`StepResult`][marl_vec.vec.results.StepResult]'s shapes; a single-agent batch
(``single_agent``, default: one agent) has EnvPool's shapes, obs ``(E, ...)``.

Refused with a clear message: ``vmap`` over the handle or the actions
([`XlaVmapError`][marl_vec.vec.xla.XlaVmapError]; batch envs with ``num_envs``),
and differentiation through a call ([`XlaGradError`][marl_vec.vec.xla.XlaGradError]).

An env error inside a jitted call aborts the computation; JAX raises a
``JaxRuntimeError`` whose last line is the env's own one-line error. Inside
``with fns.errors():`` the env's own exception is raised instead (same type and
message, from the JaxRuntimeError). The batch is as that error leaves it from Python.

Examples:
    >>> import gymnasium as gym, jax, jax.numpy as jnp
    >>> import marl_vec as mv
    >>> venv = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=0)
    >>> _ = venv.reset()
    >>> handle, recv, send, step = venv.xla()
    >>> def rollout(handle):
    ...     def body(handle, _):
    ...         handle, r = step(handle, jnp.ones(4, jnp.int32))
    ...         return handle, r.reward
    ...     return jax.lax.scan(body, handle, None, length=3)
    >>> handle, rewards = jax.jit(rollout)(handle)
    >>> rewards.shape, float(rewards.sum())
    ((3, 4), 12.0)
    >>> venv.close()
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np

from marl_vec.envs.extras import require
from marl_vec.vec.xla_fpu import python_float_mode
from marl_vec.vec.xla_layout import XlaLayout, XlaResult, expand_actions

__all__ = ["XlaFunctions", "XlaResult", "XlaVmapError", "XlaGradError", "make_xla", "xla_errors"]

_ids = itertools.count(1)
# The env errors a bridge raised lately: JAX logs each failed callback with its traceback,
# and then raises it again in its JaxRuntimeError; _Quiet drops that log record for ours.
_raised: deque[int] = deque(maxlen=64)
_last: list[BaseException | None] = [None]  # the latest error a host call raised (xla_errors)
_LOCK = threading.Lock()


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and id(record.exc_info[1]) in _raised)


_QUIET = _Quiet()


class XlaVmapError(ValueError):
    """``jax.vmap`` over a host-stepped batch's handle or actions."""


class XlaGradError(ValueError):
    """Differentiating through a host-stepped batch's ``step``."""


class XlaFunctions(tuple):
    """``(handle, recv, send, step)``, EnvPool's XLA contract; plus ``reset`` and ``errors``.

    A tuple, so that ``handle, recv, send, step = venv.xla()`` unpacks as EnvPool's does.
    """

    handle: Any
    recv: Callable[..., Any]
    send: Callable[..., Any]
    step: Callable[..., Any]
    reset: Callable[..., Any]
    errors: Callable[[], contextlib.AbstractContextManager]

    def __new__(cls, handle: Any, recv: Callable, send: Callable, step: Callable) -> "XlaFunctions":
        self = super().__new__(cls, (handle, recv, send, step))
        self.handle, self.recv, self.send, self.step = handle, recv, send, step
        return self


def _jax() -> Any:
    return require("jax", "jax", "VecEnv.xla()")


def make_xla(venv: Any, single_agent: bool | None = None, host_call: str = "auto") -> XlaFunctions:
    """The XLA functions of ``venv`` (see the module docstring); ``venv.xla()`` calls this.

    Args:
        venv: any [`VecEnv`][marl_vec.vec.base.VecEnv]; reset it before the first ``step``.
        single_agent: EnvPool's single-agent shapes, without the agent axis (actions
            ``(E, ...)``, obs ``(E, ...)``, reward ``(E,)``). Default: the batch has one agent.
        host_call: how XLA calls the host: ``buffer`` (``jax.experimental.buffer_callback``,
            results written into XLA's buffers), ``io_callback`` (``io_callback(ordered=True)``),
            or ``auto``: ``buffer`` where this JAX has it.
    """
    jax = _jax()
    if single_agent is None:
        single_agent = venv.spec.n_agents == 1
    elif single_agent and venv.spec.n_agents != 1:
        raise ValueError(f"single_agent=True needs a batch of one agent; this one has {venv.spec.n_agents}")
    logging.getLogger("jax._src.callback").addFilter(_QUIET)  # a filter is added once
    if host_call not in ("auto", "buffer", "io_callback"):
        raise ValueError(f"host_call must be 'auto', 'buffer' or 'io_callback', got {host_call!r}")
    if host_call == "auto":
        try:
            from jax.experimental import buffer_callback  # noqa: F401  (jax >= 0.7)
            host_call = "buffer"
        except ImportError:
            host_call = "io_callback"
    bridge = _Bridge(venv, bool(single_agent), _has_pool(venv), host_call)
    handle = jax.numpy.asarray(np.array([bridge.key, 0], np.int32))
    return bridge.functions(handle)


class _Bridge:
    """The host side of one batch's XLA functions: the callbacks and their layouts."""

    def __init__(self, venv: Any, single_agent: bool, pooled: bool, mechanism: str):
        self.venv, self.single_agent, self.pooled, self.mechanism = venv, single_agent, pooled, mechanism
        self.key = next(_ids) % (2 ** 31)
        self.layout = XlaLayout(venv.buffers, single_agent, venv.autoreset.keeps_final)
        self.name = type(venv).__name__

    # -- host callbacks (numpy in, numpy out) -------------------------------------

    def _checked(self, handle: np.ndarray, outs: list[np.ndarray]) -> None:
        """Check the handle is this batch's; write the next one (its call count + 1) into ``outs[0]``."""
        handle = np.asarray(handle)  # (io_callback hands in device arrays, whose indexing dispatches)
        if int(handle[0]) != self.key:
            raise ValueError(f"this handle belongs to another batch (key {int(handle[0])}, this {self.name}'s is "
                             f"{self.key}); use the handle its own xla() returned")
        outs[0][0], outs[0][1] = self.key, int(handle[1]) + 1

    def _guard(self, fn: Callable[..., None]) -> Callable[..., None]:
        def call(outs: list[np.ndarray], *args: Any) -> None:
            try:
                with python_float_mode():  # the env computes as it does from Python (see xla_fpu)
                    fn(outs, *args)
            except BaseException as exc:  # kept for xla_errors(); XLA then aborts the computation
                with _LOCK:
                    _raised.append(id(exc))
                    _last[0] = exc
                raise
        return call

    def host_step(self, outs: list[np.ndarray], handle: np.ndarray, actions: Any) -> None:
        self._checked(handle, outs)
        venv = self.venv
        copy, venv.copy = venv.copy, False  # views of the buffers: write() makes the one copy
        try:
            result = venv.step(expand_actions(actions, self.single_agent))
        finally:
            venv.copy = copy
        self.layout.write(result, outs[1:])

    def host_reset(self, outs: list[np.ndarray], handle: np.ndarray, mask: np.ndarray | None) -> None:
        self._checked(handle, outs)
        self.layout.write(self.venv.reset(env_ids=None if mask is None else np.asarray(mask, bool)), outs[1:])

    def host_send(self, outs: list[np.ndarray], handle: np.ndarray, actions: Any, env_ids: np.ndarray | None) -> None:
        self._checked(handle, outs)
        actions = expand_actions(actions, self.single_agent)
        if self.pooled:
            self.venv.send(actions, np.arange(self.venv.num_envs) if env_ids is None else np.asarray(env_ids))
        else:  # a VecEnv without the pool: one step of every env
            if env_ids is not None and np.asarray(env_ids).tolist() != list(range(self.venv.num_envs)):
                raise ValueError(f"{self.name} has no async pool: send() takes env_ids None or "
                                 f"0..{self.venv.num_envs - 1} in order, got {np.asarray(env_ids).tolist()}")
            self.venv.step_async(actions)

    def host_recv(self, outs: list[np.ndarray], handle: np.ndarray) -> None:
        self._checked(handle, outs)
        if self.pooled:
            result = self.venv.recv()
            self.layout.write(result, outs[1:], result.env_ids)
        else:
            self.layout.write(self.venv.step_wait(), outs[1:], np.arange(self.venv.num_envs))

    # -- the jittable functions ----------------------------------------------------

    def functions(self, handle: Any) -> XlaFunctions:
        jax = _jax()
        handle_struct = jax.ShapeDtypeStruct((2,), np.int32)
        full, build_full = self.layout.shapes()
        rows = self.venv.batch_size if self.pooled else self.venv.num_envs
        part, build_part = self.layout.shapes(rows, env_ids=True)
        what = f"{self.name}.xla()"
        step_call = _host_call(self._guard(self.host_step), [handle_struct, *full], what + " step", self.mechanism)
        reset_call = _host_call(self._guard(self.host_reset), [handle_struct, *full], what + " reset", self.mechanism)
        send_call = _host_call(self._guard(self.host_send), [handle_struct], what + " send", self.mechanism)
        recv_call = _host_call(self._guard(self.host_recv), [handle_struct, *part], what + " recv", self.mechanism)

        def recv(handle: Any) -> tuple[Any, XlaResult]:
            """The next batch of results: ``(handle, XlaResult)`` with ``env_ids``."""
            _refuse_mapped(what + " recv")
            out = recv_call(handle)
            return out[0], build_part(list(out[1:]))

        def send(handle: Any, actions: Any, env_ids: Any = None) -> Any:
            """Send ``actions`` (a row per env of ``env_ids``; all envs when None); returns the handle."""
            _refuse_mapped(what + " send")
            return send_call(handle, actions, env_ids)[0]

        def step(handle: Any, actions: Any, env_ids: Any = None) -> tuple[Any, XlaResult]:
            """Step every env (``venv.step``), or with ``env_ids`` ``recv(send(...))``."""
            if env_ids is not None:
                return recv(send(handle, actions, env_ids))
            _refuse_mapped(what + " step")
            out = step_call(handle, actions)
            return out[0], build_full(list(out[1:]))

        def reset(handle: Any, env_ids: Any = None) -> tuple[Any, XlaResult]:
            """Reset every env, or those where the ``(E,)`` bool mask ``env_ids`` is True."""
            _refuse_mapped(what + " reset")
            out = reset_call(handle, env_ids)
            return out[0], build_full(list(out[1:]))

        fns = XlaFunctions(handle, recv, send, step)
        fns.reset = reset
        fns.errors = xla_errors
        return fns


@contextlib.contextmanager
def xla_errors() -> Iterator[None]:
    """Raise an env's own error (not JAX's wrapper) when a host call of any batch fails inside jit.

    ``fns.errors()`` is this. The env's exception is raised again, from the JaxRuntimeError.
    """
    jax = _jax()
    with _LOCK:
        _last[0] = None
    try:
        yield
    except jax.errors.JaxRuntimeError as exc:
        with _LOCK:
            error, _last[0] = _last[0], None
        if error is None:
            raise
        raise error.with_traceback(None) from exc


def _has_pool(venv: Any) -> bool:
    """Whether ``venv`` has the async pool (`marl_vec.vec.pool.AsyncPool`, every backend here);
    asked by its calls, since importing the pool here would close an import cycle through base."""
    return callable(getattr(venv, "recv", None)) and callable(getattr(venv, "send", None)) \
        and hasattr(venv, "batch_size")


def _refuse_mapped(what: str) -> None:
    """Refuse a call traced under ``pmap``/``shard_map`` over several devices: each device
    would step the one batch, and the batch would take a step per device."""
    try:
        from jax._src import core  # the axis env is not public; without it, nothing is checked

        sizes = dict(core.get_axis_env().axis_sizes)
    except (ImportError, AttributeError):
        return
    mapped = {str(name): size for name, size in sizes.items() if size > 1}
    if mapped:
        axes = ", ".join(f"{'pmap' if name == '_internal_pmap_axis_name' else name}: {size}"
                         for name, size in mapped.items())
        raise XlaVmapError(f"{what} cannot run under pmap or shard_map over several devices ({axes}): every "
                           f"device would step the same batch of host envs. Call it outside the mapped "
                           f"function (one batch per handle), or give each device a batch of its own")


def _host_call(callback: Callable[..., None], structs: list[Any], what: str,
               mechanism: str) -> Callable[..., Any]:
    """``callback`` as one host call that refuses ``vmap`` and differentiation.

    ``buffer``: ``jax.experimental.buffer_callback`` with a side effect; the callback
    writes its results straight into XLA's output buffers (one copy), and its inputs
    arrive as views (no device_put); the handle, an input and an output of every call,
    orders the calls. ``io_callback``: ``io_callback(ordered=True)``, which also puts the
    inputs on a device and copies the outputs once more (measured: slower).
    """
    jax = _jax()
    from jax.custom_batching import custom_vmap

    if mechanism == "buffer":
        from jax.experimental.buffer_callback import buffer_callback

        def in_place(ctx: Any, out: Any, *args: Any) -> None:
            callback([np.asarray(buffer) for buffer in out], *jax.tree_util.tree_map(np.asarray, args))

        host = buffer_callback(in_place, tuple(structs), has_side_effect=True)
    else:
        from jax.experimental import io_callback

        def returning(*args: Any) -> list[np.ndarray]:
            outs = [np.empty(struct.shape, struct.dtype) for struct in structs]
            callback(outs, *args)
            return outs

        def host(*args: Any) -> Any:
            return io_callback(returning, tuple(structs), *args, ordered=True)

    @custom_vmap
    def call(*args: Any) -> Any:
        return host(*args)

    @call.def_vmap
    def _refuse_vmap(axis_size: int, in_batched: Any, *args: Any) -> Any:
        raise XlaVmapError(
            f"{what} cannot run under jax.vmap: it steps one batch of envs on the host, in order, and "
            f"there is one such batch per handle. Batch envs with num_envs instead, or call it outside vmap "
            f"(vmap over a policy, not over the env)")

    @jax.custom_jvp
    def guarded(*args: Any) -> Any:
        return call(*args)

    @guarded.defjvp
    def _refuse_jvp(primals: Any, tangents: Any) -> Any:
        raise XlaGradError(
            f"{what} cannot be differentiated: the envs run on the host, outside JAX. Differentiate the "
            f"policy on the results instead (jax.lax.stop_gradient on the actions passed to step)")

    return guarded

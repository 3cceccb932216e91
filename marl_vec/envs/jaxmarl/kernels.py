"""The two jitted, vmapped functions of a JaxMARL block: step with autoreset, and reset of some rows.

One idea: what is compiled for a block of the stateful family. The per-env functions are
`marl_vec.envs.jaxmarl.functions.EnvFunctions` (the one kernel, which ``marl_vec.jax``'s
functional batch calls too); here they are vmapped and compiled. For a block of ``k`` envs of one ``jaxmarl.make``
env, `build_kernels` compiles (ahead of time, for exactly these shapes):

- ``step(keys (k, 2), state, actions (k, A))``: per env, ``key, sub = split(key)``,
  then what JaxMARL's own ``step(sub, ...)`` does, written out: split ``sub`` into
  ``k_step, k_reset``, ``step_env(k_step, ...)`` and ``reset(k_reset)``, the reset
  kept where the episode ended. It returns what follows the step (obs, world
  state, avail, mask: the reset ones where the episode ended), the rewards,
  terminated, truncated and episode stats, and apart the step's TRUE last views
  (``step_env``'s), which JaxMARL's ``step`` loses where an episode ended.
  ``keys`` and ``state`` are donated.

  Written out rather than calling ``step`` and, for the last views, ``step_env``
  again (that is still done for an env whose ``step`` is its own, not ``MultiAgentEnv.step``): XLA did not merge the two copies of the step (brax's loops), so MABrax
  ran at half the speed of JaxMARL used directly. Differently written programs may
  round a float one ulp apart (about 1 in 10^5, XLA's fused multiply-adds); with
  XLA's CPU fusion emitters off and no FMA (the tests' flags) the family and
  JaxMARL's ``step`` agree bit for bit.
- ``reset(keys, state, seed_keys, use_seed (k,), rows (k,))``: per env in ``rows``,
  ``key = seed_keys if use_seed else keys``, ``key, k_reset = split(key)``,
  ``reset(k_reset)``; the other rows keep their key and state.

So env ``i`` of any block, on any backend, plays the episodes of its own key
chain: the same seeds and actions give the same episodes.

Compilation uses JAX's persistent cache (``~/.cache/marl_vec/jax`` unless JAX
is configured with a cache directory already), so a second run with the same
shapes loads its functions in about a second.

May import: jax, jaxmarl (lazily), numpy, ``marl_vec.envs.jaxmarl.{functions,views}``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl_vec.envs.jaxmarl.functions import EnvFunctions, has_base_step, normalise
from marl_vec.envs.jaxmarl.views import View

_has_base_step = has_base_step  # the name tests/families/test_jaxmarl_own_step.py imports
__all__ = ["Kernels", "build_kernels", "key_of_seed", "normalise", "use_persistent_cache"]

CACHE_DIR = os.path.join("~", ".cache", "marl_vec", "jax")


def key_of_seed(seed: int) -> np.ndarray:
    """The raw threefry key of an env seed: ``jax.random.PRNGKey(seed)`` for ``0 <= seed < 2**32``
    (larger seeds use both 32-bit words, where JAX without x64 would drop the high one)."""
    seed = int(seed) % 2**64
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32)


def use_persistent_cache() -> str | None:
    """Point JAX's persistent compilation cache at ``~/.cache/marl_vec/jax`` unless it has one; its directory."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return str(current)
    path = os.path.expanduser(CACHE_DIR)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:  # a read-only home: compile every run, say nothing
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    return path


def _stateful_step(fns: EnvFunctions, key: Any, state: Any, actions: Any) -> tuple:
    """`EnvFunctions.step` as the block's step returns it: (key, state, what follows, the true last views)."""
    s = fns.step(key, state, actions)
    return s.key, s.state, (*s.views, s.reward, s.terminated, s.truncated, s.done, s.stats), s.last


@dataclass
class Kernels:
    """The compiled functions of one block, and the shapes they were built for."""

    step: Any
    reset: Any
    state_zeros: Any  # a zero state of the block, to start from
    compile_seconds: float


def build_kernels(view: View, k: int, label: str, stream: Any = None, device: Any = None) -> Kernels:
    """Compile ``step`` and ``reset`` for ``k`` envs of ``view``'s env, saying so on ``stream`` (stderr);
    ``device`` (a ``jax.Device``; None: JAX's default one): where they run and their state lives."""
    import jax
    import jax.numpy as jnp

    fns = EnvFunctions(view)
    cache = use_persistent_cache()
    stream = sys.stderr if stream is None else stream
    step_state = fns.state_struct

    # Placed only off JAX's default device: there the functions are the ones compiled without a device
    # (the same programs, so the same persistent-cache entries and numbers).
    if device is not None and device == jax.devices()[0]:
        device = None
    where_to = {} if device is None else {"sharding": jax.sharding.SingleDeviceSharding(device)}
    batched_state = jax.tree.map(lambda s: jax.ShapeDtypeStruct((k, *s.shape), s.dtype, **where_to), step_state)
    keys = jax.ShapeDtypeStruct((k, 2), jnp.uint32, **where_to)
    act = fns.action_struct((k,))
    actions = jax.ShapeDtypeStruct(act.shape, act.dtype, **where_to)
    flags = jax.ShapeDtypeStruct((k,), jnp.bool_, **where_to)
    where = f" (persistent cache: {cache})" if cache else ""
    print(f"marl_vec: compiling the JaxMARL step and reset of {label} for {k} envs; 5-20 s the first time, "
          f"about 1 s from the cache{where} ...", file=stream, flush=True)
    started = time.perf_counter()
    step = jax.jit(jax.vmap(lambda key, state, actions: _stateful_step(fns, key, state, actions)),
                   donate_argnums=(0, 1)).lower(keys, batched_state, actions).compile()
    reset = jax.jit(jax.vmap(fns.reset_rows), donate_argnums=(0, 1)).lower(
        keys, batched_state, keys, flags, flags).compile()
    seconds = time.perf_counter() - started
    print(f"marl_vec: compiled {label} for {k} envs in {seconds:.1f} s", file=stream, flush=True)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), batched_state)
    if device is not None:
        zeros = jax.device_put(zeros, device)
    return Kernels(step=step, reset=reset, state_zeros=zeros, compile_seconds=seconds)

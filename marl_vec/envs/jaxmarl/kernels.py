"""The two jitted, vmapped functions of a JaxMARL block: step with autoreset, and reset of some rows.

One idea: what runs inside JAX. For a block of ``k`` envs of one ``jaxmarl.make``
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

Reset's state has weak types where step's has none (SMAX's
``last_attacked_enemy``, MPE's ``done``), which would make JAX compile the step
twice; `normalise` gives reset's state step's exact types.

Compilation uses JAX's persistent cache (``~/.cache/marl_vec/jax`` unless JAX
is configured with a cache directory already), so a second run with the same
shapes loads its functions in about a second.

May import: jax, jaxmarl (lazily), numpy, ``marl_vec.envs.jaxmarl.views``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl_vec.envs.jaxmarl.views import View

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


def normalise(state: Any, like: Any) -> Any:
    """``state`` with each leaf of ``like``'s dtype and no weak type (see the module doc)."""
    import jax

    return jax.tree.map(lambda x, ref: jax.lax.convert_element_type(x, ref.dtype), state, like)


@dataclass
class Kernels:
    """The compiled functions of one block, and the shapes they were built for."""

    step: Any
    reset: Any
    state_zeros: Any  # a zero state of the block, to start from
    compile_seconds: float


def _has_base_step(env: Any) -> bool:
    """Whether ``env``'s ``step`` is JaxMARL's ``MultiAgentEnv.step`` (step_env, reset, select), which the
    block's step writes out; an env with a step of its own has it called as it is."""
    from jaxmarl.environments.multi_agent_env import MultiAgentEnv

    return getattr(type(env), "step", None) is MultiAgentEnv.step


def _actions_dict(view: View, actions: Any) -> dict[str, Any]:
    return view.actions_dict(actions)


def _action_struct(view: View, lead: tuple[int, ...]) -> Any:
    """Discrete: int32 ``(*lead, A)``; Box: float32 ``(*lead, A, width)``."""
    import jax
    import jax.numpy as jnp

    n_agents = len(view.agents)
    if view.action_dims is None:
        return jax.ShapeDtypeStruct((*lead, n_agents), jnp.int32)
    return jax.ShapeDtypeStruct((*lead, n_agents, max(view.action_dims)), jnp.float32)


def build_kernels(view: View, k: int, label: str, stream: Any = None, device: Any = None) -> Kernels:
    """Compile ``step`` and ``reset`` for ``k`` envs of ``view``'s env, saying so on ``stream`` (stderr);
    ``device`` (a ``jax.Device``; None: JAX's default one): where they run and their state lives."""
    import jax
    import jax.numpy as jnp

    env = view.env
    cache = use_persistent_cache()
    stream = sys.stderr if stream is None else stream

    # Step's state types, from one abstract step of an abstract reset.
    key_struct = jax.ShapeDtypeStruct((2,), jnp.uint32)
    act_struct = _action_struct(view, ())
    _, reset_state = jax.eval_shape(env.reset, key_struct)
    step_state = jax.eval_shape(lambda key, s, a: env.step_env(key, s, _actions_dict(view, a))[1],
                                key_struct, reset_state, act_struct)

    def reset_one(key: Any) -> tuple[Any, tuple]:
        obs, state = env.reset(key)
        state = normalise(state, step_state)
        return state, view.outputs(obs, state)

    base_step = _has_base_step(env)

    def step_one(key: Any, state: Any, actions: Any) -> tuple:
        key, sub = jax.random.split(key)
        acts = _actions_dict(view, actions)
        if not base_step:  # an env with a step of its own: call it, and step_env again for the last views
            obs_next, following, rewards, dones, _ = env.step(sub, state, acts)
            obs_last, after, _, _, _ = env.step_env(jax.random.split(sub)[0], state, acts)
            return _step_outputs(key, following, after, obs_next, obs_last, rewards, dones)
        # JaxMARL's MultiAgentEnv.step, written out (no env of jaxmarl 0.2.0 overrides it):
        # step_env on the first half of the key, reset on the second, the reset kept where the
        # episode ended. Written out, step_env's outputs (the TRUE last views, which step
        # replaces) come from the one physics step. Calling step and step_env apart computed
        # it twice: XLA does not merge the two (brax's loops), and MABrax ran at half speed.
        k_step, k_reset = jax.random.split(sub)
        obs_last, after, rewards, dones, _ = env.step_env(k_step, state, acts)
        obs_reset, state_reset = env.reset(k_reset)
        done_all = dones["__all__"]
        following = jax.tree.map(lambda r, s: jax.lax.select(done_all, r, s), state_reset, after)
        obs_next = jax.tree.map(lambda r, s: jax.lax.select(done_all, r, s), obs_reset, obs_last)
        return _step_outputs(key, following, after, obs_next, obs_last, rewards, dones)

    def _step_outputs(key: Any, following: Any, after: Any, obs_next: Any, obs_last: Any, rewards: Any,
                      dones: Any) -> tuple:
        following = normalise(following, step_state)
        after = normalise(after, step_state)
        terminated, truncated = view.flags(after, dones)
        done = jnp.asarray(dones["__all__"])
        out = (*view.outputs(obs_next, following), view.rewards(rewards), terminated, truncated, done,
               view.episode_stats(after))
        return key, following, out, view.outputs(obs_last, after)

    def reset_rows_one(key: Any, state: Any, seed_key: Any, use_seed: Any, row: Any) -> tuple:
        key2, k_reset = jax.random.split(jnp.where(use_seed, seed_key, key))
        new_state, out = reset_one(k_reset)
        state = jax.tree.map(lambda r, s: jnp.where(row, r, s), new_state, state)
        return jnp.where(row, key2, key), state, out

    # Placed only off JAX's default device: there the functions are the ones compiled without a device
    # (the same programs, so the same persistent-cache entries and numbers).
    if device is not None and device == jax.devices()[0]:
        device = None
    where_to = {} if device is None else {"sharding": jax.sharding.SingleDeviceSharding(device)}
    batched_state = jax.tree.map(lambda s: jax.ShapeDtypeStruct((k, *s.shape), s.dtype, **where_to), step_state)
    keys = jax.ShapeDtypeStruct((k, 2), jnp.uint32, **where_to)
    act = _action_struct(view, (k,))
    actions = jax.ShapeDtypeStruct(act.shape, act.dtype, **where_to)
    flags = jax.ShapeDtypeStruct((k,), jnp.bool_, **where_to)
    where = f" (persistent cache: {cache})" if cache else ""
    print(f"marl_vec: compiling the JaxMARL step and reset of {label} for {k} envs; 5-20 s the first time, "
          f"about 1 s from the cache{where} ...", file=stream, flush=True)
    started = time.perf_counter()
    step = jax.jit(jax.vmap(step_one), donate_argnums=(0, 1)).lower(keys, batched_state, actions).compile()
    reset = jax.jit(jax.vmap(reset_rows_one), donate_argnums=(0, 1)).lower(
        keys, batched_state, keys, flags, flags).compile()
    seconds = time.perf_counter() - started
    print(f"marl_vec: compiled {label} for {k} envs in {seconds:.1f} s", file=stream, flush=True)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), batched_state)
    if device is not None:
        zeros = jax.device_put(zeros, device)
    return Kernels(step=step, reset=reset, state_zeros=zeros, compile_seconds=seconds)

"""The autoreset modes of the functional batch: one step of E envs in each mode, before the bookkeeping.

One idea: what each mode does with an env whose episode ended. Every mode is
written with the one kernel's per-env functions
(`marl_vec.envs.jaxmarl.functions.EnvFunctions`), vmapped over the env axis,
and every mode walks the same key chain per env (``key, k_step, k_reset =
split(key)`` at each step), so that they differ only where an episode ended:

- ``same_step``: `EnvFunctions.step` itself, the stateful family's step: the
  reset from ``k_reset`` where the episode ended, the true last views apart.
- optimistic ``same_step`` (``resets_per_step=k``): the step without its reset,
  then ``k`` resets, from the ``k_reset`` keys of the first ``k`` envs that ended
  (by index); the ``r``-th env that ended gets reset ``r % k``. So where at most
  ``k`` envs end at once, every env gets its own reset and the episodes equal
  ``same_step``'s bit for bit; where more end, some share a reset (Craftax's
  optimistic resets).
- ``fast``: `EnvFunctions.step` resetting to the env's cached first reset (Brax,
  EvoRL FAST): no reset is computed, and every episode starts the same.
- ``next_step``: a step after an episode's end resets (from that step's
  ``k_reset``) instead of stepping: zero reward, False flags, ``autoreset`` True.
- ``one_episode`` (and ``disabled``, the same inside jit): a finished env is
  frozen: its state stays, it repeats its last views and flags with zero reward.

A time limit (``cut``) ends an episode as truncated in every mode.

May import: jax, ``marl_vec.envs.jaxmarl.functions``.

Examples:
    >>> MODES
    ('same_step', 'next_step', 'disabled', 'one_episode', 'fast')
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from marl_vec.envs.jaxmarl.functions import EnvFunctions, select

MODES = ("same_step", "next_step", "disabled", "one_episode", "fast")


class Moved(NamedTuple):
    """One step of E envs in some mode, before the episode bookkeeping (every leaf (E, ...))."""

    key: Any
    env_state: Any
    views: tuple  # what follows the step: (obs, world or None, avail or None, mask or None)
    last: tuple  # the true last views (final_*)
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    stats: Any
    autoreset: Any  # (E,) the step was a reset step (next_step)
    counted: Any  # (E,) the step counts in the episode (not a reset step, not a frozen env)
    frozen: Any  # (E,) one_episode: the env had finished before this step


def apply_cut(terminated: Any, truncated: Any, done: Any, cut: Any) -> tuple[Any, Any, Any]:
    """A time limit reached (``cut`` (E,)): the episode ends, truncated for every agent not terminated."""
    if cut is None:
        return terminated, truncated, done
    return terminated, truncated | (cut[:, None] & ~terminated), done | cut


def _vmapped(fn: Any) -> Any:
    return jax.vmap(fn)


def same_step(fns: EnvFunctions, st: Any, actions: Any, cut: Any, fast: bool) -> Moved:
    """``same_step`` and ``fast``: the stateful family's step, vmapped (see the module doc)."""
    first = st.first if fast else None
    s = _vmapped(lambda k, e, a, c, f: fns.step(k, e, a, c, f))(st.key, st.env_state, actions, cut, first)
    terminated, truncated, done = apply_cut(s.terminated, s.truncated, s.done, cut)
    no = jnp.zeros_like(done)
    return Moved(s.key, s.state, s.views, s.last, s.reward, terminated, truncated, done, s.stats, no, ~no, no)


def optimistic(fns: EnvFunctions, st: Any, actions: Any, cut: Any, k: int) -> Moved:
    """``same_step`` with ``k`` resets per step (see the module doc)."""
    key, k_step, k_reset = _vmapped(fns.split)(st.key)
    obs_last, after, rewards, dones = _vmapped(fns.step_raw)(k_step, st.env_state, actions)
    reward, terminated, truncated, done_env, stats = _vmapped(fns.step_outputs)(after, rewards, dones)
    terminated, truncated, done = apply_cut(terminated, truncated, done_env, cut)
    ended = dones["__all__"] if cut is None else dones["__all__"] | cut
    first_k = jnp.nonzero(ended, size=k, fill_value=0)[0]
    obs_reset, state_reset = _vmapped(fns.reset_raw)(k_reset[first_k])
    source = (jnp.cumsum(ended) - 1) % k
    obs_reset, state_reset = jax.tree.map(lambda x: x[source], (obs_reset, state_reset))
    following = _vmapped(select)(ended, state_reset, after)
    obs_next = _vmapped(select)(ended, obs_reset, obs_last)
    views = _vmapped(fns.outputs)(obs_next, following)
    last = _vmapped(fns.outputs)(obs_last, after)
    no = jnp.zeros_like(done)
    return Moved(key, following, views, last, reward, terminated, truncated, done, stats, no, ~no, no)


def next_step(fns: EnvFunctions, st: Any, actions: Any, cut: Any) -> Moved:
    """``next_step``: envs whose episode ended at the last step reset now (see the module doc)."""
    key, k_step, k_reset = _vmapped(fns.split)(st.key)
    obs_last, after, rewards, dones = _vmapped(fns.step_raw)(k_step, st.env_state, actions)
    obs_reset, state_reset = _vmapped(fns.reset_raw)(k_reset)
    resets = st.ended
    following = _vmapped(select)(resets, state_reset, after)
    obs_next = _vmapped(select)(resets, obs_reset, obs_last)
    views = _vmapped(fns.outputs)(obs_next, following)
    reward, terminated, truncated, done, stats = _vmapped(fns.step_outputs)(after, rewards, dones)
    terminated, truncated, done = apply_cut(terminated, truncated, done, cut)
    stepped = ~resets
    reward = jnp.where(stepped[:, None], reward, 0.0)
    terminated, truncated = terminated & stepped[:, None], truncated & stepped[:, None]
    done = done & stepped
    return Moved(key, following, views, views, reward, terminated, truncated, done, stats, resets, stepped,
                 jnp.zeros_like(done))


def one_episode(fns: EnvFunctions, st: Any, actions: Any, cut: Any) -> Moved:
    """``one_episode`` / ``disabled``: a finished env is frozen (see the module doc)."""
    key, k_step, _ = _vmapped(fns.split)(st.key)
    obs_last, after, rewards, dones = _vmapped(fns.step_raw)(k_step, st.env_state, actions)
    views = _vmapped(fns.outputs)(obs_last, after)
    reward, terminated, truncated, done, stats = _vmapped(fns.step_outputs)(after, rewards, dones)
    terminated, truncated, done = apply_cut(terminated, truncated, done, cut)
    frozen = st.ended
    old_views, old_terminated, old_truncated = st.last
    env_state = _vmapped(select)(frozen, st.env_state, after)
    views = _vmapped(select)(frozen, old_views, views)
    terminated = jnp.where(frozen[:, None], old_terminated, terminated)
    truncated = jnp.where(frozen[:, None], old_truncated, truncated)
    reward = jnp.where(frozen[:, None], 0.0, reward)
    done = done | frozen
    no = jnp.zeros_like(done)
    return Moved(key, env_state, views, views, reward, terminated, truncated, done, stats, no, ~frozen, frozen)

"""`batch`: a functional batch of E JaxMARL envs, with pure ``reset(key)`` and ``step(state, actions)``.

One idea: the batch a trainer calls inside ``jax.jit`` and ``jax.lax.scan``.
`Batch.reset` and `Batch.step` are pure functions: no Python state changes,
the PRNG keys travel in the returned `BatchState`, and the `TimeStep` has the
same leaves at every step. Its shapes, dtypes and padding are those of the
stateful family's ``EnvSpec`` (``batch.spec``), read from the same model
(`marl_vec.envs.jaxmarl.model`), and its step is the same kernel
(`marl_vec.envs.jaxmarl.functions`): ``reset(jax.random.PRNGKey(s))`` gives env
``i`` the episodes of env ``i`` of a stateful batch with ``env_seed=s`` (see
``marl_vec.jax.keys``). The modes are in ``marl_vec.jax.modes``; the episode
bookkeeping (returns, lengths, stats, a time limit, a discounted return) is here.

May import: jax, numpy, ``marl_vec.core.spec``, ``marl_vec.envs.jaxmarl.{functions,kernels,model}``,
``marl_vec.jax.{keys,modes,types}``.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> b = batch("jax_mpe/simple_spread", num_envs=4)
    >>> state, ts = jax.jit(b.reset)(jax.random.PRNGKey(0))
    >>> state, ts = jax.jit(b.step)(state, jnp.zeros((4, 3), jnp.int32))
    >>> ts.obs.shape, ts.reward.shape, ts.done.shape
    ((4, 3, 18), (4, 3), (4,))
"""

from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from marl_vec.core.spec import EnvSpec
from marl_vec.envs.jaxmarl.functions import EnvFunctions
from marl_vec.envs.jaxmarl.kernels import use_persistent_cache
from marl_vec.envs.jaxmarl.model import model_of
from marl_vec.jax import modes
from marl_vec.jax.keys import env_keys
from marl_vec.jax.types import BatchState, EpisodeStats, TimeStep


class Batch:
    """E envs of one JaxMARL id as pure functions; made by `batch` (see its arguments).

    Attributes:
        env_id: our id (``smax/3m``, ``jax_mpe/simple_spread``, a ``jaxmarl.make`` id).
        num_envs: E.
        offset: the global index of env 0.
        kwargs: the ``jaxmarl.make`` keyword arguments.
        autoreset: the mode (``marl_vec.jax.modes``).
        spec: the stateful family's ``EnvSpec`` of this id: shapes, dtypes, padding.
        agents: the agent ids, in the order of the agent axis.
        env: the ``jaxmarl.make`` env.
    """

    def __init__(self, env_id: str, num_envs: int, autoreset: str, time_limit: int | None, gamma: float | None,
                 resets_per_step: int | None, offset: int, kwargs: dict[str, Any]):
        model = model_of(env_id, kwargs)
        if model.device is not None:
            raise ValueError(f"marl_vec.jax.batch({env_id!r}): device= is the stateful family's option; a functional "
                             "batch runs where the caller's jit puts it (jax.jit(..., device=...), jax.device_put)")
        self.env_id, self.num_envs, self.autoreset = env_id, num_envs, autoreset
        self.time_limit, self.gamma, self.resets_per_step, self.offset = time_limit, gamma, resets_per_step, offset
        self.kwargs = dict(kwargs)  # jaxmarl.make's, for a shard's batch of the same envs (marl_vec.jax.shard)
        self.spec: EnvSpec = model.spec
        self.agents = model.spec.agents
        self.env = model.env
        self.view = model.view
        self.fns = EnvFunctions(model.view)
        if not self.fns.base_step and (autoreset != "same_step" or time_limit is not None or resets_per_step):
            raise ValueError(f"marl_vec.jax.batch({env_id!r}): {type(self.env).__name__} has a step of its own "
                             "(not MultiAgentEnv.step): only autoreset='same_step', without time_limit and "
                             "resets_per_step, is served for it")
        self._fixed_avail = None
        if self.spec.discrete and not self.view.has_avail:
            self._fixed_avail = jnp.asarray(self.view.fixed_avail())
        use_persistent_cache()

    def __repr__(self) -> str:
        extra = "".join(f", {name}={value!r}" for name, value in
                        (("time_limit", self.time_limit), ("gamma", self.gamma),
                         ("resets_per_step", self.resets_per_step)) if value is not None)
        return f"marl_vec.jax.batch({self.env_id!r}, num_envs={self.num_envs}, autoreset={self.autoreset!r}{extra})"

    # -- the pure functions ----------------------------------------------------------

    def reset(self, key: Any) -> tuple[BatchState, TimeStep]:
        """Every env reset: env ``i`` from the key ``env_keys(key, E, offset)[i]`` (the stateful
        family's ``env_seed`` chain). Returns ``(state, ts)``; ``ts`` has zero rewards and False flags."""
        return self.reset_envs(env_keys(key, self.num_envs, self.offset))

    def reset_envs(self, keys: Any) -> tuple[BatchState, TimeStep]:
        """`reset` from each env's own key, ``keys`` (E, 2) uint32 (``env_keys``' output): for a
        shard of a bigger batch, whose envs' global indices are known only inside ``shard_map``."""
        fns = self.fns
        keys, k_reset = jax.vmap(lambda k: tuple(jax.random.split(k)))(keys)
        obs, env_state = jax.vmap(fns.reset_raw)(k_reset)
        views = jax.vmap(fns.outputs)(obs, env_state)
        e, a = self.num_envs, self.spec.n_agents
        flags = jnp.zeros((e, a), bool)
        last = (views, flags, flags) if self.autoreset in ("one_episode", "disabled") else None
        state = BatchState(key=keys, env_state=env_state, length=jnp.zeros(e, jnp.int32),
                           returns=jnp.zeros((e, a), jnp.float32),
                           discounted=None if self.gamma is None else jnp.zeros((e, a), jnp.float32),
                           ended=jnp.zeros(e, bool), last=last,
                           first=(obs, env_state) if self.autoreset == "fast" else None)
        no = jnp.zeros(e, bool)
        return state, self._timestep(views, views, jnp.zeros((e, a), jnp.float32), flags, flags, no, no,
                                     self._episode(state.returns, state.returns, state.length, None, no,
                                                   state.discounted))

    def step(self, state: BatchState, actions: Any) -> tuple[BatchState, TimeStep]:
        """One step of every env with ``actions`` (Discrete: (E, A) ints; Box: (E, A, width) floats,
        the spec's padded width). Returns ``(state, ts)``. Actions are not range-checked inside jit
        (JaxMARL's envs clip or index them as they do when used directly)."""
        actions = self._actions(actions)
        cut = None if self.time_limit is None else state.length + 1 >= self.time_limit
        mode = self.autoreset
        if mode in ("same_step", "fast") and not self.resets_per_step:
            moved = modes.same_step(self.fns, state, actions, cut, fast=mode == "fast")
        elif mode == "same_step":
            moved = modes.optimistic(self.fns, state, actions, cut, self.resets_per_step)
        elif mode == "next_step":
            moved = modes.next_step(self.fns, state, actions, cut)
        else:
            moved = modes.one_episode(self.fns, state, actions, cut)
        counted = moved.counted
        length = state.length + counted.astype(jnp.int32)
        returns = state.returns + moved.reward
        discounted = state.discounted
        if discounted is not None:
            weight = jnp.power(jnp.float32(self.gamma), state.length.astype(jnp.float32))
            discounted = discounted + weight[:, None] * moved.reward
        valid = moved.done & ~moved.frozen
        episode = self._episode(jnp.mean(returns, axis=1), returns, length, moved.stats, valid, discounted)
        # The episode that ended starts afresh (a frozen one_episode env: its numbers were reported once).
        keep = ~moved.done
        new = BatchState(
            key=moved.key, env_state=moved.env_state,
            length=jnp.where(keep, length, 0), returns=jnp.where(keep[:, None], returns, 0.0),
            discounted=None if discounted is None else jnp.where(keep[:, None], discounted, 0.0),
            ended=moved.done,
            last=(moved.views, moved.terminated, moved.truncated) if state.last is not None else None,
            first=state.first)
        ts = self._timestep(moved.views, moved.last, moved.reward, moved.terminated, moved.truncated, moved.done,
                            moved.autoreset, episode)
        return new, ts

    # -- pieces -------------------------------------------------------------------

    def _actions(self, actions: Any) -> Any:
        """Actions as the kernel takes them (int32 / float32), their shape checked (at trace time)."""
        spec, e = self.spec, self.num_envs
        want = (e, spec.n_agents) if spec.discrete else (e, spec.n_agents, *spec.action_shape)
        shape = tuple(np.shape(actions))
        if shape != want:
            kind = "ints (E, A)" if spec.discrete else "floats (E, A, *action_shape)"
            raise ValueError(f"{self!r}.step: actions of shape {shape}; expected {want}: {kind}")
        return jnp.asarray(actions, jnp.int32 if spec.discrete else jnp.float32)

    def _episode(self, team: Any, agents: Any, length: Any, stats: Any, valid: Any, discounted: Any) -> EpisodeStats:
        names = self.spec.stats
        if stats is None:
            stats = jnp.zeros((self.num_envs, len(names)), jnp.float32)
        if team.ndim == 2:
            team = jnp.mean(team, axis=1)
        return EpisodeStats(team_return=team, agent_returns=agents, length=length,
                            stats={name: stats[:, i] for i, name in enumerate(names)},
                            discounted_return=discounted, valid=valid)

    def _fields(self, views: tuple) -> tuple[Any, Any, Any, Any]:
        """(obs, state, avail, mask) of E envs in the spec's layout."""
        obs, world, avail, mask = views
        e, a = self.num_envs, self.spec.n_agents
        state = obs.reshape(e, -1) if world is None else world
        if avail is None and self._fixed_avail is not None:
            avail = jnp.broadcast_to(self._fixed_avail, (e, *self._fixed_avail.shape))
        if mask is None:
            mask = jnp.ones((e, a), bool)
        return obs, state, avail, mask

    def _timestep(self, views: tuple, last: tuple, reward: Any, terminated: Any, truncated: Any, done: Any,
                  autoreset: Any, episode: EpisodeStats) -> TimeStep:
        obs, state, avail, mask = self._fields(views)
        final_obs, final_state, final_avail, final_mask = self._fields(last)
        return TimeStep(obs=obs, state=state, avail_actions=avail, agent_mask=mask, acting=mask, reward=reward,
                        terminated=terminated, truncated=truncated, done=done, final_obs=final_obs,
                        final_state=final_state, final_avail_actions=final_avail, final_agent_mask=final_mask,
                        autoreset=autoreset, episode=episode)


def _positive_int(name: str, value: Any, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"marl_vec.jax.batch: {name}={value!r}; allowed: a positive int"
                         + (" or None" if allow_none else ""))
    return int(value)


def batch(env_id: str, num_envs: int, autoreset: str = "same_step", *, time_limit: int | None = None,
          gamma: float | None = None, resets_per_step: int | None = None, offset: int = 0, **kwargs: Any) -> Batch:
    """A functional batch of ``num_envs`` JaxMARL envs of ``env_id`` (the stateful family's ids:
    ``smax/3m``, ``jax_mpe/simple_spread``, ``hanabi``, ...; ``kwargs`` go to ``jaxmarl.make``).

    Args:
        env_id: a JaxMARL id the ``jaxmarl`` family serves (`marl_vec.envs.jaxmarl.catalog`).
        num_envs: E, the leading axis of every leaf.
        autoreset: ``same_step`` (default), ``next_step``, ``one_episode`` (``disabled`` is the same
            inside jit: a finished env is frozen, it cannot raise) or ``fast`` (``marl_vec.jax.modes``).
        time_limit: end every episode at this many steps, as truncated (apart from the env's own limit).
        gamma: also keep each agent's discounted return, ``EpisodeStats.discounted_return``.
        resets_per_step: ``same_step`` only: compute this many resets per step instead of one per env
            (optimistic resets; for envs whose reset is costly).
        offset: the global index of env 0 (its key: ``marl_vec.jax.keys``); a shard of a bigger batch.

    Examples:
        >>> import jax
        >>> b = batch("smax/3m", num_envs=2, autoreset="next_step", time_limit=50)
        >>> state, ts = b.reset(jax.random.PRNGKey(0))
        >>> ts.avail_actions.shape, b.spec.stats
        ((2, 3, 8), ('battle_won', 'dead_allies', 'dead_enemies'))
    """
    num_envs = _positive_int("num_envs", num_envs, allow_none=False)
    if autoreset not in modes.MODES:
        raise ValueError(f"marl_vec.jax.batch: unknown autoreset mode {autoreset!r}; allowed: {', '.join(modes.MODES)}")
    time_limit = _positive_int("time_limit", time_limit)
    resets_per_step = _positive_int("resets_per_step", resets_per_step)
    if resets_per_step is not None:
        if autoreset != "same_step":
            raise ValueError(f"marl_vec.jax.batch: resets_per_step is an option of autoreset='same_step' "
                             f"(optimistic resets), not of {autoreset!r}")
        if resets_per_step > num_envs:
            raise ValueError(f"marl_vec.jax.batch: resets_per_step={resets_per_step} is more than num_envs="
                             f"{num_envs}; allowed: 1 to {num_envs}")
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, numbers.Real)
                              or not 0.0 < float(gamma) <= 1.0):
        raise ValueError(f"marl_vec.jax.batch: gamma={gamma!r}; allowed: a float in (0, 1] or None")
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral) or offset < 0:
        raise ValueError(f"marl_vec.jax.batch: offset={offset!r}; allowed: an int >= 0")
    return Batch(env_id, num_envs, autoreset, time_limit, None if gamma is None else float(gamma),
                 resets_per_step, int(offset), kwargs)

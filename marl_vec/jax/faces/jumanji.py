"""The Jumanji / Mava face: a `marl_vec.jax.batch` as a ``jumanji.Environment`` whose steps are Jumanji's ``TimeStep``.

One idea: what Jumanji's wrappers and Mava's systems read, from the batch's own
numbers. `jumanji_env` returns a `JumanjiLike`, a real ``jumanji.env.Environment``
(Jumanji's ``VmapWrapper`` and ``AutoResetWrapper`` take it), whose ``reset(key)``
and ``step(state, action)`` return ``(state, jumanji.types.TimeStep)``:

- ``step_type``: ``FIRST`` at a reset (and at a ``next_step`` reset step), ``LAST``
  where the episode ended, else ``MID`` (int8, Jumanji's ``StepType``);
- ``reward`` (A,) float32; ``discount`` (A,) float32: 0 for an agent that
  TERMINATED, 1 otherwise, so also 1 where the episode was truncated (a time limit):
  a trainer bootstraps there (Mava's JaxMARL wrapper sets 0 on both);
- ``observation``: Mava's ``Observation`` (``agents_view`` (A, *obs), ``action_mask``
  (A, n) bool, ``step_count`` (A,) int32: the steps of the episode this observation is
  in), or ``ObservationGlobalState`` (with ``global_state`` (A, *state), the world
  state for each agent) with ``global_state=True``;
- ``extras``: ``next_obs`` (Jumanji's key) and ``real_next_obs`` (Mava's), the TRUE
  next observation (before any reset: the episode's last one where it ended);
  ``episode_metrics`` as Mava's ``RecordEpisodeMetrics`` keeps them (``episode_return``:
  the mean over agents of the return, ``episode_length``, both of the last episode
  that ended, and ``is_terminal_step``); ``env_metrics``: the family stats of the
  episode (SMAX: ``battle_won``, ..., and Mava's ``won_episode``); ``terminated`` and
  ``truncated`` (A,) bool apart.

``num_envs=None`` gives ONE env (leaves without the env axis, as Mava's and Jumanji's
envs are written, to be vmapped: ``jax.vmap(env.step)``); ``num_envs=E`` gives leaves
(E, ...). Either way the numbers are those of ``batch(id, E)``: an unbatched env is a
batch of one, and vmapping it over ``env_keys(key, E)`` plays the batch's envs.

May import: jax, jumanji, numpy, ``marl_vec.envs.extras``, ``marl_vec.jax.{batch,types}``.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> env = jumanji_env("switch_riddle", num_envs=4)
    >>> state, ts = env.reset(jax.random.PRNGKey(0))
    >>> state, ts = env.step(state, jnp.zeros((4, 3), jnp.int32))
    >>> ts.observation.agents_view.shape, ts.discount.shape, sorted(ts.extras)[:3]
    ((4, 3, 2), (4, 3), ['env_metrics', 'episode_metrics', 'next_obs'])
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from marl_vec.envs.extras import require

# Without Jumanji: an error naming the extra, not a bare ModuleNotFoundError.
require("jumanji", "jumanji", "the Jumanji / Mava face (marl_vec.jax.faces.jumanji)")

from jumanji import specs  # noqa: E402
from jumanji.env import Environment  # noqa: E402
from jumanji.types import StepType  # noqa: E402
from jumanji.types import TimeStep as JumanjiTimeStep  # noqa: E402

from marl_vec.jax.batch import Batch, batch  # noqa: E402
from marl_vec.jax.types import BatchState, TimeStep  # noqa: E402

# Modes whose observation at an episode's end is the episode's last one (no reset in that step).
_NO_SAME_STEP_RESET = ("next_step", "one_episode", "disabled")


class Observation(NamedTuple):
    """Mava's ``mava.types.Observation`` (its fields and order, without its optional ``graph``)."""

    agents_view: Any  # (A, *obs_shape)
    action_mask: Any  # (A, n_actions) bool
    step_count: Any = None  # (A,) int32


class ObservationGlobalState(NamedTuple):
    """Mava's ``mava.types.ObservationGlobalState``: ``Observation`` with the world state for each agent."""

    agents_view: Any  # (A, *obs_shape)
    action_mask: Any  # (A, n_actions) bool
    global_state: Any  # (A, *state_shape)
    step_count: Any = None  # (A,) int32


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class JumanjiState:
    """The face's state: the batch's, and the last ended episode's numbers (Mava's ``RecordEpisodeMetrics``).

    Attributes:
        key: each env's PRNG key (Jumanji's ``AutoResetWrapper`` reads ``state.key``); (E, 2), or (2,)
            for one env.
        batch: the `BatchState`.
        episode_return: (E,) float32, the mean over agents of the return of the last episode that ended.
        episode_length: (E,) int32, its length.
    """

    key: Any
    batch: BatchState
    episode_return: Any
    episode_length: Any


class JumanjiLike(Environment):
    """A `Batch` as a ``jumanji.Environment``; made by `jumanji_env` (see the module doc).

    Attributes:
        batch: the functional batch it wraps (E = 1 for one env).
        num_envs: E, or None for one env (leaves without the env axis).
        num_agents, time_limit, action_dim: what Mava's ``MarlEnv`` declares (``time_limit``: the
            batch's, else the env's own episode limit, else None).
        agents: the agent ids, in the order of the agent axis.
    """

    def __init__(self, source: Batch, one_env: bool, global_state: bool):
        self.batch, self.one_env, self.global_state = source, one_env, global_state
        spec = source.spec
        self.num_envs = None if one_env else source.num_envs
        self.agents = list(spec.agents)
        self.num_agents = spec.n_agents
        self.time_limit = source.time_limit if source.time_limit is not None else spec.episode_limit
        self.action_dim = spec.n_actions if spec.discrete else int(np.prod(spec.action_shape))
        self._resets_in_step = source.autoreset not in _NO_SAME_STEP_RESET
        super().__init__()  # Jumanji's: builds the specs once, outside jit

    def __repr__(self) -> str:
        return f"JumanjiLike({self.batch!r}{', one env' if self.one_env else ''})"

    # -- Jumanji's API ------------------------------------------------------------

    def reset(self, key: Any) -> tuple[JumanjiState, JumanjiTimeStep]:
        """Every env reset (the batch's ``reset(key)``); the TimeStep is ``FIRST``."""
        bs, ts = self.batch.reset(key)
        e = self.batch.num_envs
        state = JumanjiState(bs.key, bs, jnp.zeros(e, jnp.float32), jnp.zeros(e, jnp.int32))
        out = self._timestep(ts, bs, state, jnp.ones(e, bool))
        return self._unbatched(state), self._unbatched(out)

    def step(self, state: JumanjiState, action: Any) -> tuple[JumanjiState, JumanjiTimeStep]:
        """The batch's ``step`` (its autoreset mode), as Jumanji's TimeStep: see the module doc.

        ``action``: (E, A) ints or (E, A, width) floats, as the batch takes them; (A,) / (A, width)
        for one env.
        """
        if self.one_env:
            action = self._one_action(action)
            state = jax.tree.map(lambda x: x[None], state)
        bs, ts = self.batch.step(state.batch, action)
        ended = ts.episode.valid
        new = JumanjiState(bs.key, bs, jnp.where(ended, ts.episode.team_return, state.episode_return),
                           jnp.where(ended, ts.episode.length, state.episode_length))
        out = self._timestep(ts, bs, new, ts.autoreset)
        return self._unbatched(new), self._unbatched(out)

    @cached_property
    def observation_spec(self) -> specs.Spec:
        """Mava's observation spec, for ONE env (as Jumanji's ``VmapWrapper`` says of its specs)."""
        spec, a = self.batch.spec, self.num_agents
        fields = {
            "agents_view": specs.Array((a, *spec.obs_shape), spec.obs_dtype, "agents_view"),
            "action_mask": specs.BoundedArray((a, *self._mask_shape()), bool, False, True, "action_mask"),
            "step_count": specs.BoundedArray((a,), jnp.int32, 0, np.iinfo(np.int32).max if self.time_limit is None
                                             else self.time_limit, "step_count"),
        }
        if self.global_state:
            fields["global_state"] = specs.Array((a, *spec.state_shape), spec.state_dtype, "global_state")
            return specs.Spec(ObservationGlobalState, "ObservationSpec", **fields)
        return specs.Spec(Observation, "ObservationSpec", **fields)

    @cached_property
    def action_spec(self) -> specs.Spec:
        """(A,) ints below ``n_actions`` (Jumanji's ``MultiDiscreteArray``), or (A, width) bounded floats."""
        spec = self.batch.spec
        if spec.discrete:
            return specs.MultiDiscreteArray(num_values=jnp.full((self.num_agents,), spec.n_actions, jnp.int32),
                                            name="action")
        low, high = spec.action.agent_bounds(self.num_agents)
        return specs.BoundedArray((self.num_agents, *spec.action_shape), jnp.float32, low, high, "action")

    @cached_property
    def reward_spec(self) -> specs.Array:
        return specs.Array((self.num_agents,), jnp.float32, "reward")

    @cached_property
    def discount_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray((self.num_agents,), jnp.float32, 0.0, 1.0, "discount")

    # -- pieces -------------------------------------------------------------------

    def _mask_shape(self) -> tuple[int, ...]:
        spec = self.batch.spec
        return (spec.n_actions,) if spec.discrete else (self.action_dim,)

    def _one_action(self, action: Any) -> Any:
        spec = self.batch.spec
        want = (self.num_agents,) if spec.discrete else (self.num_agents, *spec.action_shape)
        if tuple(np.shape(action)) != want:
            kind = "ints (A,)" if spec.discrete else "floats (A, *action_shape)"
            raise ValueError(f"{self!r}.step: action of shape {tuple(np.shape(action))}; expected {want}: {kind} "
                             "for one env (vmap the env for a batch, or make it with num_envs=E)")
        return jnp.asarray(action)[None]

    def _unbatched(self, tree: Any) -> Any:
        return jax.tree.map(lambda x: x[0], tree) if self.one_env else tree

    def _observation(self, obs: Any, world: Any, avail: Any, steps: Any) -> Any:
        e, a = self.batch.num_envs, self.num_agents
        mask = jnp.ones((e, a, *self._mask_shape()), bool) if avail is None else avail
        count = jnp.broadcast_to(steps[:, None], (e, a)).astype(jnp.int32)
        if self.global_state:
            tiled = jnp.broadcast_to(world[:, None], (e, a, *world.shape[1:]))
            return ObservationGlobalState(obs, mask, tiled, count)
        return Observation(obs, mask, count)

    def _timestep(self, ts: TimeStep, bs: BatchState, state: JumanjiState, first: Any) -> JumanjiTimeStep:
        """Jumanji's TimeStep of E envs from the batch's (``first``: (E,) the step is a reset)."""
        done = ts.done
        # The steps of the episode each observation is in: the last one's where it ended (held in
        # state.episode_length, also over one_episode's frozen steps), the running count else.
        final_count = jnp.where(done, state.episode_length, bs.length)
        count = bs.length if self._resets_in_step else final_count
        step_type = jnp.where(done, StepType.LAST, jnp.where(first, StepType.FIRST, StepType.MID)).astype(jnp.int8)
        next_obs = self._observation(ts.final_obs, ts.final_state, ts.final_avail_actions, final_count)
        env_metrics = dict(ts.episode.stats)
        if "battle_won" in env_metrics:  # Mava's SMAX wrapper's name for a won battle
            env_metrics["won_episode"] = ts.episode.valid & (env_metrics["battle_won"] > 0)
        extras = {
            "next_obs": next_obs,
            "real_next_obs": next_obs,
            "episode_metrics": {"episode_return": state.episode_return, "episode_length": state.episode_length,
                                "is_terminal_step": ts.episode.valid},
            "env_metrics": env_metrics,
            "terminated": ts.terminated,
            "truncated": ts.truncated,
        }
        return JumanjiTimeStep(step_type=step_type, reward=ts.reward,
                               discount=1.0 - ts.terminated.astype(jnp.float32),
                               observation=self._observation(ts.obs, ts.state, ts.avail_actions, count),
                               extras=extras)


def jumanji_env(env: str | Batch, num_envs: int | None = None, autoreset: str = "same_step", *,
                global_state: bool = False, **options: Any) -> JumanjiLike:
    """A Jumanji / Mava env of a JaxMARL id (or over an existing `Batch`).

    Args:
        env: a ``jaxmarl`` family id (``switch_riddle``, ``smax/3m``, ``jax_mpe/simple_spread``, ...), or a
            `Batch` (then ``num_envs``, ``autoreset`` and ``options`` are the batch's own: give none).
        num_envs: E for leaves (E, ...); None (default) for ONE env, to be vmapped as Mava does.
        autoreset: the batch's mode. ``same_step`` is Jumanji's ``AutoResetWrapper``: the reset
            observation at a ``LAST`` step, the last one in ``extras["next_obs"]``. ``next_step`` is
            dm_env's: the step after ``LAST`` is a ``FIRST``. ``one_episode`` never resets: Jumanji's
            own ``AutoResetWrapper`` can wrap that one.
        global_state: Mava's ``ObservationGlobalState`` (for centralised critics) instead of ``Observation``.
        options: the batch's (``time_limit``, ``gamma``, ``resets_per_step``, ``offset``) and
            ``jaxmarl.make``'s keyword arguments.

    Examples:
        >>> import jax
        >>> env = jumanji_env("switch_riddle", time_limit=4)   # one env, as Mava vmaps it
        >>> state, ts = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 8))
        >>> ts.step_type.tolist() == [0] * 8, env.time_limit, env.num_agents, env.action_dim
        (True, 4, 3, 3)
    """
    if isinstance(env, Batch):
        given = {"num_envs": num_envs, "autoreset": None if autoreset == "same_step" else autoreset, **options}
        given = {name: value for name, value in given.items() if value is not None}
        if given:
            raise ValueError(f"marl_vec.jax.faces.jumanji.jumanji_env({env!r}, ...): {sorted(given)} given with a "
                             "Batch; allowed: the batch alone (its num_envs, mode and options are the face's)")
        return JumanjiLike(env, one_env=False, global_state=bool(global_state))
    if not isinstance(env, str):
        raise TypeError(f"marl_vec.jax.faces.jumanji.jumanji_env: env={env!r}; allowed: a jaxmarl family id (str) "
                        "or a marl_vec.jax.batch")
    return JumanjiLike(batch(env, 1 if num_envs is None else num_envs, autoreset, **options),
                       one_env=num_envs is None, global_state=bool(global_state))

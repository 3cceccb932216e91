"""`make`: a JaxMARL ``MultiAgentEnv`` look-alike, so that a JaxMARL baseline changes only its make line.

One idea: JaxMARL's own interface over the one kernel. ``marl_vec.jax.make(id,
**kwargs)`` behaves as ``jaxmarl.make(id, **kwargs)``: unbatched ``reset(key) ->
(obs, state)`` and ``step(key, state, actions) -> (obs, state, rewards, dones,
infos)`` with JaxMARL's dicts keyed by agent, its autoreset (``key, key_reset =
split(key)``, ``step_env(key)``, ``reset(key_reset)`` where ``__all__``), so the
same keys give the same numbers; ``get_avail_actions``, ``agents``,
``num_agents`` and the spaces are the env's. Other attributes are the native env's.

What it adds, in ``infos``, each a per-agent ``(A,)`` array so that a baseline's
``info.reshape(NUM_ACTORS)`` keeps working: ``terminated`` and ``truncated``
apart (``dones`` folds them together, as JaxMARL does), and the episode that ended
at this step: ``episode_valid``, ``episode_returns`` (each agent's), ``episode_lengths``
and the family stats (SMAX: ``episode_battle_won``, ...), zero where not valid. The
true last observation (JaxMARL's ``step`` loses it) is ``infos["final_obs"]``, a
dict keyed by agent, only with ``final_obs_in_infos=True``: those leaves are not
per-agent scalars. ``time_limit=T`` ends episodes at ``T`` steps as truncated.

The state is a `LikeState` around JaxMARL's (``state.env_state``); ``get_avail_actions``
and ``get_obs`` take either.

May import: jax, ``marl_vec.envs.jaxmarl.{functions,model}``, ``marl_vec.jax.types``.

Examples:
    >>> import jax
    >>> env = make("jax_mpe/simple_spread")
    >>> obs, state = env.reset(jax.random.PRNGKey(0))
    >>> acts = {a: 0 for a in env.agents}
    >>> obs, state, rewards, dones, infos = env.step(jax.random.PRNGKey(1), state, acts)
    >>> sorted(dones), infos["truncated"].shape
    (['__all__', 'agent_0', 'agent_1', 'agent_2'], (3,))
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from marl_vec.envs.jaxmarl.functions import EnvFunctions, select
from marl_vec.envs.jaxmarl.model import model_of


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LikeState:
    """The look-alike's state: JaxMARL's (``env_state``), the running episode's length and returns (A,)."""

    env_state: Any
    length: Any
    returns: Any


class JaxMarlLike:
    """``jaxmarl.make(id)`` over marl_vec's kernel; made by `make` (see the module doc)."""

    def __init__(self, env_id: str, time_limit: int | None, final_obs_in_infos: bool, kwargs: dict[str, Any]):
        model = model_of(env_id, kwargs)
        if model.device is not None:
            raise ValueError(f"marl_vec.jax.make({env_id!r}): device= is the stateful family's option")
        if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, int)
                                       or time_limit < 1):
            raise ValueError(f"marl_vec.jax.make: time_limit={time_limit!r}; allowed: a positive int or None")
        self._env, self._fns, self._model = model.env, EnvFunctions(model.view), model
        self.env_id, self.time_limit, self.final_obs_in_infos = env_id, time_limit, final_obs_in_infos
        self.agents = list(model.env.agents)
        self.num_agents = len(self.agents)
        self.observation_spaces = getattr(model.env, "observation_spaces", {})
        self.action_spaces = getattr(model.env, "action_spaces", {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._env, name)  # the native env's own attributes (max_steps, num_allies, ...)

    def __repr__(self) -> str:
        return f"marl_vec.jax.make({self.env_id!r})"

    @property
    def name(self) -> str:
        return self._env.name

    def observation_space(self, agent: str) -> Any:
        return self._env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        return self._env.action_space(agent)

    @staticmethod
    def _native(state: Any) -> Any:
        return state.env_state if isinstance(state, LikeState) else state

    def get_avail_actions(self, state: Any) -> dict[str, Any]:
        return self._env.get_avail_actions(self._native(state))

    def get_obs(self, state: Any) -> dict[str, Any]:
        return self._env.get_obs(self._native(state))

    def reset(self, key: Any) -> tuple[dict[str, Any], LikeState]:
        obs, state = self._fns.reset_raw(key)
        return obs, LikeState(state, jnp.zeros((), jnp.int32), jnp.zeros((self.num_agents,), jnp.float32))

    def step(self, key: Any, state: LikeState, actions: dict[str, Any], reset_state: Any = None) -> tuple:
        """JaxMARL's ``step`` (its autoreset and key split), with the extras of the module doc in ``infos``."""
        fns = self._fns
        key, key_reset = jax.random.split(key)
        obs_st, after, rewards, dones, infos = fns.step_dict(key, state.env_state, actions)
        reward, terminated, truncated, done, stats = fns.step_outputs(after, rewards, dones)
        length = state.length + 1
        dones = dict(dones)
        if self.time_limit is not None:
            cut = length >= self.time_limit
            truncated = truncated | (cut & ~terminated)
            done = done | cut
            dones = {name: value | cut for name, value in dones.items()}
        if reset_state is None:
            obs_re, state_re = fns.reset_raw(key_reset)
        else:
            state_re = self._native(reset_state)
            obs_re = self._env.get_obs(state_re)
        following = select(done, state_re, after)
        obs = select(done, obs_re, obs_st)
        returns = state.returns + reward
        n = self.num_agents
        infos = dict(infos)
        infos.update(terminated=terminated, truncated=truncated, episode_valid=jnp.full((n,), done),
                     episode_returns=jnp.where(done, returns, 0.0),
                     episode_lengths=jnp.full((n,), jnp.where(done, length, 0)))
        for i, name in enumerate(self._model.spec.stats):
            infos["episode_" + name] = jnp.full((n,), jnp.where(done, stats[i], 0.0))
        if self.final_obs_in_infos:
            infos["final_obs"] = obs_st
        new = LikeState(following, jnp.where(done, 0, length), jnp.where(done, 0.0, returns))
        return obs, new, rewards, dones, infos


def make(env_id: str, *, time_limit: int | None = None, final_obs_in_infos: bool = False,
         **kwargs: Any) -> JaxMarlLike:
    """A JaxMARL look-alike of ``env_id`` (the ``jaxmarl`` family's ids: ``jaxmarl.make`` ids as they are,
    ``smax/<map>``, ``jax_mpe/<scenario>``); ``kwargs`` go to ``jaxmarl.make``.

    Examples:
        >>> env = make("MPE_simple_spread_v3")
        >>> env.agents, env.action_space("agent_0").n
        (['agent_0', 'agent_1', 'agent_2'], 5)
    """
    return JaxMarlLike(env_id, time_limit, bool(final_obs_in_infos), kwargs)

"""How one JaxMARL env's outputs become our fields: the per-env functions traced into the jit.

One idea: a `View` says, for one ``jaxmarl.make`` env, how its dicts of
per-agent observations, rewards and dones, and its state, become the arrays of
our contract for one env: ``obs (A, *obs_shape)``, ``state``, ``avail_actions
(A, n_actions)``, ``agent_mask (A,)``, ``reward``, ``terminated`` and
``truncated (A,)``, and the family statistics of an episode. Every method is a
pure JAX function of one env (the engine vmaps them over a block), so the views
know nothing of batching.

- `View`: any env with Discrete actions and array observations (the MPE
  scenarios with discrete actions, overcooked, coin_game, switch_riddle). Agents
  with smaller flat observations are zero-padded, agents with fewer actions get
  the extra ones unavailable. No world state: the state is the observations
  concatenated (``state_is_obs``). Terminated/truncated: the episode is cut
  (truncated) when the env's step counter reached its ``max_steps``, else it ended.
- `HanabiView`: avail actions from ``get_legal_moves`` (the player not to
  move has only its no-op).
- `SmaxView`: SMAC's view of SMAX (see `marl_vec.envs.jaxmarl`).

May import: jax, numpy, ``marl_vec.core.spec``.

Example (inside the engine, under jit and vmap)::

    view = view_for(env, "HeuristicEnemySMAX")
    obs, state, avail, mask = view.outputs(obs_dict, env_state)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


class View:
    """The generic view; subclasses override what their env has of its own.

    Args:
        env: the ``jaxmarl.make`` env.
        obs_shapes: each agent's observation shape, in ``env.agents`` order.
        obs_dtype: the common observation dtype.
        n_actions: each agent's number of Discrete actions (empty for Box actions).
        action_dims: each agent's Box action size (None for Discrete actions); actions come
            padded to the largest and each agent gets its own first ``action_dims[a]``.
    """

    has_state = False  # a world state of its own (else: the observations concatenated)
    has_avail = False  # avail actions change (else: fixed, written once at bind)
    has_mask = False  # agents die (else: every agent always acts)
    stats: tuple[str, ...] = ()

    def __init__(self, env: Any, obs_shapes: list[tuple[int, ...]], obs_dtype: np.dtype, n_actions: list[int],
                 action_dims: list[int] | None = None):
        self.env = env
        self.action_dims = action_dims
        self.agents = list(env.agents)
        self.obs_shapes = obs_shapes
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_actions = n_actions
        same = all(s == obs_shapes[0] for s in obs_shapes)
        if not same and any(len(s) != 1 for s in obs_shapes):
            raise ValueError(f"{type(env).__name__}: agents' observations of shapes {obs_shapes} cannot be padded "
                             "to one shape (only flat ones can)")
        self.obs_shape = obs_shapes[0] if same else (max(s[0] for s in obs_shapes),)
        self.obs_padded = not same
        self.max_steps = getattr(env, "max_steps", None)

    # -- what the engine traces ---------------------------------------------------

    def actions_dict(self, actions: Any) -> dict[str, Any]:
        """``actions (A,)`` ints or ``(A, width)`` floats -> JaxMARL's dict (Box: each agent's own part)."""
        if self.action_dims is None:
            return {agent: actions[a] for a, agent in enumerate(self.agents)}
        return {agent: actions[a, :dim] for a, (agent, dim) in enumerate(zip(self.agents, self.action_dims))}

    def outputs(self, obs: dict[str, Any], state: Any) -> tuple[Any, Any, Any, Any]:
        """``(obs (A, *obs_shape), world_state or None, avail (A, n) bool or None, mask (A,) or None)``."""
        return self.stack_obs(obs), self.world_state(obs, state), self.avail(state), self.mask(state)

    def stack_obs(self, obs: dict[str, Any]) -> Any:
        jnp = _jnp()
        width = self.obs_shape[0] if self.obs_padded else None
        rows = []
        for agent in self.agents:
            row = jnp.asarray(obs[agent]).astype(self.obs_dtype)
            if width is not None and row.shape[0] < width:
                row = jnp.pad(row, (0, width - row.shape[0]))
            rows.append(row)
        return jnp.stack(rows)

    def world_state(self, obs: dict[str, Any], state: Any) -> Any:
        return None

    def avail(self, state: Any) -> Any:
        return None

    def mask(self, state: Any) -> Any:
        return None

    def rewards(self, rewards: dict[str, Any]) -> Any:
        jnp = _jnp()
        return jnp.stack([jnp.asarray(rewards[a]).astype(jnp.float32) for a in self.agents])

    def flags(self, state: Any, dones: dict[str, Any]) -> tuple[Any, Any]:
        """``(terminated (A,), truncated (A,))`` after a step; see the module doc."""
        jnp = _jnp()
        done = jnp.asarray(dones["__all__"])
        agent_done = jnp.stack([jnp.asarray(dones[a]) for a in self.agents])
        cut = done & self.time_limit(state)
        truncated = jnp.broadcast_to(cut, agent_done.shape) & ~self.dead(state, agent_done)
        terminated = (agent_done | done) & ~truncated
        return terminated, truncated

    def time_limit(self, state: Any) -> Any:
        """Whether the episode reached the env's step limit (False where it has none)."""
        step = getattr(state, "step", None)
        if self.max_steps is None or step is None:
            return _jnp().asarray(False)
        return step >= self.max_steps

    def dead(self, state: Any, agent_done: Any) -> Any:
        """Agents out of the episode before its end (terminated even at a time limit)."""
        return _jnp().zeros_like(agent_done)

    def episode_stats(self, state: Any) -> Any:
        """``(len(stats),)`` float32 from the state after a step (read where the episode ended)."""
        return _jnp().zeros((len(self.stats),), _jnp().float32)

    # -- host side ---------------------------------------------------------------

    def fixed_avail(self) -> np.ndarray:
        """``(A, n_actions)``: each agent's own actions available, padding ones never."""
        avail = np.zeros((len(self.agents), max(self.n_actions)), dtype=bool)
        for a, n in enumerate(self.n_actions):
            avail[a, :n] = True
        return avail


class HanabiView(View):
    """Hanabi: legal moves as avail actions (the player not to move may only pass: its no-op)."""

    has_avail = True

    def avail(self, state: Any) -> Any:
        legal = self.env.get_legal_moves(state)
        return _jnp().stack([legal[a] for a in self.agents]).astype(bool)


class SmaxView(View):
    """SMAC's view of SMAX (``SMAX``, ``HeuristicEnemySMAX``): ``world_state`` as state,
    ``get_avail_actions`` (a dead unit: "stop" only), dead allies masked, and
    battle_won / dead_allies / dead_enemies at an episode's end."""

    has_state = True
    has_avail = True
    has_mask = True
    stats = ("battle_won", "dead_allies", "dead_enemies")

    def _units(self, state: Any) -> Any:
        return state.state if hasattr(state, "enemy_policy_state") else state  # HeuristicEnemySMAX wraps SMAX's

    def world_state(self, obs: dict[str, Any], state: Any) -> Any:
        return obs["world_state"].astype(_jnp().float32)

    def avail(self, state: Any) -> Any:
        avail = self.env.get_avail_actions(state)
        return _jnp().stack([avail[a] for a in self.agents]).astype(bool)

    def mask(self, state: Any) -> Any:
        units = self._units(state)
        ids = np.array([self.env.agent_ids[a] for a in self.agents])
        return units.unit_alive[ids]

    def dead(self, state: Any, agent_done: Any) -> Any:
        return ~self.mask(state)

    def time_limit(self, state: Any) -> Any:
        # A battle decided at the last step ended (terminated), it was not cut.
        jnp = _jnp()
        units = self._units(state)
        allies = self.env.num_allies
        decided = jnp.all(~units.unit_alive[:allies]) | jnp.all(~units.unit_alive[allies:])
        return (units.step >= self.env.max_steps) & ~decided

    def episode_stats(self, state: Any) -> Any:
        jnp = _jnp()
        units = self._units(state)
        allies = self.env.num_allies
        dead_allies = jnp.sum(~units.unit_alive[:allies])
        dead_enemies = jnp.sum(~units.unit_alive[allies:])
        won = (dead_enemies == units.unit_alive.shape[0] - allies) & (dead_allies < allies)  # SMAX's won bonus rule
        return jnp.stack([won, dead_allies, dead_enemies]).astype(jnp.float32)


class MabraxView(View):
    """MABrax: brax's EpisodeWrapper marks a cut episode in ``state.info["truncation"]``."""

    def time_limit(self, state: Any) -> Any:
        return state.info["truncation"] > 0


def view_class(env_id: str) -> type[View]:
    """The view of a served ``jaxmarl.make`` id."""
    if env_id in ("ant_4x2", "halfcheetah_6x1", "hopper_3x1", "humanoid_9|8", "walker2d_2x3"):
        return MabraxView
    if env_id in ("SMAX", "HeuristicEnemySMAX"):
        return SmaxView
    if env_id == "hanabi":
        return HanabiView
    return View

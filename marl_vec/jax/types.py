"""The pytrees of the functional batch: `TimeStep` (what a step returns), `EpisodeStats`, `BatchState`.

One idea: the data that crosses ``reset`` and ``step``. Each is a frozen
dataclass registered with ``jax.tree_util.register_dataclass``, so it passes
through ``jit``, ``vmap`` and ``lax.scan``; its leaves are the same at every
step of a batch (a field that a batch does not have, such as ``avail_actions``
with Box actions, is None at every step).

May import: jax.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> ep = EpisodeStats(team_return=jnp.zeros(2), agent_returns=jnp.zeros((2, 3)),
    ...                   length=jnp.zeros(2, jnp.int32), stats={}, discounted_return=None,
    ...                   valid=jnp.zeros(2, bool))
    >>> len(jax.tree.leaves(ep))
    4
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class EpisodeStats:
    """The episode that ended at this step, read where ``valid`` (E envs, A agents).

    Attributes:
        team_return: (E,) float32, the mean over agents of each agent's summed reward
            (the stateful batch's ``infos[i]["episode"]["return"]``).
        agent_returns: (E, A) float32, each agent's summed reward.
        length: (E,) int32, steps in the episode.
        stats: the family's statistics by name, each (E,) float32 (SMAX: ``battle_won``,
            ``dead_allies``, ``dead_enemies``; empty for the others).
        discounted_return: (E, A) float32, each agent's sum of ``gamma**t * reward_t``; None
            unless the batch was made with ``gamma``.
        valid: (E,) bool, an episode ended at this step (once per episode, also in
            ``one_episode`` mode, where a finished env repeats its last step).
    """

    team_return: Any
    agent_returns: Any
    length: Any
    stats: dict[str, Any]
    discounted_return: Any
    valid: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TimeStep:
    """What ``reset`` and ``step`` return: the fields of the stateful ``StepResult`` as JAX arrays,
    with the same shapes, dtypes and padding (``batch.spec``), E envs and A agents.

    Attributes:
        obs: (E, A, *obs_shape), what follows the step (the reset observation where an
            episode ended and the mode resets in the same step).
        state: (E, *state_shape), the env's world state (SMAX) or the observations concatenated.
        avail_actions: (E, A, n_actions) bool; None with Box actions.
        agent_mask: (E, A) bool, the agent is alive and acts.
        acting: (E, A) bool, the agents whose actions are read; JaxMARL's envs move at once,
            so it equals ``agent_mask``.
        reward: (E, A) float32.
        terminated: (E, A) bool, the agent's episode ended in a terminal state.
        truncated: (E, A) bool, the agent's episode was cut (the env's step limit, or the
            batch's ``time_limit``), kept apart from ``terminated``.
        done: (E,) bool, the env's episode ended at this step.
        final_obs, final_state, final_avail_actions, final_agent_mask: the step's TRUE last
            views before any reset; where ``done`` is False they equal ``obs`` etc.
        autoreset: (E,) bool, this step was a reset step (``next_step`` mode: the step after an
            episode's end resets instead of stepping, with zero reward and False flags).
        episode: the `EpisodeStats` of the episodes that ended at this step.
    """

    obs: Any
    state: Any
    avail_actions: Any
    agent_mask: Any
    acting: Any
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    final_obs: Any
    final_state: Any
    final_avail_actions: Any
    final_agent_mask: Any
    autoreset: Any
    episode: EpisodeStats


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class BatchState:
    """Everything a batch carries from one step to the next (E envs); opaque to a trainer,
    which passes it back to ``step``.

    Attributes:
        key: (E, 2) uint32, each env's own PRNG key (its key chain; see ``marl_vec.jax.keys``).
        env_state: JaxMARL's state of every env (leaves (E, ...)).
        length: (E,) int32, steps of each running episode.
        returns: (E, A) float32, each agent's summed reward in the running episode.
        discounted: (E, A) float32 discounted returns (None unless ``gamma``).
        ended: (E,) bool, the last step ended the env's episode (``next_step``: the next step
            resets; ``one_episode``: the env is finished).
        last: ``one_episode`` only (else None): the finished step's views and flags, repeated.
        first: ``fast`` only (else None): each env's first reset (JaxMARL's obs dict, state).
    """

    key: Any
    env_state: Any
    length: Any
    returns: Any
    discounted: Any
    ended: Any
    last: Any
    first: Any

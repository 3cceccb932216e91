"""marl_vec inside ``jax.jit``: a functional batch of JaxMARL envs that trainers scan and vmap.

The functional form of the ``jaxmarl`` family (DESIGN.md, "Growth of the
contract (turn 5)"). `batch` returns an object with pure ``reset(key) -> (state, ts)``
and ``step(state, actions) -> (state, ts)``: the PRNG keys are inside
``state``, ``ts`` is a `TimeStep` with the stateful ``StepResult``'s fields as
JAX arrays (same shapes, dtypes, padding), final observations, termination
apart from truncation, and episode statistics with a ``valid`` flag.

`shard` splits a batch along its env axis over the devices of a mesh (``shard_map``):
1, 2 or 4 devices play the same episodes.

`make` is a JaxMARL ``MultiAgentEnv`` look-alike over the same kernel, so that a
JaxMARL baseline changes only its make line.

Its modules, one idea each: ``keys`` (each env's key from its global index),
``types`` (the pytrees), ``modes`` (the autoreset modes), ``batch`` (the
batch, its options and its episode bookkeeping), ``shard`` (the batch over devices),
``make`` (the look-alike). The per-env step is the
stateful family's own (`marl_vec.envs.jaxmarl.functions`): the same key and
actions give the same episodes in both forms. See docs/jax/inside_jit.md.

This package sits beside ``vec/`` in the house's layers: it uses ``core/`` data and
the JaxMARL family's model and kernel, never a backend. ``import marl_vec`` does not
import it (nor JAX).

Examples:
    >>> import jax, jax.numpy as jnp
    >>> import marl_vec.jax as mvj
    >>> b = mvj.batch("jax_mpe/simple_spread", num_envs=8)
    >>> def rollout(key):
    ...     state, ts = b.reset(key)
    ...     def one(state, _):
    ...         state, ts = b.step(state, jnp.zeros((8, 3), jnp.int32))
    ...         return state, ts.reward
    ...     return jax.lax.scan(one, state, None, length=30)[1]
    >>> jax.jit(rollout)(jax.random.PRNGKey(0)).shape
    (30, 8, 3)
"""

from __future__ import annotations

from marl_vec.jax.batch import Batch, batch
from marl_vec.jax.keys import env_keys
from marl_vec.jax.make import JaxMarlLike, LikeState, make
from marl_vec.jax.modes import MODES
from marl_vec.jax.shard import Sharded, shard
from marl_vec.jax.types import BatchState, EpisodeStats, TimeStep

__all__ = ["MODES", "Batch", "BatchState", "EpisodeStats", "JaxMarlLike", "LikeState", "Sharded", "TimeStep", "batch",
           "env_keys", "make", "shard"]

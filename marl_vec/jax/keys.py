"""Each env's PRNG key, from the batch's key and the env's global index.

One idea: the seeds line up with the stateful batch. There, env ``i`` of a batch
with ``env_seed=s`` starts from ``key_of_seed(s + i)``, which is
``jax.random.PRNGKey(s + i)``: the 64-bit seed ``s + i`` as two 32-bit words
(high, low). Here ``reset(PRNGKey(s))`` gives env ``i`` the key ``PRNGKey(s)``
read as that 64-bit number, plus ``i``: the same key, so env ``i`` plays the
same episodes in both forms. The key depends only on the env's GLOBAL index
(``offset + i``), not on how many envs a device holds, so a batch split over
devices plays the same episodes.

As with ``env_seed``, neighbouring seeds share envs: ``reset(PRNGKey(0))``'s env 1 is
``reset(PRNGKey(1))``'s env 0. To run independent batches (seeds of a trainer under
``vmap``), space their keys by at least ``num_envs`` (``PRNGKey(seed * num_envs)``).

May import: jax.

Examples:
    >>> import jax
    >>> env_keys(jax.random.PRNGKey(7), 3).tolist()
    [[0, 7], [0, 8], [0, 9]]
    >>> env_keys(jax.random.PRNGKey(2**32 - 1), 2).tolist()  # the carry into the high word
    [[0, 4294967295], [1, 0]]
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def raw_key(key: Any) -> Any:
    """``key`` as JAX's raw threefry key: a (2,) uint32 array (a typed ``jax.random.key`` is unwrapped);
    a ValueError naming what was given otherwise."""
    if jnp.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    shape, dtype = getattr(key, "shape", None), getattr(key, "dtype", None)
    if shape != (2,) or dtype != jnp.uint32:
        raise ValueError(f"a batch's key must be one threefry key, jax.random.PRNGKey(seed) (shape (2,) uint32) "
                         f"or jax.random.key(seed); got {type(key).__name__} of shape {shape} and dtype {dtype}")
    return key


def env_keys(key: Any, num_envs: int, offset: int | Any = 0) -> Any:
    """(num_envs, 2) uint32: the keys of envs ``offset .. offset + num_envs - 1`` (see the module doc)."""
    key = raw_key(key)
    index = jnp.asarray(offset, jnp.uint32) + jnp.arange(num_envs, dtype=jnp.uint32)
    low = key[1] + index  # uint32 wraps: a carry into the high word where it did
    high = key[0] + (low < key[1]).astype(jnp.uint32)
    return jnp.stack([jnp.broadcast_to(high, low.shape), low], axis=1)

"""Runs of the functional batch and of a face over it, shared by tests/jax/test_face_*.py.

The faces' tests compare a face with the functional batch it wraps, stepped with the
same key and actions. Both run as one jitted ``reset`` + ``lax.scan``, cached per
case so that each compiles once per session. The env is JaxMARL's ``switch_riddle``
with ``K`` envs: it compiles in about a second, and with random actions its
episodes end both ways within a few steps: terminated (an agent says "tell") and
truncated (its own limit of 6 steps, or a smaller ``time_limit``).

Example:
    >>> actions, ts0, steps = batch_run("same_step", (("time_limit", 4),))  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tests.helpers.jaxmarl_reference import K

ENV = "switch_riddle"
SEED = 7
STEPS = 40


@functools.lru_cache(maxsize=None)
def actions(steps: int = STEPS, n_envs: int = K) -> np.ndarray:
    """(steps, n_envs, 3) random int32 actions (all of switch_riddle's 3 actions are always available)."""
    return np.random.default_rng(0).integers(0, 3, size=(steps, n_envs, 3)).astype(np.int32)


def scan(reset: Any, step: Any, acts: np.ndarray, key: Any = None) -> tuple[Any, Any]:
    """``(reset's output, step's outputs stacked)`` of one jitted reset + scan, as numpy leaves."""
    import jax

    def go(key: Any, acts: Any) -> tuple:
        state, first = reset(key)
        return first, jax.lax.scan(lambda s, a: step(s, a), state, acts)[1]

    out = jax.jit(go)(jax.random.PRNGKey(SEED) if key is None else key, acts)
    return jax.tree.map(np.asarray, out)


@functools.lru_cache(maxsize=None)
def batch_run(mode: str, options: tuple = ()) -> tuple[np.ndarray, Any, Any]:
    """``(actions, reset TimeStep, stacked step TimeSteps)`` of ``batch(ENV, K, mode, **options)``."""
    import marl_vec.jax as mvj

    b = mvj.batch(ENV, K, mode, **dict(options))
    acts = actions()
    first, steps = scan(b.reset, b.step, acts)
    return acts, first, steps


def ends(steps: Any) -> tuple[int, int]:
    """(episodes that terminated, episodes that were truncated) in a batch run's steps."""
    valid = steps.episode.valid
    truncated = steps.truncated.any(-1) & valid
    return int((valid & ~truncated).sum()), int(truncated.sum())

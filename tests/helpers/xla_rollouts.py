"""Rollouts through `VecEnv.xla()` inside ``jit``/``lax.scan``, and the same from Python.

Shared by the tests/backends/test_xla_*.py modules. A rollout's actions are drawn
inside the scan from the last result's available actions (a random available
one per agent, from a PRNG key), so turn-based games and dead agents get legal
moves; the scan returns the actions with the results, and `replay` steps the
same batch from Python with them, after a reset with the same seed.

Examples:
    >>> with mv.make("gym/cartpole", num_envs=2) as venv:  # doctest: +SKIP
    ...     actions, results = scan_rollout(venv, seed=3, steps=20)
    ...     expected = replay(venv, seed=3, actions=actions)
    ...     assert_same(results, expected)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import marl_vec as mv
from marl_vec.vec.xla_layout import XlaResult, jax_dtype

AGENT_AXIS = ("obs", "avail_actions", "agent_mask", "acting", "reward", "terminated", "truncated",
              "final_obs", "final_avail_actions", "final_acting")


def pick(key: Any, avail: Any) -> Any:
    """A random available action per row (and agent): argmax of noise over the available ones."""
    noise = jax.random.uniform(key, avail.shape)
    return jnp.argmax(jnp.where(avail, noise, -1.0), axis=-1).astype(jnp.int32)


def scan_rollout(venv: mv.VecEnv, seed: int, steps: int, reset_done: bool = False,
                 host_call: str = "auto") -> tuple[np.ndarray, list]:
    """``steps`` steps through ``venv.xla()``'s ``step`` in one jitted ``lax.scan``, after
    ``venv.reset(seed=seed)``; with ``reset_done`` each step is followed by a jitted
    ``reset(handle, done)`` of the envs that finished (autoreset="disabled"); ``host_call``
    as ``venv.xla`` takes it.

    Returns the actions (steps, ...) and the results: per step an `XlaResult` (and the reset's)."""
    first = venv.reset(seed=seed)
    fns = venv.xla(host_call=host_call)
    single = venv.spec.n_agents == 1
    avail0 = jnp.asarray(first.avail_actions[:, 0] if single else first.avail_actions)

    def body(carry: Any, key: Any) -> Any:
        handle, avail = carry
        actions = pick(key, avail)
        handle, r = fns.step(handle, actions)
        out = (actions, r)
        if reset_done:
            handle, reset_r = fns.reset(handle, r.done)
            out = (actions, r, reset_r)
            r = reset_r
        return (handle, r.avail_actions), out

    keys = jax.random.split(jax.random.PRNGKey(seed), steps)
    (_, _), outs = jax.jit(lambda h, a, k: jax.lax.scan(body, (h, a), k))(fns.handle, avail0, keys)
    actions = np.asarray(outs[0])
    per_step = []
    for t in range(steps):
        per_step.append(tuple(jax.tree_util.tree_map(lambda x: np.asarray(x[t]), o) for o in outs[1:]))
    return actions, per_step


def replay(venv: mv.VecEnv, seed: int, actions: np.ndarray, reset_done: bool = False) -> list:
    """The same rollout from Python: ``venv.step`` with ``actions`` after ``venv.reset(seed=seed)``."""
    venv.reset(seed=seed)
    single = venv.spec.n_agents == 1
    out = []
    for a in actions:
        r = venv.step(a[:, None] if single else a)
        if reset_done:
            out.append((r, venv.reset(env_ids=r.done)))
        else:
            out.append((r,))
    return out


def expected_field(result: Any, name: str, single: bool) -> Any:
    """StepResult's ``name`` as XlaResult holds it: the agent axis dropped (single-agent), JAX's dtype."""
    if name in ("episode_return", "episode_length"):
        key = "return" if name == "episode_return" else "length"
        out = np.zeros(len(result.done), np.float32 if key == "return" else np.int32)
        for i in np.flatnonzero(result.done):  # (one_episode repeats done with no new episode: zero)
            if "episode" in result.infos[i]:
                out[i] = result.infos[i]["episode"][key]
        return out
    value = getattr(result, name)
    if value is None:
        return None

    def leaf(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if single and name in AGENT_AXIS:
            x = x.reshape((x.shape[0],) + x.shape[2:])
        return x.astype(jax_dtype(x.dtype))

    return jax.tree_util.tree_map(leaf, value)


def assert_same(venv: mv.VecEnv, got: list, expected: list) -> int:
    """Every field of every step equal, bit for bit; returns the number of episode ends seen."""
    single = venv.spec.n_agents == 1
    ends = 0
    for t, (xla_results, py_results) in enumerate(zip(got, expected)):
        for xr, pr in zip(xla_results, py_results):
            for name in XlaResult._fields:
                value = getattr(xr, name)
                if name == "env_ids":
                    assert value is None
                    continue
                want = expected_field(pr, name, single)
                if want is None:
                    assert value is None, (t, name)
                    continue
                for g, w in zip(jax.tree_util.tree_leaves(value), jax.tree_util.tree_leaves(want)):
                    assert g.shape == w.shape and g.dtype == w.dtype, (t, name, g.shape, w.shape, g.dtype, w.dtype)
                    np.testing.assert_array_equal(g, w, err_msg=f"step {t}, field {name}")
        ends += int(np.count_nonzero(py_results[0].done))
    return ends

"""Runs of ``marl_vec.jax.batch`` under ``jax.lax.scan`` beside JaxMARL stepped by hand, shared by tests/jax/.

`run` steps :class:`tests.helpers.jax_modes_reference.ModeReference` (JaxMARL by
hand) with random available actions, then the functional batch with those
actions in ONE jitted ``reset`` + ``lax.scan``; the result is cached per case,
so that the by-hand tests and the stateful-backend tests of a case compile it
once per session (JAX compiles cost 5-20 s per function and shape). `check`
asserts every step's fields equal, bit for bit.

Example:
    >>> r = run("jax_mpe/simple_spread", (), "same_step", (), 60)  # doctest: +SKIP
    >>> check(r)                                                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from tests.helpers.jax_modes_reference import ModeReference
from tests.helpers.jaxmarl_reference import K, box_actions, random_available

SEED = 7


@dataclasses.dataclass
class Run:
    env_id: str
    mode: str
    options: dict
    model: Any
    actions: np.ndarray  # (T, E, ...)
    first: dict  # the reference's reset views
    expected: list  # the reference's step outputs
    ts0: Any  # the batch's reset TimeStep (numpy leaves)
    steps: Any  # the batch's TimeSteps, stacked (T, E, ...), numpy leaves
    seconds: float  # compile + run of the functional batch


@functools.lru_cache(maxsize=None)
def run(env_id: str, kwargs: tuple, mode: str, options: tuple, steps: int, n_envs: int = K) -> Run:
    """One case (``kwargs``/``options``: sorted item tuples, hashable for the cache)."""
    import time

    import jax

    import marl_vec.jax as mvj
    from marl_vec.envs.jaxmarl.model import model_of

    kwargs_d, options_d = dict(kwargs), dict(options)
    model = model_of(env_id, kwargs_d)
    ref = ModeReference(model, SEED, n_envs, mode, options_d.get("time_limit"), options_d.get("resets_per_step"))
    rng = np.random.default_rng(0)
    first = ref.reset()
    expected, actions, views = [], [], first
    for _ in range(steps):
        if model.view.action_dims is None:
            avail = views.get("avail_actions", np.broadcast_to(model.view.fixed_avail(), (n_envs,) + model.view.fixed_avail().shape))
            a = random_available(rng, avail)
        else:
            a = box_actions(rng, model.spec, n_envs)
        actions.append(a)
        views = ref.step(a)
        expected.append(views)
    b = mvj.batch(env_id, n_envs, mode, **options_d, **kwargs_d)

    def go(key: Any, acts: Any) -> tuple:
        state, ts0 = b.reset(key)
        return ts0, jax.lax.scan(lambda s, x: b.step(s, x), state, acts)[1]

    started = time.perf_counter()
    ts0, tss = jax.jit(go)(jax.random.PRNGKey(SEED), np.stack(actions))
    ts0, tss = jax.tree.map(np.asarray, (ts0, tss))
    return Run(env_id, mode, options_d, model, np.stack(actions), first, expected, ts0, tss,
               time.perf_counter() - started)


def at(tree: Any, t: int) -> Any:
    """Step ``t`` of stacked TimeSteps."""
    import jax

    return jax.tree.map(lambda x: x[t], tree)


def same_views(ts: Any, expected: dict, where: str, prefix: str = "") -> None:
    """obs, state (the env's own, or the observations concatenated), avail and mask equal, bit for bit."""
    get = lambda name: getattr(ts, prefix + name)  # noqa: E731
    np.testing.assert_array_equal(get("obs"), expected["obs"], err_msg=f"{where}: {prefix}obs")
    state = expected["state"] if "state" in expected else expected["obs"].reshape(len(expected["obs"]), -1)
    np.testing.assert_array_equal(get("state"), state, err_msg=f"{where}: {prefix}state")
    if "avail_actions" in expected:
        np.testing.assert_array_equal(get("avail_actions"), expected["avail_actions"], err_msg=f"{where}: avail")
    if "agent_mask" in expected:
        np.testing.assert_array_equal(get("agent_mask"), expected["agent_mask"], err_msg=f"{where}: mask")


def check(r: Run) -> int:
    """Every step of the functional batch equals the reference; returns the number of episode ends."""
    same_views(r.ts0, r.first, f"{r.env_id} {r.mode} reset")
    assert not r.ts0.done.any() and not r.ts0.reward.any() and not r.ts0.episode.valid.any()
    ends = 0
    sums = np.zeros(r.ts0.reward.shape, dtype=np.float64)  # each agent's return, and discounted (float64)
    discounted = np.zeros_like(sums)
    length = np.zeros(len(sums), dtype=np.int64)
    gamma = r.options.get("gamma")
    for t, exp in enumerate(r.expected):
        ts, where = at(r.steps, t), f"{r.env_id} {r.mode} {r.options} step {t}"
        same_views(ts, exp, where)
        np.testing.assert_array_equal(ts.reward, exp["reward"], err_msg=where)
        np.testing.assert_array_equal(ts.done, exp["done"], err_msg=where)
        np.testing.assert_array_equal(ts.autoreset, exp["autoreset"], err_msg=where)
        np.testing.assert_array_equal(ts.terminated | ts.truncated, exp["agent_done"] | exp["done"][:, None],
                                      err_msg=where)
        assert not (ts.terminated & ts.truncated).any(), where
        np.testing.assert_array_equal(ts.acting, ts.agent_mask, err_msg=where)
        cut = exp["cut"]
        if cut.any():  # the batch's time limit: the living agents truncated, the dead ones (SMAX) terminated
            np.testing.assert_array_equal(ts.terminated[cut], ~ts.final_agent_mask[cut], err_msg=where)
            np.testing.assert_array_equal(ts.truncated[cut], ts.final_agent_mask[cut], err_msg=where)
        np.testing.assert_array_equal(ts.episode.valid, exp["valid"], err_msg=where)
        valid = exp["valid"]
        np.testing.assert_array_equal(ts.episode.length[valid], exp["length"][valid], err_msg=where)
        final = exp["final"]
        for name in ("obs", "state", "avail_actions", "agent_mask"):
            if name in final:
                np.testing.assert_array_equal(getattr(ts, "final_" + name), final[name],
                                              err_msg=f"{where}: final_{name}")
        discounted += (gamma or 1.0) ** length[:, None] * exp["reward"]
        sums += exp["reward"]
        length += ~exp["autoreset"] & ~exp.get("frozen", np.zeros_like(valid))
        np.testing.assert_allclose(ts.episode.agent_returns[valid], sums[valid], rtol=1e-5, atol=1e-5, err_msg=where)
        np.testing.assert_allclose(ts.episode.team_return[valid], sums[valid].mean(axis=1), rtol=1e-5, atol=1e-5)
        if gamma is not None:
            np.testing.assert_allclose(ts.episode.discounted_return[valid], discounted[valid], rtol=1e-5, atol=1e-5)
        else:
            assert ts.episode.discounted_return is None
        ended = exp["done"] & ~exp.get("frozen", np.zeros_like(valid))
        sums[ended], discounted[ended], length[ended] = 0.0, 0.0, 0
        ends += int(valid.sum())
    return ends

"""scripts/train/ppo_xla_jax.py: PPO in JAX with the rollout inside jit through ``venv.xla()``.

It learns CartPole; the rollout inside jit gives the same parameters, bit for bit, as
the same algorithm driven from Python with ``venv.step``; it runs IPPO on MPE
simple_spread over SubprocVecEnv.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

from tests.helpers.scripts import script_module  # noqa: E402


@pytest.fixture(scope="module")
def ppo():
    with script_module("ppo_xla_jax") as module:
        yield module


def test_xla_driver_equals_python_driver_and_learns(ppo):
    args = ppo.Args(config="gym/cartpole", num_envs=8, num_steps=32, updates=10, seed=1)
    inside = ppo.train(args)
    outside = ppo.train(dataclasses.replace(args, driver="python", updates=2))
    for a, b in zip(jax.tree_util.tree_leaves(outside["params"]), jax.tree_util.tree_leaves(inside["history"][1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    curve = np.array(inside["curve"])
    assert np.nanmean(curve[-4:]) > 2 * np.nanmean(curve[:2])  # CartPole returns go up


def test_ippo_on_mpe_over_subproc(ppo):
    args = ppo.Args(config="mpe/simple_spread", backend="subproc", num_envs=4, num_steps=25, updates=2)
    out = ppo.train(args)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(out["params"]))
    assert len(out["curve"]) == 2 and not np.isnan(out["curve"]).any()  # 25 steps: every env ended an episode

"""PettingZoo envs: the batch equals a plain loop over the native envs with the same seeds and actions."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.reference import pettingzoo_plain_loop


def _compare(env_fn, num_envs: int, steps: int, seed: int, action_fn, autoreset: str = "same_step"):
    fns = [env_fn] * num_envs
    venv = mv.DummyVecEnv(fns, env_seed=seed, autoreset=autoreset)
    first = venv.reset()
    actions = action_fn(venv.spec, steps, num_envs)
    results = [venv.step(a) for a in actions]
    venv.close()
    ref = pettingzoo_plain_loop(fns, seed, actions)
    np.testing.assert_array_equal(first.obs, ref["first_obs"])
    np.testing.assert_array_equal(first.state, ref["first_state"])
    for t, r in enumerate(results):
        np.testing.assert_array_equal(r.obs, ref["obs"][t], err_msg=f"obs at step {t}")
        np.testing.assert_array_equal(r.state, ref["state"][t], err_msg=f"state at step {t}")
        np.testing.assert_array_equal(r.reward, ref["reward"][t], err_msg=f"reward at step {t}")
        np.testing.assert_array_equal(r.terminated, ref["terminated"][t], err_msg=f"terminated at step {t}")
        np.testing.assert_array_equal(r.truncated, ref["truncated"][t], err_msg=f"truncated at step {t}")
        np.testing.assert_array_equal(r.done, ref["done"][t])
        np.testing.assert_array_equal(r.agent_mask, ref["mask"][t])
        for i in np.flatnonzero(r.done):
            np.testing.assert_array_equal(r.final_obs[i], ref["final_obs"][t][i])
            np.testing.assert_array_equal(r.final_state[i], ref["final_state"][t][i])
    return ref


def discrete_actions(spec, steps, num_envs):
    return np.random.default_rng(7).integers(0, spec.n_actions, size=(steps, num_envs, spec.n_agents))


def box_actions(spec, steps, num_envs):
    shape = (steps, num_envs, spec.n_agents, *spec.action_shape)
    return np.random.default_rng(7).uniform(-1, 1, size=shape).astype(np.float32)


def test_simple_spread_equals_plain_loop():
    from mpe2 import simple_spread_v3

    fn = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=10, continuous_actions=False)
    ref = _compare(fn, num_envs=4, steps=35, seed=11, action_fn=discrete_actions)
    # max_cycles ends every episode by truncation of all agents, three times per env here.
    assert ref["done"].sum() == 4 * 3
    assert ref["truncated"][ref["done"]].all() and not ref["terminated"].any()


def test_multiwalker_continuous_equals_plain_loop():
    pytest.importorskip("Box2D", reason="pettingzoo[sisl] not installed: pip install 'marl_vec[pettingzoo]'")
    from pettingzoo.sisl import multiwalker_v9

    fn = functools.partial(multiwalker_v9.parallel_env, n_walkers=2, max_cycles=40)
    ref = _compare(fn, num_envs=2, steps=90, seed=5, action_fn=box_actions)
    assert ref["done"].any()


def test_magent2_battle_equals_plain_loop():
    # Deaths are covered exactly by tests/core/test_dead_agents.py; here: 12 agents, two teams.
    pytest.importorskip("magent2", reason="magent2 not installed: pip install 'marl_vec[pettingzoo]'")
    from magent2.environments import battle_v4

    fn = functools.partial(battle_v4.parallel_env, map_size=18, max_cycles=20)
    ref = _compare(fn, num_envs=2, steps=45, seed=2, action_fn=discrete_actions)
    assert ref["done"].sum() == 4 and ref["obs"].shape[2] == 12

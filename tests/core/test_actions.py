"""Action validation: shape, dtype, range, availability; the env stays usable after a refusal."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv


@pytest.fixture
def venv():
    v = mv.DummyVecEnv([DyingAgentEnv] * 2, env_seed=0)
    v.reset()
    yield v
    v.close()


def test_wrong_shape_names_the_expected_one(venv):
    with pytest.raises(ValueError, match=r"actions must have shape \(2, 3\) \(num_envs=2, n_agents=3"):
        venv.step(np.ones((2, 2), dtype=np.int64))


def test_float_actions_are_refused(venv):
    with pytest.raises(ValueError, match="discrete actions must be integers, got dtype float64"):
        venv.step(np.ones((2, 3)))


def test_out_of_range_names_env_agent_and_action(venv):
    actions = np.ones((2, 3), dtype=np.int64)
    actions[1, 2] = 7
    with pytest.raises(ValueError, match=r"action 7 for env 1, agent 'a2' is out of range; allowed: 0..3"):
        venv.step(actions)


def test_unavailable_action_lists_the_available_ones(venv):
    actions = np.ones((2, 3), dtype=np.int64)
    actions[0, 1] = 0  # masked at t=0
    with pytest.raises(ValueError, match=r"action 0 for env 0, agent 'a1' is not available; available now: \[1, 2, 3\]"):
        venv.step(actions)


def test_env_stays_usable_after_a_refused_action(venv):
    with pytest.raises(ValueError):
        venv.step(np.zeros((2, 3), dtype=np.int64))
    r = venv.step(np.ones((2, 3), dtype=np.int64))
    assert r.obs[:, 0, 0].tolist() == [1.0, 1.0], "the refused step never reached the envs"


def test_validate_false_skips_the_checks_but_not_the_shape():
    v = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, validate=False)
    v.reset()
    v.step(np.ones((2, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="actions must have shape"):
        v.step(np.ones((3, 1), dtype=np.int64))
    v.close()


def test_continuous_actions_outside_the_box_are_refused():
    v = mv.DummyVecEnv([lambda: gym.make("Pendulum-v1")] * 2)
    v.reset()
    actions = np.zeros((2, 1, 1), dtype=np.float32)
    actions[1, 0, 0] = 2.5
    with pytest.raises(ValueError, match=r"action \[2.5\] for env 1, agent 'agent_0' is outside the action space \[\[-2.0\], \[2.0\]\]"):
        v.step(actions)
    actions[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="outside the action space"):
        v.step(actions)
    v.step(np.zeros((2, 1, 1), dtype=np.float32))
    v.close()


def test_step_before_reset_and_double_step_async_are_refused():
    v = mv.DummyVecEnv([DyingAgentEnv])
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        v.step(np.ones((1, 3), dtype=np.int64))
    v.reset()
    v.step_async(np.ones((1, 3), dtype=np.int64))
    with pytest.raises(RuntimeError, match="step_async\\(\\) called twice"):
        v.step_async(np.ones((1, 3), dtype=np.int64))
    v.step_wait()
    with pytest.raises(RuntimeError, match="step_wait\\(\\) called without step_async\\(\\)"):
        v.step_wait()
    v.close()

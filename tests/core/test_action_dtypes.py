"""Discrete actions of every integer dtype (and Python ints) are accepted, with and
without action masks, and reach the envs as the same actions; out-of-range and
unavailable actions give the same clear ValueError in every dtype.

DyingAgentEnv masks action ``t % n`` at step t and pays ``action + 0.1 * agent +
0.01 * t``, so the reward shows which action each agent took. mpe2's simple_spread
has no masks (every action available).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv

INTEGER_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  ">i4", ">u8", "<u2"]  # and byte orders other than the machine's
SIGNED = [d for d in INTEGER_DTYPES if np.dtype(d).kind == "i"]


def as_form(actions: np.ndarray, form: str):
    """``actions`` (int64) as a numpy dtype, or as nested Python lists of ints."""
    return actions.tolist() if form == "list" else actions.astype(form)


# Available actions for DyingAgentEnv's agents at steps 0, 1, 2 (t % n is masked).
PLAN = np.array([[[1, 2, 1], [3, 1, 2]],
                 [[2, 3, 0], [0, 0, 2]],
                 [[3, 0, 1], [1, 1, 0]]])


def run_masked(form: str, backend: str = "dummy") -> list[mv.StepResult]:
    make = mv.SubprocVecEnv if backend == "subproc" else mv.DummyVecEnv
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    with make([DyingAgentEnv] * 2, env_seed=0, **kwargs) as venv:
        venv.reset()
        return [venv.step(as_form(actions, form)) for actions in PLAN]


@pytest.mark.parametrize("form", [*INTEGER_DTYPES, "list"])
def test_masked_env_takes_every_integer_dtype(form):
    results = run_masked(form)
    for t, (r, actions) in enumerate(zip(results, PLAN)):
        expected = actions + np.array([0.0, 0.1, 0.2]) + 0.01 * (t + 1)
        np.testing.assert_array_equal(r.reward, expected.astype(np.float32), err_msg=f"step {t}")
    reference = run_masked("int64")
    for r, ref in zip(results, reference):
        np.testing.assert_array_equal(r.obs, ref.obs)


@pytest.mark.parametrize("form", ["uint64", "int8", "list"])
def test_subproc_workers_get_the_same_actions(form):
    for r, ref in zip(run_masked(form, "subproc"), run_masked("int64")):
        np.testing.assert_array_equal(r.reward, ref.reward)
        np.testing.assert_array_equal(r.obs, ref.obs)


def spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)


@pytest.mark.parametrize("form", [*INTEGER_DTYPES, "list"])
def test_env_without_masks_takes_every_integer_dtype(form):
    actions = np.array([[4, 0, 3], [1, 2, 4]])
    with mv.DummyVecEnv([spread] * 2, env_seed=1) as venv, mv.DummyVecEnv([spread] * 2, env_seed=1) as ref:
        venv.reset(), ref.reset()
        for _ in range(3):
            r, expected = venv.step(as_form(actions, form)), ref.step(actions)
            np.testing.assert_array_equal(r.obs, expected.obs)
            np.testing.assert_array_equal(r.reward, expected.reward)
        with pytest.raises(ValueError, match=r"action 5 for env 1, agent 'agent_2' is out of range; allowed: 0..4"):
            venv.step(as_form(np.array([[4, 0, 3], [1, 2, 5]]), form))


@pytest.fixture
def masked():
    with mv.DummyVecEnv([DyingAgentEnv] * 2, env_seed=0) as venv:
        venv.reset()
        yield venv


@pytest.mark.parametrize("form", [*INTEGER_DTYPES, "list"])
def test_out_of_range_is_the_same_error_in_every_dtype(masked, form):
    actions = np.ones((2, 3), dtype=np.int64)
    actions[1, 2] = 4  # the batch's n_actions is 4 (a2's own 3 are padded with an unavailable one)
    with pytest.raises(ValueError, match=r"^action 4 for env 1, agent 'a2' is out of range; allowed: 0..3$"):
        masked.step(as_form(actions, form))
    actions[1, 2] = 200  # fits every dtype, int8 aside
    if form != "int8":
        with pytest.raises(ValueError, match=r"^action 200 for env 1, agent 'a2' is out of range; allowed: 0..3$"):
            masked.step(as_form(actions, form))
    actions[1, 2] = 3  # a2's padded action
    with pytest.raises(ValueError, match=r"^action 3 for env 1, agent 'a2' is not available; available now: \[1, 2\]$"):
        masked.step(as_form(actions, form))
    r = masked.step(as_form(np.ones((2, 3), dtype=np.int64), form))  # the refused steps never ran
    assert r.obs[:, 0, 0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("form", [*SIGNED, "list"])
def test_negative_actions_are_out_of_range(masked, form):
    actions = np.ones((2, 3), dtype=np.int64)
    actions[0, 1] = -1
    with pytest.raises(ValueError, match=r"^action -1 for env 0, agent 'a1' is out of range; allowed: 0..3$"):
        masked.step(as_form(actions, form))


@pytest.mark.parametrize("form", [*INTEGER_DTYPES, "list"])
def test_unavailable_is_the_same_error_in_every_dtype(masked, form):
    actions = np.ones((2, 3), dtype=np.int64)
    actions[0, 1] = 0  # masked at t=0
    with pytest.raises(ValueError, match=r"^action 0 for env 0, agent 'a1' is not available; available now: \[1, 2, 3\]$"):
        masked.step(as_form(actions, form))


@pytest.mark.parametrize("form", INTEGER_DTYPES)
def test_dead_agents_actions_are_ignored_in_every_dtype(masked, form):
    for actions in PLAN:  # a1 dies at step 3
        masked.step(as_form(actions, form))
    r = masked.step(as_form(np.ones((2, 3), dtype=np.int64), form))  # t=3: a0 and a1 may not take 3, a2 not 0
    assert not r.agent_mask[:, 1].any()
    # t=4: a0 may not take 0, a2 not 1; a dead agent's action is not looked at, even out of range.
    dead = np.array([[1, 100, 2], [1, 100, 2]])
    r = masked.step(as_form(dead, form))
    assert r.reward[:, 0].tolist() == pytest.approx([1.05, 1.05])


def test_non_integer_actions_are_refused_with_the_dtype():
    with mv.DummyVecEnv([DyingAgentEnv] * 2, env_seed=0) as venv:
        venv.reset()
        for bad, dtype in ((np.ones((2, 3)), "float64"), (np.ones((2, 3), bool), "bool"),
                           ([[1, 1, 1], [1, 1, "1"]], "<U21")):
            with pytest.raises(ValueError, match=f"discrete actions must be integers, got dtype {dtype}"):
                venv.step(bad)


FLOAT_FIX = (r"discrete actions must be integers, got dtype float64; if they are whole numbers, pass "
             r"actions\.astype\(np\.int64\) \(floats are refused, not rounded, so that 1\.7 never becomes 1\)$")
BOOL_FIX = r"discrete actions must be integers, got dtype bool; pass actions\.astype\(np\.int64\) \(False -> 0, True -> 1\)$"


@pytest.mark.parametrize("validate", [True, False])
def test_float_and_bool_actions_are_refused_naming_the_fix(validate):
    """Whole-number floats (np.zeros((E, A))) and bools are refused on a simultaneous env, with
    or without validation, naming the cast; 1.7 is never silently written as 1."""
    with mv.DummyVecEnv([DyingAgentEnv] * 2, env_seed=0, validate=validate) as venv:
        venv.reset()
        for bad, match in ((np.ones((2, 3)), FLOAT_FIX), (np.full((2, 3), 1.7), FLOAT_FIX),
                           (np.ones((2, 3), bool), BOOL_FIX)):
            with pytest.raises(ValueError, match=match):
                venv.step(bad)
        r = venv.step(np.ones((2, 3)).astype(np.int64))  # the fix named works, and nothing was written before
        assert r.reward[:, 0].tolist() == pytest.approx([1.01, 1.01])  # step 1: no refused step reached it


class _SpaceActions(gym.Env):
    """A gymnasium env with the given action space; the reward is the action's sum."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,))

    def __init__(self, action_space: gym.Space):
        self.action_space = action_space

    def reset(self, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        flat = [np.sum(a) for a in (action.values() if isinstance(action, dict) else [action])]
        return np.zeros(1, np.float32), float(sum(flat)), False, False, {}


@pytest.mark.parametrize("validate", [True, False])
def test_multidiscrete_and_tree_float_actions_are_refused_naming_the_fix(validate):
    multi = gym.spaces.MultiDiscrete([3, 4])
    with mv.DummyVecEnv([lambda: _SpaceActions(multi)] * 2, validate=validate) as venv:
        venv.reset()
        with pytest.raises(ValueError, match=FLOAT_FIX.replace("discrete", "MultiDiscrete", 1)):
            venv.step(np.full((2, 1, 2), 1.7))
        assert venv.step(np.ones((2, 1, 2), np.int64)).reward[:, 0].tolist() == [2.0, 2.0]
    tree = gym.spaces.Dict({"move": gym.spaces.Discrete(3)})
    with mv.DummyVecEnv([lambda: _SpaceActions(tree)] * 2, validate=validate) as venv:
        venv.reset()
        with pytest.raises(ValueError, match=BOOL_FIX):
            venv.step({"move": np.ones((2, 1), bool)})
        assert venv.step({"move": np.full((2, 1), 2)}).reward[:, 0].tolist() == [2.0, 2.0]

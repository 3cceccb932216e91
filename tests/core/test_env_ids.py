"""Which envs ``reset(env_ids=...)`` and ``call/get_attr/set_attr(indices=...)`` reach.

Ints, a sequence or array of ints, or a boolean mask of length num_envs (as
gymnasium's ``reset_mask``); anything else is a clear error. DyingAgentEnv's
observation starts with its step counter, so a reset env shows 0 and the others
the steps they took.
"""

from __future__ import annotations

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.scripted_envs import DyingAgentEnv

E = 4


def step_counters(r: mv.StepResult) -> list[int]:
    return r.obs[:, 0, 0].astype(int).tolist()


def stepped_twice(venv: mv.VecEnv) -> mv.StepResult:
    """Reset every env and step it twice with available actions (DyingAgentEnv masks action t % n)."""
    venv.reset()
    r = venv.step(np.ones((E, 3), dtype=np.int64))
    r = venv.step(np.zeros((E, 3), dtype=np.int64) + 2)
    assert step_counters(r) == [2] * E
    return r


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask", [
    np.array([False, True, False, True]),
    [False, True, False, True],
], ids=["numpy mask", "list of bools"])
def test_boolean_mask_resets_exactly_the_masked_envs(backend, mask, request):
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        before = stepped_twice(venv)
        r = venv.reset(env_ids=mask)
        assert step_counters(r) == [2, 0, 2, 0]
        # The envs left alone keep their rows; the reset ones start their episodes afresh.
        np.testing.assert_array_equal(r.obs[[0, 2]], before.obs[[0, 2]])
        assert r.agent_mask[[1, 3]].all() and not r.done[[1, 3]].any()
    # The same as naming the envs by index, in a twin batch (after the first is closed:
    # the Ray cluster has CPUs for one batch's actors at a time).
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as twin:
        stepped_twice(twin)
        by_index = twin.reset(env_ids=[1, 3])
        np.testing.assert_array_equal(r.obs, by_index.obs)
        np.testing.assert_array_equal(r.avail_actions, by_index.avail_actions)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_false_mask_resets_nothing(backend, request):
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        before = stepped_twice(venv)
        r = venv.reset(env_ids=np.zeros(E, dtype=bool))
        np.testing.assert_array_equal(r.obs, before.obs)
        assert r.infos == [{}] * E
        r = venv.step(np.zeros((E, 3), dtype=np.int64))  # t=2: action 0 is available to everyone
        assert step_counters(r) == [3] * E


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_get_attr_set_attr_take_a_mask(backend, request):
    mask = np.array([True, False, False, True])
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        stepped_twice(venv)
        venv.reset(env_ids=[3])
        assert venv.get_attr("t", indices=mask) == [2, 0]
        venv.set_attr("episode_len", [7, 9], indices=mask)
        assert venv.get_attr("episode_len") == [7, 6, 6, 9]
        assert venv.call("_mask", "a2", indices=mask)[1].tolist() == [0, 1, 1]  # env 3 at t=0
        assert venv.get_attr("t", indices=[True] * E) == [2, 2, 2, 0]


@pytest.mark.parametrize("env_ids", [3, np.int64(3), [3], (3,), np.array([3], dtype=np.uint8), range(3, 4)],
                         ids=["int", "numpy int", "list", "tuple", "uint8 array", "range"])
def test_integer_forms_name_the_same_env(env_ids):
    with mv.DummyVecEnv([DyingAgentEnv] * E, env_seed=0) as venv:
        stepped_twice(venv)
        assert step_counters(venv.reset(env_ids=env_ids)) == [2, 2, 2, 0]
        assert venv.get_attr("t", indices=env_ids) == [0]


@pytest.mark.parametrize("env_ids, error, message", [
    (np.array([True, False, True]), ValueError,
     r"a boolean env mask must have shape \(4,\) \(one flag per env\), got shape \(3,\)"),
    ([True, False, True, False, True], ValueError, r"must have shape \(4,\) .* got shape \(5,\)"),
    (np.ones((2, 2), dtype=bool), ValueError, r"must have shape \(4,\) .* got shape \(2, 2\)"),
    (True, ValueError, r"must have shape \(4,\) .* got shape \(\)"),
    ([1.0, 2.0], TypeError,
     r"env indices must be an int, a sequence of ints, or a boolean mask of length num_envs=4; "
     r"got \[1.0, 2.0\] \(dtype float64\)"),
    (["a"], TypeError, r"env indices must be an int, .* got \['a'\]"),
    (np.array([[0, 1]]), ValueError, r"env indices must be .*; got an array of shape \(1, 2\)"),
    # reset() takes 0..3, call/get_attr/set_attr -4..3 (see the tests below)
    ([0, 4], IndexError, r"env indices \[4\] out of range \[(0|-4), 4\)"),
    ([-5], IndexError, r"env indices \[-5\] out of range \[(0|-4), 4\)"),
], ids=["short mask", "long mask", "2-d mask", "bool scalar", "floats", "strings", "2-d ints", "too big",
        "too negative"])
def test_bad_env_ids_are_clear_errors_and_leave_the_batch_usable(env_ids, error, message):
    with mv.DummyVecEnv([DyingAgentEnv] * E, env_seed=0) as venv:
        stepped_twice(venv)
        with pytest.raises(error, match=message):
            venv.reset(env_ids=env_ids)
        for call in (lambda: venv.get_attr("t", indices=env_ids), lambda: venv.set_attr("t", 0, indices=env_ids),
                     lambda: venv.call("_mask", "a0", indices=env_ids)):
            with pytest.raises(error, match=message):
                call()
        assert venv.get_attr("t") == [2] * E  # nothing was reset or set
        r = venv.step(np.zeros((E, 3), dtype=np.int64))
        assert step_counters(r) == [3] * E


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_get_attr_set_attr_take_negative_indices_as_python_does(backend, request):
    """SB3's get_attr/set_attr/env_method take ``indices=-1`` and ``[0, -1]``: from the end, as a list does."""
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        stepped_twice(venv)
        venv.reset(env_ids=[3])
        assert venv.get_attr("t", indices=-1) == [0]
        assert venv.get_attr("t", indices=[0, -1]) == [2, 0]
        assert venv.get_attr("t", indices=np.array([-4, -2])) == [2, 2]
        venv.set_attr("episode_len", [7, 9], indices=[-3, -1])
        assert venv.get_attr("episode_len") == [6, 7, 6, 9]
        assert [m.tolist() for m in venv.call("_mask", "a2", indices=[-1, 0])] == [[0, 1, 1], [1, 1, 0]]
        with pytest.raises(IndexError, match=r"env indices \[-5\] out of range \[-4, 4\)"):
            venv.get_attr("t", indices=[0, -5])


def test_reset_refuses_negative_env_ids():
    """reset(env_ids) names envs by their index only: a negative id is an error there (as in send())."""
    with mv.DummyVecEnv([DyingAgentEnv] * E, env_seed=0) as venv:
        stepped_twice(venv)
        with pytest.raises(IndexError, match=r"env indices \[-1\] out of range \[0, 4\)"):
            venv.reset(env_ids=[-1])
        assert venv.get_attr("t") == [2] * E


def test_reset_naming_an_env_twice_is_an_error():
    with mv.DummyVecEnv([DyingAgentEnv] * E, env_seed=0) as venv:
        stepped_twice(venv)
        with pytest.raises(ValueError, match=r"env_ids name envs \[1\] more than once; name each env to reset once"):
            venv.reset(env_ids=[1, 3, 1])
        assert venv.get_attr("t") == [2] * E  # nothing was reset
        assert venv.get_attr("t", indices=[1, 1]) == [2, 2]  # reading twice is fine

"""GymVectorEnv with Text, Graph, Sequence, OneOf and custom spaces, against SyncVectorEnv.

gymnasium batches such spaces as a Tuple of per-env spaces: observations are a
tuple of the envs' values (inside dicts / tuples where the space nests them),
actions a tuple of per-env values, ``final_obs`` the envs' own values. The face
and ``SyncVectorEnv`` run the same env_fns, seeds and actions (``action_space.sample()``
of equally seeded spaces) and must return the same values, structures and types.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

import marl_vec as mv
from marl_vec.compat import GymVectorEnv
from tests.helpers.object_space_envs import (OBJECT_ACTION_ENVS, OBJECT_OBSERVATION_ENVS, cartpole_graph,
                                     cartpole_reused_graph, cartpole_text_action)
from tests.faces.test_gym_spaces import assert_same, run_both

E = 3


def face_and_sync(fn: Callable[[], gym.Env], mode: str, backend: str, copy: bool = True) -> tuple[GymVectorEnv, Any]:
    venv_cls = mv.DummyVecEnv if backend == "dummy" else mv.SubprocVecEnv
    ours = GymVectorEnv(venv_cls([fn] * E, env_seed=None, autoreset=mode, copy=copy))
    theirs = gym.vector.SyncVectorEnv([fn] * E, autoreset_mode=GymAutoreset[mode.upper()], copy=copy)
    return ours, theirs


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", ["same_step", "next_step"])
@pytest.mark.parametrize("fn", OBJECT_OBSERVATION_ENVS, ids=lambda fn: fn.__name__)
def test_object_observations_equal_sync_vector_env(fn, mode, backend):
    ours, theirs = face_and_sync(fn, mode, backend)
    assert isinstance(ours.observation_space, type(theirs.observation_space))
    finals = run_both(ours, theirs)
    if mode == "same_step":
        assert finals >= 2  # final_obs compared: the envs' own values
    ours.close(), theirs.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("fn", OBJECT_ACTION_ENVS, ids=lambda fn: fn.__name__)
def test_object_actions_equal_sync_vector_env(fn, backend):
    ours, theirs = face_and_sync(fn, "same_step", backend)
    assert isinstance(ours.action_space, gym.spaces.Tuple)  # as batch_space gives it: one space per env
    assert run_both(ours, theirs) >= 2
    ours.close(), theirs.close()


def test_observations_are_tuples_of_the_envs_values():
    ours, theirs = face_and_sync(cartpole_graph, "same_step", "dummy")
    obs, _ = ours.reset(seed=0)
    assert type(obs) is tuple and len(obs) == E
    assert all(type(o) is gym.spaces.GraphInstance for o in obs)
    assert obs in ours.observation_space
    ours.close(), theirs.close()


@pytest.mark.parametrize("copy_results", [True, False])
def test_copies_and_views_behave_as_sync_vector_env(copy_results):
    """The env changes its node array in place at every step: with copy=True neither face
    nor SyncVectorEnv hands it out (deep copies), with copy=False both do."""
    ours, theirs = face_and_sync(cartpole_reused_graph, "same_step", "dummy", copy=copy_results)
    results = []
    for envs in (ours, theirs):
        obs, _ = envs.reset(seed=0)
        kept = copy.deepcopy(obs)
        envs.step(np.zeros(E, np.int64))
        results.append(all(np.array_equal(o.nodes, k.nodes) for o, k in zip(obs, kept)))
    assert results == [copy_results, copy_results]
    ours.close(), theirs.close()


def test_bad_object_actions_raise_what_sync_vector_env_raises():
    ours, theirs = face_and_sync(cartpole_text_action, "same_step", "dummy")
    ours.reset(seed=0), theirs.reset(seed=0)
    for bad in (0, ("L", "R")):  # not iterable (gymnasium's CustomSpaceError), one action short (ValueError)
        with pytest.raises(Exception) as theirs_error:
            theirs.step(bad)
        with pytest.raises(type(theirs_error.value)):
            ours.step(bad)
    # (SyncVectorEnv stepped the first envs before it found the action missing; ours stepped none.)
    assert_same(ours.reset(seed=1), theirs.reset(seed=1))
    # A value outside the space reaches the env (gymnasium passes it on); here the env maps it to 1.
    assert_same(ours.step(("L", "X", "R"))[0], theirs.step(("L", "X", "R"))[0])
    ours.close(), theirs.close()

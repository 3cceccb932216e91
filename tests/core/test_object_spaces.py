"""Object leaves: Text, Graph, Sequence, OneOf and custom spaces of gymnasium envs, on every backend.

Such values have no fixed shape; the batch keeps them in ``(E, A)`` numpy object
arrays (never in shared memory: the process and Ray backends send them along
with their answers). Every backend must return what a plain loop over the
native envs gives with the same seeds and actions, final observations included,
and copies that later steps cannot change.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.object_space_envs import (cartpole_custom_space, cartpole_dict_with_graph, cartpole_graph,
                                     cartpole_one_of, cartpole_reused_graph, cartpole_sequence,
                                     cartpole_text, cartpole_text_action)
from tests.faces.test_gym_spaces import assert_same

E = 3
STEPS = 60


def native_loop(fn: Callable[[], gym.Env], actions: list[list[Any]]) -> list[tuple[list[Any], list[Any], list[bool]]]:
    """Per step: each env's observation, final observation (None unless it ended) and done,
    for envs seeded 0..E-1, reset at once when they end (same_step)."""
    envs = [fn() for _ in range(E)]
    obs = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
    out = [(list(obs), [None] * E, [False] * E)]
    for step_actions in actions:
        finals, dones = [None] * E, [False] * E
        for i, (env, action) in enumerate(zip(envs, step_actions)):
            o, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                finals[i], dones[i] = o, True
                o = env.reset()[0]
            obs[i] = o
        out.append((list(obs), finals, dones))
    return out


def object_column(values: list[Any]) -> np.ndarray:
    out = np.empty((len(values), 1), dtype=object)
    for i, value in enumerate(values):
        out[i, 0] = value
    return out


def as_tree(obs: Any, i: int) -> Any:
    """Env i, agent 0 of a batched observation (a tree of (E, 1, ...) arrays)."""
    if isinstance(obs, dict):
        return {key: as_tree(value, i) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(as_tree(value, i) for value in obs)
    return obs[i, 0]


def cartpole_actions(rng: np.random.Generator) -> list[list[Any]]:
    return [[int(a) for a in rng.integers(0, 2, E)] for _ in range(STEPS)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [cartpole_graph, cartpole_dict_with_graph, cartpole_sequence, cartpole_one_of],
                         ids=lambda fn: fn.__name__)
def test_object_observations_equal_the_native_loop_on_every_backend(fn, backend, request):
    actions = cartpole_actions(np.random.default_rng(3))
    expected = native_loop(fn, actions)
    with make_backend(backend, [fn] * E, request, env_seed=0) as venv:
        r = venv.reset()
        for i in range(E):
            assert_same(as_tree(r.obs, i), expected[0][0][i], f"reset env {i}")
        ended = 0
        for t, step_actions in enumerate(actions):
            r = venv.step(np.array(step_actions).reshape(E, 1))
            obs, finals, dones = expected[t + 1]
            np.testing.assert_array_equal(r.done, dones)
            for i in range(E):
                assert_same(as_tree(r.obs, i), obs[i], f"step {t} env {i}")
                if dones[i]:
                    assert_same(as_tree(r.final_obs, i), finals[i], f"step {t} final_obs env {i}")
                    ended += 1
        assert ended >= 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [cartpole_text_action, cartpole_custom_space], ids=lambda fn: fn.__name__)
def test_object_actions_reach_the_envs_as_given_on_every_backend(fn, backend, request):
    words = ("L", "R") if fn is cartpole_text_action else ("left", "right")
    rng = np.random.default_rng(4)
    actions = [[words[k] for k in rng.integers(0, 2, E)] for _ in range(STEPS)]
    expected = native_loop(fn, actions)
    with make_backend(backend, [fn] * E, request, env_seed=0) as venv:
        assert venv.spec.action_space == gym.vector.utils.batch_space(fn().action_space, 1)
        venv.reset()
        for t, step_actions in enumerate(actions):
            # Per env a sequence of one value per agent, or an (E, 1) object array: the same.
            given = [[a] for a in step_actions] if t % 2 else object_column(step_actions)
            r = venv.step(given)
            for i in range(E):
                assert_same(as_tree(r.obs, i), expected[t + 1][0][i], f"step {t} env {i}")


def test_object_actions_outside_the_space_or_of_the_wrong_count_are_refused():
    with mv.DummyVecEnv([cartpole_text_action] * E) as venv:
        venv.reset()
        with pytest.raises(ValueError, match=r"action 'X' for env 1, agent 'agent_0' is not in the action space "
                                             r"Text\(1, 1, charset=LR\)"):
            venv.step([["L"], ["X"], ["R"]])
        with pytest.raises(ValueError, match=r"expected 3 items \(object actions of shape \(3, 1\): one value per "
                                             r"env and agent\), got list"):
            venv.step([["L"], ["R"]])
        with pytest.raises(ValueError, match=r"expected 1 items at \[0\]"):
            venv.step(["L", "R", "L"])  # a string is one value, not a sequence of agents' values


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_copies_are_deep_and_views_follow_the_envs(backend, request):
    """copy=True: a result keeps its values however the envs change theirs later (the env
    here changes its node array in place); copy=False hands out the envs' own values."""
    with make_backend(backend, [cartpole_reused_graph] * E, request, env_seed=0) as venv:
        first = venv.reset()
        kept = copy.deepcopy(first.obs)
        venv.step(np.zeros((E, 1), np.int64))
        for i in range(E):
            assert_same(first.obs[i, 0], kept[i, 0])
            assert first.obs[i, 0].nodes is not venv.buffers.obs[i, 0].nodes
    with mv.DummyVecEnv([cartpole_reused_graph] * E, env_seed=0, copy=False) as venv:
        r = venv.reset()
        assert r.obs is venv.buffers.obs
        before = r.obs[0, 0].nodes.copy()
        venv.step(np.zeros((E, 1), np.int64))
        assert not np.array_equal(r.obs[0, 0].nodes, before)  # the env's own array, changed by the env


def test_object_leaves_are_kept_out_of_shared_memory():
    with mv.SubprocVecEnv([cartpole_dict_with_graph] * 4, num_workers=2, env_seed=0) as venv:
        buf = venv.buffers
        assert buf.object_fields == ["obs/graph", "obs/tag", "final_obs/graph", "final_obs/tag"]
        assert buf.object_actions == []
        for name in buf.object_fields:
            array = dict(buf.arrays())[name]
            assert array.dtype == object and array.base is None  # its own memory, not the shared block
        assert dict(buf.arrays())["obs/pos"].base is not None  # the array leaf: a view of the block


def test_spaces_of_no_fixed_shape_stay_refused_for_pettingzoo_envs():
    """The PettingZoo adapter builds its spaces with these two; they refuse what only
    single-agent gymnasium envs get (object leaves, MultiDiscrete of rank > 1)."""
    from marl_vec.envs.gym import action_spec_of
    from marl_vec.core.spaces import AgentLayout

    with pytest.raises(TypeError, match=r"observation of agent 'a': Text\(.*\) is not supported here; allowed: "
                                        r"Box, .*only for gymnasium envs"):
        AgentLayout([gym.spaces.Text(3)], ["a"], "observation")
    for space in (gym.spaces.Text(3), gym.spaces.MultiDiscrete(np.full((2, 2), 3))):
        with pytest.raises(TypeError, match=r"(?s)pz, agent 'a': action space .* is not supported; allowed: Discrete, "
                                            r"Box, MultiDiscrete \(one axis\)"):
            action_spec_of(space, "pz, agent 'a'")


def test_spec_describes_object_leaves():
    with mv.DummyVecEnv([cartpole_custom_space] * 2) as venv:
        spec = venv.spec
        assert spec.obs_shape == () and spec.obs_dtype == object
        assert isinstance(spec.action, mv.core.spec.ObjectAction) and spec.action.space() == cartpole_custom_space().action_space
        assert "Direction" in spec.describe()

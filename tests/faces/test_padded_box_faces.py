"""Faces over agents whose Box actions differ in size or bounds: MaMuJoCo Humanoid 9|8 (9 and 8
joints), MPE simple_world_comm (the leader's 9 values against the others' 5) and agents with bounds
of their own. TorchRL's specs, RLlib's and XuanCe's per-agent spaces state each agent's own bounds,
so that a policy squashed into them is never refused by the VecEnv's per-agent check; the padding,
which the env ignores, gets finite bounds."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.spec import ContinuousAction
from tests.helpers.own_bounds_env import OwnBounds

S = gym.spaces


def _own_bounds(num_envs: int = 2, **kwargs) -> mv.VecEnv:
    return mv.make_vec([OwnBounds] * num_envs, backend="dummy", env_seed=0, **kwargs)


def _humanoid(**kwargs) -> mv.VecEnv:
    pytest.importorskip("gymnasium_robotics", reason="the mamujoco extra is not installed")
    return mv.make({"env": {"family": "mamujoco", "id": "Humanoid/9|8", "kwargs": {"max_episode_steps": 4}},
                    "vec": {"num_envs": 2, "backend": "dummy", "env_seed": 0}}, **kwargs)


def _world_comm(**kwargs) -> mv.VecEnv:
    import importlib

    module = importlib.import_module("mpe2.simple_world_comm_v3")
    fn = functools.partial(module.parallel_env, continuous_actions=True, max_cycles=4)
    return mv.make_vec([fn] * 2, backend="dummy", env_seed=0, **kwargs)


MAKERS = {"humanoid_9_8": _humanoid, "world_comm": _world_comm, "own_bounds": _own_bounds}


def test_agent_bounds_are_each_agents_own_and_the_padding_finite():
    with _own_bounds() as venv:
        low, high = venv.spec.action.agent_bounds(2)
        np.testing.assert_array_equal(low, [[-1, -1], [-3, -3]])
        np.testing.assert_array_equal(high, [[1, 1], [3, 3]])
        assert low.dtype == np.float32
        assert venv.spec.action.agent_space(1, 2) == S.Box(-3, 3, (2,), np.float32)
        assert venv.spec.single_agent_action_space == S.Box(-3, 3, (2,), np.float32)  # every agent's bounds
    with _humanoid() as venv:
        action = venv.spec.action
        assert action.agent_shapes == ((9,), (8,)) and np.isinf(action.low[1, 8])
        low, high = action.agent_bounds(2)
        np.testing.assert_array_equal(low, np.full((2, 9), -0.4, np.float32))  # agent_1's 9th: the union's
        np.testing.assert_array_equal(high, np.full((2, 9), 0.4, np.float32))


def test_an_entry_no_agent_has_gets_minus_one_to_one():
    """Shapes (2, 3) and (3, 2) pad to (3, 3): entry (2, 2) is no agent's."""
    boxes = (S.Box(-2, 2, (2, 3), np.float32), S.Box(-5, 5, (3, 2), np.float32))
    with mv.make_vec([functools.partial(OwnBounds, boxes)], backend="dummy") as venv:
        action = venv.spec.action
        assert isinstance(action, ContinuousAction) and action.shape == (3, 3)
        space = venv.spec.single_agent_action_space
        assert (space.low[2, 2], space.high[2, 2]) == (-1, 1)
        assert (space.low[0, 0], space.high[0, 0]) == (-5, 5) and (space.low[0, 2], space.high[0, 2]) == (-2, 2)
        low, high = action.agent_bounds(2)
        assert (low[0, 0, 2], low[1, 0, 2], low[1, 2, 0]) == (-2, -2, -5)  # agent b's (0, 2) is padding
        assert np.isfinite(low).all() and np.isfinite(high).all()
        space.seed(0)
        venv.reset()
        venv.step(np.stack([space.sample(), space.sample()])[None].clip(low, high))


@pytest.mark.parametrize("name", list(MAKERS))
def test_torchrl_specs_hold_each_agents_own_bounds_and_its_random_actions_are_served(name):
    torch = pytest.importorskip("torch")
    from marl_vec.compat.torchrl import TorchRLEnv

    with MAKERS[name]() as venv:
        low, high = venv.spec.action.agent_bounds(venv.spec.n_agents)
        env = TorchRLEnv(venv, group_map="prefix", seed=0)
        index = {agent: a for a, agent in enumerate(venv.spec.agents)}
        for group, members in env.group_map.items():
            box = env.action_spec[group, "action"].space
            rows = [index[m] for m in members]
            np.testing.assert_array_equal(box.low.numpy(), np.broadcast_to(low[rows], box.low.shape))
            np.testing.assert_array_equal(box.high.numpy(), np.broadcast_to(high[rows], box.high.shape))
        torch.manual_seed(0)
        rollout = env.rollout(7, break_when_any_done=False)  # random actions from the spec, through episode ends
        assert rollout["next", "done"].any()
        if name == "own_bounds":  # b's actions use its own range, and what the env got is what was sent
            acts = rollout["a", "action"], rollout["b", "action"]
            assert acts[0].abs().max() <= 1 < acts[1].abs().max() <= 3
            np.testing.assert_allclose(rollout["next", "b", "reward"][..., 0, 0].numpy(),
                                       acts[1][..., 0, :].sum(-1).numpy(), rtol=1e-6)
        env.close()


@pytest.mark.parametrize("name", list(MAKERS))
def test_xuance_spaces_are_per_agent_and_actions_are_clipped_to_each_agents_own(name):
    from marl_vec.compat.xuance import XuanCeVecEnv

    venv = MAKERS[name](reward_dtype="float64")
    face = XuanCeVecEnv(venv, max_episode_steps=3)
    low, high = venv.spec.action.agent_bounds(venv.spec.n_agents)
    for a, agent in enumerate(face.agents):
        assert face.action_space[agent] == S.Box(low[a], high[a], venv.spec.action_shape, np.float32)
    face.reset()
    _, rewards, *_ = face.step([{agent: np.full(venv.spec.action_shape, 5.0, np.float32) for agent in face.agents}] * 2)
    if name == "own_bounds":  # 5 is out of both: a gets 1 + 1, b gets 3 + 3
        assert rewards[0] == {"a": 2.0, "b": 6.0}
    face.close()


@pytest.mark.parametrize("name", list(MAKERS))
def test_rllib_spaces_are_per_agent(name):
    pytest.importorskip("ray.rllib")
    from marl_vec.compat.rllib.vector_env import MarlVecMultiAgentEnv

    with MAKERS[name]() as venv:
        env = MarlVecMultiAgentEnv(venv)
        low, high = venv.spec.action.agent_bounds(venv.spec.n_agents)
        for a, agent in enumerate(venv.spec.agents):
            assert env.single_action_spaces[agent] == S.Box(low[a], high[a], venv.spec.action_shape, np.float32)
        assert env.envs[0].action_spaces == env.single_action_spaces


def _mamujoco_splits() -> list[str]:
    from marl_vec.envs.mamujoco import SPLITS

    example = {"ManySegmentAnt": "2x3", "ManySegmentSwimmer": "4x1"}
    return [f"{scenario}/{example.get(scenario, split)}" for scenario, splits in SPLITS.items() for split in splits]


@pytest.mark.parametrize("env_id", _mamujoco_splits())
def test_torchrl_serves_every_mamujoco_split(env_id):
    """The matrix behind the examples above: each split's spec holds its agents' own bounds, and a
    rollout of the spec's random actions through an episode end is served (none is refused)."""
    pytest.importorskip("gymnasium_robotics", reason="the mamujoco extra is not installed")
    pytest.importorskip("torch")
    from marl_vec.compat.torchrl import TorchRLEnv

    config = {"env": {"family": "mamujoco", "id": env_id, "kwargs": {"max_episode_steps": 3}},
              "vec": {"num_envs": 2, "backend": "dummy", "env_seed": 0}}
    with mv.make(config) as venv:
        env = TorchRLEnv(venv, seed=0)
        low, high = venv.spec.action.agent_bounds(venv.spec.n_agents)
        box = env.action_spec["agents", "action"].space
        np.testing.assert_array_equal(box.low.numpy(), np.broadcast_to(low, box.low.shape))
        np.testing.assert_array_equal(box.high.numpy(), np.broadcast_to(high, box.high.shape))
        rollout = env.rollout(4, break_when_any_done=False)
        assert rollout["next", "truncated"].any() or rollout["next", "terminated"].any()
        env.close()

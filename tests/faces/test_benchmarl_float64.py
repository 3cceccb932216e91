"""MarlVecTask over an env with float64 observations and state (MaMuJoCo): BenchMARL's float32
models get them as float32 (a ``DoubleToFloat`` transform, as BenchMARL's own MeltingPot task
adds), and its MAPPO trains on HalfCheetah 6x1 with Box actions of one joint per agent."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("benchmarl")
pytest.importorskip("gymnasium_robotics", reason="the mamujoco extra is not installed: pip install 'marl_vec[mamujoco]'")

import numpy as np
from benchmarl.algorithms import MappoConfig
from torchrl.envs import DoubleToFloat, TransformedEnv

from marl_vec.compat.benchmarl import MarlVecTask
from tests.faces.test_benchmarl import _experiment
from tests.faces.test_torchrl import _one_thread  # noqa: F401

CHEETAH = {"env": {"family": "mamujoco", "id": "HalfCheetah/6x1", "kwargs": {"max_episode_steps": 50}},
           "vec": {"num_envs": 2, "backend": "dummy", "env_seed": 0}}
SPREAD = {"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3"}, "vec": {"num_envs": 1, "backend": "dummy"}}


def test_float64_observations_and_state_reach_benchmarl_as_float32():
    task = MarlVecTask.from_config(CHEETAH)
    env = task.get_env_fun(2, True, 0, "cpu")()
    transforms = task.get_env_transforms(env)
    assert [type(t) for t in transforms] == [DoubleToFloat]
    raw = env.reset()
    assert raw["agents", "observation"].dtype == torch.float64 and raw["state"].dtype == torch.float64
    wrapped = TransformedEnv(task.get_env_fun(2, True, 0, "cpu")(), transforms[0])
    out = wrapped.reset()
    assert out["agents", "observation"].dtype == torch.float32 and out["state"].dtype == torch.float32
    np.testing.assert_array_equal(out["agents", "observation"].numpy(),
                                  raw["agents", "observation"].numpy().astype(np.float32))
    assert task.observation_spec(wrapped)["agents", "observation"].dtype == torch.float32
    env.close(), wrapped.close()


def test_float32_envs_get_no_transform():
    task = MarlVecTask.from_config(SPREAD)
    env = task.get_env_fun(1, False, 0, "cpu")()
    assert task.get_env_transforms(env) == []
    env.close()


def test_benchmarl_mappo_trains_on_halfcheetah_6x1(tmp_path):
    task = MarlVecTask.from_config(CHEETAH)
    experiment = _experiment(task, MappoConfig, tmp_path, max_n_frames=200, on_policy_collected_frames_per_batch=100,
                             on_policy_n_envs_per_worker=2, on_policy_minibatch_size=50, prefer_continuous_actions=True)
    assert experiment.group_map == {"agents": [f"agent_{i}" for i in range(6)]}
    experiment.run()
    assert experiment.total_frames == 200


def test_benchmarl_mappo_trains_on_humanoid_9_8_with_each_agents_own_action_size(tmp_path):
    """9 and 8 joints: agent_1's actions are padded to 9, its ninth entry bounded like agent_0's."""
    config = {"env": {"family": "mamujoco", "id": "Humanoid/9|8", "kwargs": {"max_episode_steps": 50}},
              "vec": {"num_envs": 2, "backend": "dummy", "env_seed": 0}}
    task = MarlVecTask.from_config(config)
    experiment = _experiment(task, MappoConfig, tmp_path, max_n_frames=200, on_policy_collected_frames_per_batch=100,
                             on_policy_n_envs_per_worker=2, on_policy_minibatch_size=50, prefer_continuous_actions=True)
    box = experiment.test_env.action_spec["agents", "action"].space
    np.testing.assert_array_equal(box.high[..., 8].numpy(), np.float32(0.4))  # finite on the padding, not inf
    experiment.run()
    assert experiment.total_frames == 200

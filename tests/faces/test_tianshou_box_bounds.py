"""The Tianshou face's agent axis over agents with Box actions of their own bounds: the axis's
``(A, *shape)`` Box holds each agent's bounds, so Tianshou's action scaling maps a policy's
``[-1, 1]`` outputs into each agent's own range (a union would send agent ``a`` actions
outside its Box, which the VecEnv refuses).

Runs in .venv-tianshou (scripts/install/install_tianshou_venv.sh); skipped where tianshou is not installed.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.own_bounds_env import OwnBounds

pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")

import tianshou as ts  # noqa: E402
from tianshou.algorithm.algorithm_base import Policy  # noqa: E402
from tianshou.data import Batch, CollectStats  # noqa: E402

from marl_vec.compat.tianshou import TianshouVectorEnv  # noqa: E402


class UniformPolicy(Policy):
    """Uniform in [-1, 1] on every entry; Tianshou's action scaling maps it into the space."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rng = np.random.default_rng(0)

    def forward(self, batch, state=None, **kwargs):
        shape = (len(batch.obs.obs), *self.action_space.shape)
        return Batch(act=self._rng.uniform(-1, 1, shape).astype(np.float32), state=state)


def test_the_axis_box_holds_each_agents_bounds_and_scaled_actions_are_served():
    face = TianshouVectorEnv(mv.make_vec([OwnBounds] * 2, backend="dummy", env_seed=0), agents="axis")
    space = face.action_space[0]
    assert space == gym.spaces.Box(np.array([[-1, -1], [-3, -3]], np.float32),
                                   np.array([[1, 1], [3, 3]], np.float32), (2, 2), np.float32)
    face.seed(0)
    policy = UniformPolicy(action_space=space, action_scaling=True, action_bound_method="clip")
    collector = ts.data.Collector[CollectStats](policy, face, ts.data.VectorReplayBuffer(200, 2))
    collector.reset()
    stats = collector.collect(n_episode=6)  # 3-step episodes: the env's reward is the sum of what it got
    assert stats.n_collected_episodes == 6
    rew = collector.buffer.sample(0)[0].rew  # every stored step
    assert np.abs(rew[:, 0]).max() <= 2 < np.abs(rew[:, 1]).max() <= 6
    face.close()

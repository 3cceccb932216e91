"""The AgileRL face over agents with Box actions of their own bounds: each agent's space is the
one AgileRL's own vec env gives it, so MADDPG scales each agent's actions into its own range
(a union would send agent ``a`` actions outside its Box, which the VecEnv refuses).

Runs in .venv-agilerl (scripts/install/install_agilerl_venv.sh); skipped where AgileRL is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.own_bounds_env import OwnBounds

pytest.importorskip("agilerl", reason="AgileRL needs its own venv: bash scripts/install/install_agilerl_venv.sh")

import torch  # noqa: E402
from agilerl.algorithms import MADDPG  # noqa: E402
from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv  # noqa: E402

from marl_vec.compat import AgileRLVecEnv  # noqa: E402
from tests.faces.test_agilerl import spaces_of  # noqa: E402


def test_each_agents_space_is_agilerls_own_and_maddpg_actions_are_served():
    native = AsyncPettingZooVecEnv([OwnBounds] * 2)
    face = AgileRLVecEnv(mv.DummyVecEnv([OwnBounds] * 2, env_seed=0, reward_dtype="float64"))
    try:
        assert spaces_of(face) == spaces_of(native)  # a: [-1, 1], b: [-3, 3]
        torch.manual_seed(0)
        obs_space, act_space = spaces_of(face)
        agent = MADDPG(obs_space, act_space, agent_ids=list(face.agents), vect_noise_dim=2, device="cpu")
        obs, info = face.reset(seed=0)
        received = {"a": [], "b": []}
        for _ in range(7):  # through two episode ends (3 steps each)
            action, _ = agent.get_action(obs=obs, infos=info)
            obs, reward, *_, info = face.step(action)
            for name in received:  # the env's reward is the sum of the action it got
                np.testing.assert_allclose(reward[name], np.sum(action[name], axis=-1), rtol=1e-6)
                received[name].append(np.abs(action[name]).max())
        assert max(received["a"]) <= 1 and max(received["b"]) <= 3  # each within its own Box (the VecEnv checks too)
    finally:
        face.close()
        native.close()

"""A CleanRL-style PPO (scripts/cleanrl_ppo.py) learns the same through GymVectorEnv as through SyncVectorEnv."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat import GymVectorEnv

torch = pytest.importorskip("torch", reason="the examples extra")

_PATH = Path(__file__).resolve().parents[2] / "scripts" / "cleanrl_ppo.py"


@pytest.fixture(scope="module")
def ppo():
    spec = importlib.util.spec_from_file_location("cleanrl_ppo", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cleanrl_ppo"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical runs
    yield module
    torch.set_num_threads(threads)
    sys.modules.pop("cleanrl_ppo", None)


@pytest.mark.parametrize("mode, backend", [("same_step", "dummy"), ("same_step", "subproc"), ("next_step", "dummy")])
def test_ppo_on_the_face_equals_ppo_on_sync_vector_env(ppo, mode, backend):
    # 4 envs x 128 steps x 6 iterations: 3,072 steps, several dozen episodes.
    args = ppo.Args(seed=1, total_timesteps=3072)
    fns = [ppo.make_env() for _ in range(args.num_envs)]
    theirs = ppo.train(gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode[mode.upper()]), args)
    ours = ppo.train(GymVectorEnv(mv.make_vec(fns, backend=backend, env_seed=None, autoreset=mode)), args)
    assert len(theirs.episode_returns) >= 40
    assert ours.episode_returns == theirs.episode_returns
    assert ours.episode_lengths == theirs.episode_lengths
    assert len(ours.parameters) == len(theirs.parameters) == 12
    for a, b in zip(ours.parameters, theirs.parameters):
        np.testing.assert_array_equal(a, b)

"""A CleanRL-style PPO (scripts/train/cleanrl_ppo.py) learns the same through GymVectorEnv as through SyncVectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat import GymVectorEnv
from tests.helpers.scripts import script_module

torch = pytest.importorskip("torch", reason="the examples extra")


@pytest.fixture(scope="module")
def ppo():
    with script_module("cleanrl_ppo", torch) as module:
        yield module


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


# -- the loop on torch tensors (Args.array_backend="torch") ----------------------------------

class _ConversionSpy:
    """The script's ``torch`` module, counting conversions of numpy arrays to tensors
    (``torch.Tensor(a)``, ``torch.tensor(a)``, ``as_tensor``, ``from_numpy``, ``asarray``)."""

    def __init__(self, real):
        self._real = real
        self.numpy_args: list[str] = []
        for name in ("Tensor", "tensor", "as_tensor", "from_numpy", "asarray"):
            setattr(self, name, self._spy(name, getattr(real, name)))

    def _spy(self, name, real):
        def call(*args, **kwargs):
            if args and isinstance(args[0], (np.ndarray, np.generic)):
                self.numpy_args.append(name)
            return real(*args, **kwargs)
        return call

    def __getattr__(self, name):
        return getattr(self._real, name)


def _train_spied(ppo, monkeypatch, envs, args):
    spy = _ConversionSpy(torch)
    monkeypatch.setattr(ppo, "torch", spy)
    try:
        return ppo.train(envs, args), spy.numpy_args
    finally:
        monkeypatch.setattr(ppo, "torch", torch)


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_ppo_on_torch_tensors_equals_ppo_on_numpy(ppo, monkeypatch, mode):
    """array_backend="torch": the same episodes and bit-identical parameters as the numpy loop
    (on the numpy face and on SyncVectorEnv), with no numpy -> torch conversion in the loop."""
    args = ppo.Args(seed=1, total_timesteps=2048)
    torch_args = ppo.Args(seed=1, total_timesteps=2048, array_backend="torch")
    fns = [ppo.make_env() for _ in range(args.num_envs)]
    on_numpy, numpy_conversions = _train_spied(
        ppo, monkeypatch, GymVectorEnv(mv.make_vec(fns, env_seed=None, autoreset=mode)), args)
    on_torch, torch_conversions = _train_spied(
        ppo, monkeypatch, GymVectorEnv(mv.make_vec(fns, env_seed=None, autoreset=mode, array_backend="torch")),
        torch_args)
    theirs = ppo.train(gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode[mode.upper()]), args)
    # The spy sees the numpy loop's conversions (obs, rewards, dones at every step) and none on tensors.
    assert numpy_conversions.count("Tensor") >= 2 * 512 and torch_conversions == []
    assert len(on_numpy.episode_returns) >= 20
    for other in (on_numpy, theirs):
        assert on_torch.episode_returns == other.episode_returns
        assert on_torch.episode_lengths == other.episode_lengths
        for a, b in zip(on_torch.parameters, other.parameters):
            np.testing.assert_array_equal(a, b)


def test_ppo_on_the_torch_face_equals_ppo_on_gymnasiums_numpy_to_torch(ppo):
    """The same loop on gymnasium's NumpyToTorch(SyncVectorEnv) (next-step: in same-step mode
    NumpyToTorch raises on final_obs) learns the same parameters as on the torch face."""
    pytest.importorskip("array_api_compat", reason="gymnasium's array wrappers (gymnasium[array-api])")
    from gymnasium.wrappers.vector import NumpyToTorch

    args = ppo.Args(seed=1, total_timesteps=2048, array_backend="torch")
    fns = [ppo.make_env() for _ in range(args.num_envs)]
    theirs = ppo.train(NumpyToTorch(gym.vector.SyncVectorEnv(fns)), args)
    ours = ppo.train(GymVectorEnv(mv.make_vec(fns, env_seed=None, autoreset="next_step", array_backend="torch")), args)
    assert len(ours.episode_returns) >= 20 and ours.episode_returns == theirs.episode_returns
    for a, b in zip(ours.parameters, theirs.parameters):
        np.testing.assert_array_equal(a, b)

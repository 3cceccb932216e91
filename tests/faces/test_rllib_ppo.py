"""Proof 1 of issue 35: RLlib's PPO (new API stack, torch, CPU; RLlib's own code, unchanged)
on MPE simple_spread with one env per runner samples identical episodes and learns
identical parameters natively (PettingZoo through RLlib's ``ParallelPettingZooEnv``,
RLlib's ``MultiAgentEnvRunner``) and through the face (``MarlVecEnvRunner``) on
DummyVecEnv, SubprocVecEnv and RayVecEnv (actors on the Ray instance RLlib started),
at the same seed, over 3 training iterations.

Rewards are float64 (``reward_dtype``'s default in ``env_config``): PettingZoo's own
Python floats, so the returns RLlib computes from them are the same to the bit.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from tests.helpers.rllib_runs import assert_same_runs, ppo_config, train  # noqa: E402


@pytest.fixture(scope="module")
def native_run():
    return train(ppo_config("native"))


@pytest.mark.parametrize("backend", ["dummy", "subproc", "ray"])
def test_ppo_one_env_per_runner_is_identical_to_native(native_run, backend):
    ours = train(ppo_config("face", backend=backend))
    assert_same_runs(ours, native_run)
    sampled, _, returns = ours
    assert any(chunk[3] for chunk in sampled)  # episodes ended (max_cycles=25, truncated) and went on

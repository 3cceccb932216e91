"""Proof 2 of issue 35: with 8 envs per runner, RLlib's PPO through the face (one marl_vec
batch of 8, on DummyVecEnv and SubprocVecEnv) samples the same episodes
and learns the same parameters as through RLlib's own ``SyncVectorMultiAgentEnv`` over
8 ``ParallelPettingZooEnv``s of the same envs, at the same seed (env i seeded
``seed + i`` by both), over 3 training iterations.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from tests.helpers.rllib_runs import assert_same_runs, ppo_config, train  # noqa: E402

ENVS = 8


@pytest.fixture(scope="module")
def native_run():
    return train(ppo_config("native", num_envs=ENVS, fragment=25))


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_ppo_eight_envs_per_runner_equals_rllibs_sync_vector_env(native_run, backend):
    ours = train(ppo_config("face", num_envs=ENVS, backend=backend, fragment=25))
    assert_same_runs(ours, native_run)
    sampled = ours[0]
    assert len({id(c) for c in sampled}) >= 3 * ENVS  # every env's chunks, each iteration
    assert sum(chunk[3] for chunk in sampled) >= ENVS  # every env finished an episode (max_cycles=25)

"""marl_vec.compat.AgileRLVecEnv: AgileRL's own multi-agent trainers run on it unchanged.

Runs in the AgileRL venv (scripts/install_agilerl_venv.sh builds .venv-agilerl; .ci/run
runs this file there): AgileRL 2.58 pins pettingzoo<1.27 and tensordict==0.13.0, which
the main venv does not have. The proof: IPPO and MADDPG on mpe2's simple_spread, 2 envs,
through AgileRL's ``train_multi_agent_on_policy`` / ``train_multi_agent_off_policy``, give
exactly the fitness they give through AgileRL's own ``AsyncPettingZooVecEnv`` with the
same seeds.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip(
    "agilerl",
    reason="AgileRL is not installed here: it needs its own venv (bash scripts/install_agilerl_venv.sh, "
    "then .venv-agilerl/bin/python -m pytest tests/test_compat_agilerl.py)",
)
import torch  # noqa: E402  (after the skip: torch comes with agilerl)
from agilerl.algorithms import IPPO, MADDPG  # noqa: E402
from agilerl.components.replay_buffer import ReplayBuffer  # noqa: E402
from agilerl.training.train_multi_agent_off_policy import train_multi_agent_off_policy  # noqa: E402
from agilerl.training.train_multi_agent_on_policy import train_multi_agent_on_policy  # noqa: E402
from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv  # noqa: E402
from agilerl.vector.pz_vec_env import PettingZooVecEnv  # noqa: E402
from mpe2 import simple_spread_v3  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.compat import AgileRLVecEnv  # noqa: E402

NUM_ENVS = 2
SEED = 0
KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}


def make_native_env():
    return simple_spread_v3.parallel_env(**KWARGS)


def native_vec() -> AsyncPettingZooVecEnv:
    return AsyncPettingZooVecEnv([make_native_env] * NUM_ENVS)


def face_vec(action_mask: bool = True) -> AgileRLVecEnv:
    venv = mv.DummyVecEnv([make_native_env] * NUM_ENVS, env_seed=SEED, reward_dtype="float64")
    return AgileRLVecEnv(venv, action_mask=action_mask)


def seed_everything() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    random.seed(SEED)


def spaces_of(env: PettingZooVecEnv):
    from gymnasium import spaces

    obs = spaces.Dict({a: env.single_observation_space(a) for a in env.agents})
    act = spaces.Dict({a: env.single_action_space(a) for a in env.agents})
    return obs, act


def train_ippo(env: PettingZooVecEnv) -> list:
    seed_everything()
    # The trainer resets unseeded: seed both vec envs once here, alike.
    env.reset(seed=SEED)
    obs_space, act_space = spaces_of(env)
    agent = IPPO(obs_space, act_space, agent_ids=list(env.agents), learn_step=100, batch_size=50, device="cpu")
    _, fitnesses = train_multi_agent_on_policy(
        env, "simple_spread", "IPPO", [agent], max_steps=600, evo_steps=200, eval_steps=25,
        verbose=False, wb=False,
    )
    env.close()
    return fitnesses


def train_maddpg(env: PettingZooVecEnv) -> list:
    seed_everything()
    env.reset(seed=SEED)
    obs_space, act_space = spaces_of(env)
    agent = MADDPG(obs_space, act_space, agent_ids=list(env.agents), batch_size=32, learn_step=10, vect_noise_dim=NUM_ENVS, device="cpu")
    memory = ReplayBuffer(max_size=10_000, device="cpu")
    _, fitnesses = train_multi_agent_off_policy(
        env, "simple_spread", "MADDPG", [agent], memory, max_steps=400, evo_steps=200, eval_steps=25,
        verbose=False, wb=False,
    )
    env.close()
    return fitnesses


@pytest.fixture(autouse=True)
def _files_to_tmp_path(tmp_path, monkeypatch):
    # Whatever the trainers write (none expected: no checkpoints, no wandb) lands in tmp_path.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")


def test_ippo_fitness_through_the_face_equals_agilerls_own_vec_env():
    # No action masks in infos for IPPO: AgileRL 2.58's IPPO raises on numpy masks (its bug).
    native = train_ippo(native_vec())
    face = train_ippo(face_vec(action_mask=False))
    print("IPPO fitness", native, face)
    assert len(native) == len(face) > 0
    assert face == native


def test_maddpg_fitness_through_the_face_equals_agilerls_own_vec_env():
    native = train_maddpg(native_vec())
    face = train_maddpg(face_vec())
    print("MADDPG fitness", native, face)
    assert len(native) == len(face) > 0
    assert face == native

"""marl_vec.compat.AgileRLVecEnv: AgileRL's own multi-agent trainers run on it unchanged.

Runs in the AgileRL venv (scripts/install/install_agilerl_venv.sh builds .venv-agilerl; .ci/run
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
    reason="AgileRL is not installed here: it needs its own venv (bash scripts/install/install_agilerl_venv.sh, "
    "then .venv-agilerl/bin/python -m pytest tests/faces/test_agilerl.py)",
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


def face_vec(**face_kwargs) -> AgileRLVecEnv:
    venv = mv.DummyVecEnv([make_native_env] * NUM_ENVS, env_seed=SEED, reward_dtype="float64")
    return AgileRLVecEnv(venv, **face_kwargs)


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
    # The face's defaults: no action masks in infos (AgileRL 2.58's IPPO raises on numpy masks, its bug).
    native = train_ippo(native_vec())
    face = train_ippo(face_vec())
    print("IPPO fitness", native, face)
    assert len(native) == len(face) > 0
    assert face == native


def test_maddpg_fitness_through_the_face_equals_agilerls_own_vec_env():
    native = train_maddpg(native_vec())
    face = train_maddpg(face_vec(action_mask=True))  # MADDPG takes the masks (all available in MPE)
    print("MADDPG fitness", native, face)
    assert len(native) == len(face) > 0
    assert face == native


# -- step by step against AsyncPettingZooVecEnv, agents dying (knights_archers_zombies) ----


def make_kaz():
    from pettingzoo.butterfly import knights_archers_zombies_v10

    return knights_archers_zombies_v10.parallel_env(
        vector_state=True, max_cycles=150, spawn_rate=2, num_archers=1, num_knights=2, max_zombies=20
    )


def test_steps_equal_agilerls_own_vec_env_with_dying_agents_and_autoresets():
    native = AsyncPettingZooVecEnv([make_kaz] * NUM_ENVS)
    face = AgileRLVecEnv(mv.DummyVecEnv([make_kaz] * NUM_ENVS, env_seed=SEED, reward_dtype="float64"),
                         action_mask=True)
    try:
        native_obs, _ = native.reset(seed=SEED)
        face_obs, face_infos = face.reset(seed=SEED)
        assert face_infos["archer_0"]["action_mask"].shape == (NUM_ENVS, 6)
        for agent in native.agents:
            np.testing.assert_array_equal(face_obs[agent], native_obs[agent])
        rng = np.random.default_rng(0)
        gone = {agent: np.zeros(NUM_ENVS, dtype=bool) for agent in native.agents}
        deaths = resets = gone_steps = 0
        for step in range(300):
            # AgileRL's agents act NaN for agents that are gone; the face and the native env skip them.
            actions = {}
            for agent in native.agents:
                agent_actions = rng.integers(0, 6, NUM_ENVS).astype(np.float64)
                agent_actions[gone[agent]] = np.nan
                actions[agent] = agent_actions
            native_out = native.step({a: v.copy() for a, v in actions.items()})
            face_out = face.step(actions)
            for what, n_part, f_part in zip(("obs", "reward", "terminated", "truncated"), native_out, face_out):
                for agent in native.agents:
                    # Rewards are float64 always (AgileRL's own vec env keeps KAZ's int rewards as int64).
                    if what != "reward":
                        assert f_part[agent].dtype == n_part[agent].dtype, (step, what, agent)
                    np.testing.assert_array_equal(f_part[agent], n_part[agent], err_msg=f"step {step} {what} {agent}")
            _, _, term, trunc, _ = native_out
            ended = {a: (term[a] == 1) | (trunc[a] == 1) | np.isnan(term[a]) for a in native.agents}
            env_done = np.logical_and.reduce([ended[a] for a in native.agents])
            resets += int(env_done.sum())
            for agent in native.agents:
                deaths += int(((term[agent] == 1) & ~env_done).sum())
                gone_steps += int(gone[agent].sum())
                gone[agent] = ended[agent] & ~env_done
        # The run covered what it is for: agents dying mid-episode, stepping on while
        # others are gone, and autoresets.
        assert deaths > 0 and gone_steps > 0 and resets > 0, (deaths, gone_steps, resets)
    finally:
        native.close()
        face.close()


# -- misuse --------------------------------------------------------------------------


def test_refuses_float32_rewards_and_other_autoreset_modes():
    with pytest.raises(ValueError, match="float64 rewards.*reward_dtype='float64'.*AgileRLVecEnv.from_config"):
        AgileRLVecEnv(mv.DummyVecEnv([make_native_env] * NUM_ENVS))
    with pytest.raises(ValueError, match="autoreset='same_step'.*'next_step'"):
        AgileRLVecEnv(mv.DummyVecEnv([make_native_env] * NUM_ENVS, reward_dtype="float64", autoreset="next_step"))


def test_defaults_are_what_agilerls_trainers_take():
    """No action masks in infos, float64 rewards (from a config), as AgileRL's own vec env over mpe2."""
    face = AgileRLVecEnv.from_config({"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3",
                                              "kwargs": KWARGS}}, num_envs=NUM_ENVS, env_seed=SEED)
    native = native_vec()
    try:
        (face_obs, face_infos), (native_obs, _) = face.reset(seed=SEED), native.reset(seed=SEED)
        assert not any("action_mask" in face_infos[agent] for agent in face.agents)
        rng = np.random.default_rng(0)
        for step in range(30):
            actions = {agent: rng.integers(0, 5, NUM_ENVS) for agent in native.agents}
            face_out, native_out = face.step(actions), native.step({a: v.copy() for a, v in actions.items()})
            for agent in native.agents:
                assert face_out[1][agent].dtype == np.float64
                np.testing.assert_array_equal(face_out[1][agent], native_out[1][agent], err_msg=f"step {step}")
                np.testing.assert_array_equal(face_out[0][agent], native_out[0][agent], err_msg=f"step {step}")
    finally:
        face.close()
        native.close()


def test_action_mask_with_continuous_actions_is_an_error_naming_it():
    venv = mv.DummyVecEnv([lambda: simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=True)] * 2,
                          reward_dtype="float64")
    with pytest.raises(ValueError, match=r"action_mask=True needs discrete actions; this env's actions are Box"):
        AgileRLVecEnv(venv, action_mask=True)
    venv.close()


def test_refuses_bad_actions_naming_agent_and_env():
    env = face_vec()
    try:
        env.reset(seed=SEED)
        good = {agent: np.zeros(NUM_ENVS, dtype=np.int64) for agent in env.agents}
        with pytest.raises(ValueError, match=r"no action \(NaN or left out\) for agent 'agent_1' in env 1, which is alive"):
            env.step({**good, "agent_1": np.array([0.0, np.nan])})
        with pytest.raises(ValueError, match=r"actions\['agent_0'\] must have shape \(2,\)"):
            env.step({**good, "agent_0": np.zeros(3, dtype=np.int64)})
        with pytest.raises(ValueError, match=r"unknown agents \['agent_9'\]"):
            env.step({**good, "agent_9": np.zeros(NUM_ENVS, dtype=np.int64)})
        with pytest.raises(ValueError, match="whole numbers"):
            env.step({**good, "agent_0": np.array([0.5, 1.0])})
        with pytest.raises(ValueError, match="reset options"):
            env.reset(options={"x": 1})
        # Torch tensors are taken as they are (AgileRL may hand them over).
        obs, rewards, *_ = env.step({agent: torch.zeros(NUM_ENVS, dtype=torch.int64) for agent in env.agents})
        assert rewards["agent_0"].dtype == np.float64 and obs["agent_0"].shape == (NUM_ENVS, 18)
    finally:
        env.close()

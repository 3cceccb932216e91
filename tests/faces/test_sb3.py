"""SB3VecEnv: marl_vec behind Stable-Baselines3's VecEnv API equals SB3's DummyVecEnv over Monitor-wrapped envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("stable_baselines3", reason="the sb3 extra")
torch = pytest.importorskip("torch", reason="the examples extra")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv  # noqa: E402
from stable_baselines3.common.vec_env import VecEnv as SB3BaseVecEnv  # noqa: E402

from marl_vec.compat import SB3VecEnv  # noqa: E402

E = 4


def cartpole(max_episode_steps: int | None = None):
    return lambda: gym.make("CartPole-v1", max_episode_steps=max_episode_steps)


def monitored(max_episode_steps: int | None = None):
    return lambda: Monitor(gym.make("CartPole-v1", max_episode_steps=max_episode_steps))


def face(fns, backend: str = "dummy", **kwargs) -> SB3VecEnv:
    venv_cls = mv.DummyVecEnv if backend == "dummy" else mv.SubprocVecEnv
    return SB3VecEnv(venv_cls(fns, env_seed=None, **kwargs))


def test_is_a_real_sb3_vec_env_that_sb3_uses_unwrapped():
    env = face([cartpole()] * 2)
    assert isinstance(env, SB3BaseVecEnv)
    model = PPO("MlpPolicy", env, n_steps=8, batch_size=8, n_epochs=1, seed=0, device="cpu")
    assert model.get_env() is env  # not wrapped in SB3's DummyVecEnv
    env.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_steps_and_infos_equal_sb3_dummy_vec_env_over_monitor(backend):
    # Env 1 and 3 time out after 9 steps: truncations and terminations both happen.
    limits = [None, 9, None, 9]
    ours = face([cartpole(m) for m in limits], backend)
    theirs = SB3DummyVecEnv([monitored(m) for m in limits])
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    assert ours.seed(3) == theirs.seed(3) == [3, 4, 5, 6]
    np.testing.assert_array_equal(ours.reset(), theirs.reset())
    assert ours.reset_infos == theirs.reset_infos
    actions = np.random.default_rng(0).integers(0, 2, size=(60, E))
    episodes = 0
    for a in actions:
        (obs_a, rew_a, done_a, infos_a), (obs_b, rew_b, done_b, infos_b) = ours.step(a), theirs.step(a)
        np.testing.assert_array_equal(obs_a, obs_b)
        assert rew_a.dtype == rew_b.dtype == np.float32 and done_a.dtype == done_b.dtype == np.bool_
        np.testing.assert_array_equal(rew_a, rew_b)
        np.testing.assert_array_equal(done_a, done_b)
        for a_info, b_info in zip(infos_a, infos_b):
            assert list(a_info) == list(b_info)  # same keys, same order
            assert a_info["TimeLimit.truncated"] == b_info["TimeLimit.truncated"]
            if "terminal_observation" in b_info:
                np.testing.assert_array_equal(a_info["terminal_observation"], b_info["terminal_observation"])
                assert a_info["terminal_observation"].dtype == b_info["terminal_observation"].dtype
                mine, theirs_episode = a_info["episode"], b_info["episode"]
                assert (mine["r"], mine["l"]) == (theirs_episode["r"], theirs_episode["l"])
                assert set(mine) == set(theirs_episode) == {"r", "l", "t"} and isinstance(mine["t"], float)
                assert type(mine["r"]) is type(theirs_episode["r"]) and type(mine["l"]) is type(theirs_episode["l"])
                episodes += 1
        assert ours.reset_infos == theirs.reset_infos
    assert episodes >= 6
    ours.close(), theirs.close()


def test_attributes_methods_and_wrappers():
    ours = face([lambda: Monitor(gym.make("CartPole-v1", render_mode="rgb_array")),
                 lambda: gym.make("CartPole-v1", render_mode="rgb_array")])
    assert ours.get_attr("render_mode") == ["rgb_array", "rgb_array"] and ours.render_mode == "rgb_array"
    ours.reset()
    frames = ours.get_images()
    assert len(frames) == 2 and frames[0].shape == (400, 600, 3)
    assert ours.get_attr("gravity", indices=1) == [9.8]
    ours.set_attr("gravity", 3.0, indices=[0])
    assert ours.env_method("get_wrapper_attr", "gravity") == [3.0, 9.8]
    assert ours.env_is_wrapped(Monitor) == [True, False]
    assert ours.env_is_wrapped(gym.wrappers.TimeLimit, indices=[1]) == [True]
    ours.close()
    ours = face([lambda: Monitor(gym.make("CartPole-v1")), cartpole()], backend="subproc")
    assert ours.env_is_wrapped(Monitor) == [True, False]
    ours.set_attr("gravity", 3.0, indices=[1])
    assert ours.get_attr("gravity") == [9.8, 3.0]
    ours.close()


def test_an_env_with_its_own_monitor_keeps_its_episode_info():
    ours = face([monitored(3)] * 2)
    ours.reset()
    for _ in range(3):
        _, _, dones, infos = ours.step(np.zeros(2, dtype=np.int64))
    assert dones.all() and all(set(i["episode"]) == {"r", "l", "t"} and i["episode"]["l"] == 3 for i in infos)
    ours.close()


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="needs same-step autoreset.*got autoreset='next_step'; allowed: same_step, fast"):
        SB3VecEnv(mv.DummyVecEnv([cartpole()], autoreset="next_step"))
    venv = mv.make("mpe/simple_spread", num_envs=2)
    with pytest.raises(ValueError, match="needs a single-agent VecEnv, got 3 agents"):
        SB3VecEnv(venv)
    venv.close()


def ppo_parameters(env) -> list[np.ndarray]:
    """SB3 PPO on CartPole for 2,048 steps (4 envs x 512), seed 0, one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = PPO("MlpPolicy", env, n_steps=512, seed=0, device="cpu")
        model.learn(total_timesteps=2048)
        return [p.detach().numpy().copy() for p in model.policy.parameters()]
    finally:
        torch.set_num_threads(threads)
        env.close()


def test_ppo_learns_bit_for_bit_what_it_learns_on_sb3_dummy_vec_env():
    theirs = ppo_parameters(SB3DummyVecEnv([monitored()] * E))
    for backend in ("dummy", "subproc"):
        ours = ppo_parameters(face([cartpole()] * E, backend))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b, err_msg=backend)

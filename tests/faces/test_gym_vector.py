"""GymVectorEnv: marl_vec behind gymnasium's VectorEnv API equals gymnasium's SyncVectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

import marl_vec as mv
from marl_vec.compat import GymVectorEnv

E = 4


def cartpole_fns(n: int = E):
    # Odd envs time out after 12 steps: truncations and terminations both happen.
    return [
        (lambda: gym.make("CartPole-v1", max_episode_steps=12)) if i % 2 else (lambda: gym.make("CartPole-v1"))
        for i in range(n)
    ]


def assert_infos_equal(ours: dict, theirs: dict, where: str = "infos") -> None:
    assert set(ours) == set(theirs), f"{where}: keys {sorted(ours)} != {sorted(theirs)}"
    for key, value in theirs.items():
        mine = ours[key]
        if isinstance(value, dict):
            assert_infos_equal(mine, value, f"{where}[{key!r}]")
        elif isinstance(value, np.ndarray) and value.dtype == object:
            assert mine.shape == value.shape, where
            for a, b in zip(mine, value):
                if b is None:
                    assert a is None, f"{where}[{key!r}]"
                else:
                    np.testing.assert_array_equal(a, b, err_msg=f"{where}[{key!r}]")
        else:
            np.testing.assert_array_equal(mine, value, err_msg=f"{where}[{key!r}]")
            assert np.asarray(mine).dtype == np.asarray(value).dtype, f"{where}[{key!r}] dtype"


def compare_with_sync(fns, mode: str, actions: np.ndarray, seed: int, **venv_kwargs) -> int:
    ours = GymVectorEnv(mv.DummyVecEnv(fns, autoreset=mode, **venv_kwargs))
    theirs = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset[mode.upper()])
    assert ours.metadata["autoreset_mode"] == theirs.metadata["autoreset_mode"]
    assert ours.single_action_space == theirs.single_action_space
    assert ours.single_observation_space == theirs.single_observation_space
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    obs_a, info_a = ours.reset(seed=seed)
    obs_b, info_b = theirs.reset(seed=seed)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert_infos_equal(info_a, info_b)
    ends = 0
    for a in actions:
        out_a, out_b = ours.step(a), theirs.step(a)
        for x, y, name in zip(out_a[:4], out_b[:4], ("obs", "reward", "terminated", "truncated")):
            np.testing.assert_array_equal(x, y, err_msg=name)
            # Rewards: float64 once the VecEnv keeps gymnasium's dtype (test_gym_fidelity.py).
            assert (x.dtype == y.dtype or name == "reward") and x.shape == y.shape, name
        assert_infos_equal(out_a[4], out_b[4])  # nothing added: no marl_vec "episode" by default
        ended = out_b[2] | out_b[3]
        ends += int(ended.sum())
    ours.close()
    theirs.close()
    assert ours.venv.closed
    return ends


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_cartpole_equals_sync_vector_env(mode):
    actions = np.random.default_rng(0).integers(0, 2, size=(120, E))
    assert compare_with_sync(cartpole_fns(), mode, actions, seed=3) >= E


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_preprocessed_pong_equals_sync_vector_env(mode):
    ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed")
    pytest.importorskip("cv2", reason="the atari extra is not installed")
    from marl_vec.envs.atari import make_atari

    gym.register_envs(ale_py)

    def reference():
        env = gym.make("ALE/Pong-v5", frameskip=1, obs_type="grayscale")
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
        return gym.wrappers.TimeLimit(gym.wrappers.FrameStackObservation(env, 4), 20)

    ours = [lambda: make_atari("ALE/Pong-v5", preprocess=True, engine="python", clip_rewards=False, max_episode_steps=20)] * 3
    actions = np.random.default_rng(1).integers(0, 6, size=(45, 3))
    # The same env_fns on both sides would be simpler, but the point is our adapter vs gymnasium's chain.
    ours_env = GymVectorEnv(mv.DummyVecEnv(ours, autoreset=mode))
    theirs = gym.vector.SyncVectorEnv([reference] * 3, autoreset_mode=GymAutoreset[mode.upper()])
    assert ours_env.single_observation_space == theirs.single_observation_space
    assert ours_env.metadata["autoreset_mode"] == theirs.metadata["autoreset_mode"]
    obs_a, info_a = ours_env.reset(seed=9)
    obs_b, info_b = theirs.reset(seed=9)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert_infos_equal(info_a, info_b)
    ends = 0
    for a in actions:
        out_a, out_b = ours_env.step(a), theirs.step(a)
        for x, y in zip(out_a[:4], out_b[:4]):
            np.testing.assert_array_equal(x, y)
        assert_infos_equal(out_a[4], out_b[4])
        ends += int((out_b[2] | out_b[3]).sum())
    assert ends >= 3 and obs_a.dtype == np.uint8
    ours_env.close()
    theirs.close()


def test_episode_info_has_return_and_length():
    envs = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5)] * 2), episode_info=True)
    envs.reset(seed=0)
    for _ in range(5):
        _, _, _, truncated, infos = envs.step(np.ones(2, dtype=np.int64))
    assert truncated.all() and infos["_episode"].all()
    np.testing.assert_array_equal(infos["episode"]["l"], [5, 5])
    np.testing.assert_array_equal(infos["episode"]["r"], [5.0, 5.0])
    envs.close()


def test_autoreset_mode_mapping():
    for mode, gym_mode in [("same_step", GymAutoreset.SAME_STEP), ("next_step", GymAutoreset.NEXT_STEP),
                           ("disabled", GymAutoreset.DISABLED)]:
        envs = GymVectorEnv(mv.DummyVecEnv(cartpole_fns(2), autoreset=mode))
        assert envs.metadata["autoreset_mode"] is gym_mode
        envs.close()


def test_disabled_mode_with_reset_mask():
    envs = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=3)] * 2, autoreset="disabled"))
    envs.reset(seed=0)
    envs.step(np.zeros(2, dtype=np.int64))
    envs.step(np.zeros(2, dtype=np.int64))
    _, _, _, truncated, _ = envs.step(np.zeros(2, dtype=np.int64))
    assert truncated.all()
    with pytest.raises(mv.EnvFinishedError, match="call reset"):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.reset(options={"reset_mask": np.array([True, False])})
    with pytest.raises(mv.EnvFinishedError, match="env 1 finished"):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.close()


def test_multi_agent_venv_is_an_error():
    venv = mv.make("mpe/simple_spread", num_envs=2)
    with pytest.raises(ValueError, match="needs a single-agent VecEnv, got 3 agents"):
        GymVectorEnv(venv)
    venv.close()


def test_one_episode_mode_is_an_error():
    venv = mv.DummyVecEnv(cartpole_fns(2), autoreset="one_episode")
    with pytest.raises(ValueError, match="autoreset='one_episode' has no gymnasium equivalent; allowed: same_step"):
        GymVectorEnv(venv)
    venv.close()


def test_bad_actions_and_options():
    envs = GymVectorEnv(mv.DummyVecEnv(cartpole_fns(2)))
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(2,\) \(one per env\), got \(2, 1\)"):
        envs.step(np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(TypeError, match="discrete actions must be integers, got dtype float64"):
        envs.step(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"reset options \['foo'\] are not supported by GymVectorEnv"):
        envs.reset(options={"foo": 1})
    envs.close()
    envs.close()  # twice is fine

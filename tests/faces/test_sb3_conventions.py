"""SB3VecEnv follows the rules SB3's own test suite checks of its vec envs.

Each test here is a difference that SB3's tests found (scripts/ci/run_sb3_suite.sh runs
them all on the face): ``envs`` where the backend holds the env objects, MultiBinary
actions as SB3's algorithms send them (float 0./1.), ``has_attr`` of a missing
attribute, negative indices, one env object returned by every env_fn, and ``step()``
before ``reset()``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("stable_baselines3", reason="the sb3 extra")
pytest.importorskip("torch", reason="the examples extra")

from stable_baselines3 import A2C  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv  # noqa: E402

from marl_vec.compat import SB3VecEnv  # noqa: E402

BACKENDS = {"dummy": mv.DummyVecEnv, "subproc": mv.SubprocVecEnv}


def face(fns, backend: str = "dummy") -> SB3VecEnv:
    return SB3VecEnv(BACKENDS[backend](fns, env_seed=None))


class MultiBinaryEnv(gym.Env):
    """Reward: the number of bits set as the observation asks (a MultiBinary target)."""

    observation_space = gym.spaces.MultiBinary(4)
    action_space = gym.spaces.MultiBinary(4)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, self.np_random.integers(0, 2, 4).astype(np.int8)
        return self.target, {}

    def step(self, action):
        assert self.action_space.contains(action), action  # the env gets 0/1 integers
        self.t += 1
        reward = float((np.asarray(action) == self.target).sum())
        self.target = self.np_random.integers(0, 2, 4).astype(np.int8)
        return self.target, reward, False, self.t >= 8, {}


class Counter(gym.Env):
    """Counts its steps from construction; reset() sets the count back to 0 (as SB3's test envs)."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, False, self.t >= 5, {}


def test_envs_are_the_env_objects_on_dummy_vec_env():
    fns = [lambda: Monitor(gym.make("CartPole-v1")), lambda: gym.make("CartPole-v1")]
    ours, theirs = face(fns), SB3DummyVecEnv(fns)
    assert [type(e) for e in ours.envs] == [type(e) for e in theirs.envs] == [Monitor, type(theirs.envs[1])]
    ours.envs[1].unwrapped.gravity = 3.0  # the same objects get_attr reads
    assert ours.get_attr("gravity") == [9.8, 3.0]
    ours.close(), theirs.close()


def test_envs_on_subproc_is_an_attribute_error_that_says_why():
    ours = face([lambda: gym.make("CartPole-v1")] * 2, "subproc")
    assert not hasattr(ours, "envs")
    with pytest.raises(AttributeError, match=r"envs: the envs of a SubprocVecEnv live in its worker processes; "
                                             r"use get_attr, set_attr or env_method"):
        ours.envs
    ours.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_multibinary_float_actions_as_sb3_sends_them(backend):
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 2, size=(20, 2, 4))
    runs = []
    for dtype in (np.int8, np.float32):
        env = face([MultiBinaryEnv] * 2, backend)
        env.seed(5)
        env.reset()
        runs.append([env.step(a.astype(dtype))[1] for a in actions])
        env.close()
    np.testing.assert_array_equal(runs[0], runs[1])
    env = face([MultiBinaryEnv] * 2, backend)
    env.reset()
    with pytest.raises(ValueError, match=r"action \[0\.0, 0\.5, 1\.0, 0\.0\] for env 1, agent 'agent_0' is not binary; "
                                         r"allowed: 0 and 1"):
        env.step(np.array([[0, 0, 0, 0], [0, 0.5, 1, 0]], np.float32))
    env.close()


def test_a2c_trains_on_a_multibinary_action_env():
    env = face([MultiBinaryEnv] * 2)
    A2C("MlpPolicy", env, n_steps=4, seed=0, device="cpu").learn(total_timesteps=32)
    env.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_has_attr_and_negative_indices(backend):
    env = face([lambda: gym.make("CartPole-v1")] * 3, backend)
    assert env.has_attr("gravity") and not env.has_attr("action_masks")
    env.set_attr("gravity", 1.5, indices=-1)
    assert env.get_attr("gravity", indices=[0, -1]) == [9.8, 1.5]
    assert env.env_method("get_wrapper_attr", "gravity", indices=-2) == [9.8]
    env.close()


def test_env_fns_returning_one_env_object_are_refused_as_sb3_does():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="returned the same env object"):
        face([lambda: env] * 2)
    with pytest.raises(ValueError, match="returned the same instance"):
        SB3DummyVecEnv([lambda: env] * 2)


def test_step_before_reset_steps_as_sb3_does():
    """SB3's DummyVecEnv steps envs that were never reset; the face resets them first (the
    core needs it), which for an env whose constructor leaves it as reset() does is the same."""
    ours, theirs = face([Counter] * 2), SB3DummyVecEnv([Counter] * 2)
    for _ in range(7):
        (obs_a, rew_a, done_a, _), (obs_b, rew_b, done_b, _) = ours.step(np.zeros(2, int)), theirs.step(np.zeros(2, int))
        np.testing.assert_array_equal(obs_a, obs_b)
        np.testing.assert_array_equal(rew_a, rew_b)
        np.testing.assert_array_equal(done_a, done_b)
    ours.close(), theirs.close()
    # The core keeps its rule.
    with mv.DummyVecEnv([Counter]) as venv, pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        venv.step(np.zeros((1, 1), int))

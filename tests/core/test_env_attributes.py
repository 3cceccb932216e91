"""A missing attribute is an ``AttributeError`` on every backend.

``get_attr`` of an attribute no env has, and ``call`` of a method no env has,
raise ``AttributeError`` naming the env and the attribute, wherever the envs
run. Libraries probe with it: SB3's ``VecEnv.has_attr`` and sb3-contrib's
``is_masking_supported`` catch ``AttributeError`` to answer False. An error
raised *inside* a method that exists stays the backend's error.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.scripted_envs import DyingAgentEnv

E = 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_attr_and_call_of_a_missing_attribute_raise_attribute_error(backend, request):
    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        venv.reset()
        with pytest.raises(AttributeError, match=r"env 3 has no attribute 'no_such_thing'"):
            venv.get_attr("no_such_thing", indices=[3])
        with pytest.raises(AttributeError, match=r"env 0 has no attribute 'no_such_thing'"):
            venv.get_attr("no_such_thing")
        with pytest.raises(AttributeError, match=r"env 1 has no attribute 'no_such_method'"):
            venv.call("no_such_method", 1, indices=[1, 2])
        # The batch is still usable, and present attributes still read.
        assert venv.get_attr("t") == [0] * E
        r = venv.step(np.ones((E, 3), dtype=np.int64))
        assert r.obs[:, 0, 0].tolist() == [1] * E


@pytest.mark.parametrize("backend", BACKENDS)
def test_sb3_style_has_attr_probe_answers_false(backend, request):
    """SB3's ``has_attr``: ``try: get_attr(name, indices=0) ... except AttributeError: False``."""

    def has_attr(venv, name):
        try:
            venv.get_attr(name, indices=0)
            return True
        except AttributeError:
            return False

    with make_backend(backend, [DyingAgentEnv] * E, request, env_seed=0) as venv:
        venv.reset()
        assert has_attr(venv, "episode_len") and not has_attr(venv, "action_masks")


def _wrapped_bonus_env():
    """A gymnasium env behind wrappers whose own step reads a new attribute ``bonus``."""
    import gymnasium as gym

    class BonusEnv(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.zeros(1, np.float32), 1.0 + getattr(self, "bonus", 0.0), False, False, {}

    return gym.wrappers.OrderEnforcing(gym.wrappers.TimeLimit(BonusEnv(), 100))


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_attr_of_a_new_attribute_lands_on_the_env_itself(backend, request):
    """A new attribute goes where the env's own code sees it (env.unwrapped, as Tianshou's
    workers put it); gymnasium's set_wrapper_attr would put it on the outermost wrapper.
    An attribute a wrapper has is still set on that wrapper."""
    with make_backend(backend, [_wrapped_bonus_env] * 2, request, env_seed=0) as venv:
        venv.reset()
        venv.set_attr("bonus", [0.5, 2.0])
        assert venv.get_attr("bonus") == [0.5, 2.0]
        assert venv.call("get_wrapper_attr", "bonus") == [0.5, 2.0]
        assert venv.step(np.zeros((2, 1), dtype=np.int64)).reward[:, 0].tolist() == [1.5, 3.0]
        venv.set_attr("_max_episode_steps", 3, indices=[1])  # TimeLimit's own: set on it
        assert venv.get_attr("_max_episode_steps") == [100, 3]
        venv.step(np.zeros((2, 1), dtype=np.int64))
        assert venv.step(np.zeros((2, 1), dtype=np.int64)).truncated[:, 0].tolist() == [False, True]

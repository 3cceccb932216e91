"""env_fns that return one env object several times are refused, on every backend.

``[lambda: env] * n`` steps one env object n times per step: never what the
user meant. SB3's DummyVecEnv refuses it with a ValueError; marl_vec refuses it
wherever two envs of one group (one process: the DummyVecEnv batch, a
SubprocVecEnv worker, a Ray actor) come out as the same object, or as wrappers
around the same object. With one env per worker process each worker holds its
own copy, so nothing is stepped twice, and that case is allowed.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import marl_vec as mv
from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.scripted_envs import DyingAgentEnv

SAME = r"env_fns \d+ and \d+ returned the same env object"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_instance_twice_in_a_group_is_refused(backend, request):
    env = DyingAgentEnv()
    with pytest.raises(ValueError, match=SAME + r".*make a new env in each env_fn"):
        make_backend(backend, [lambda: env] * 4, request, env_seed=0)


def test_wrappers_around_one_instance_are_refused():
    base = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"env_fns 0 and 1 returned the same env object"):
        mv.DummyVecEnv([lambda: base, lambda: gym.wrappers.RecordEpisodeStatistics(base)])


def test_the_message_names_the_fix():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError) as info:
        mv.DummyVecEnv([lambda: env] * 3)
    message = str(info.value)
    assert message.startswith("env_fns 0 and 1 returned the same env object")
    assert "[lambda: env] * n" in message and "make a new env in each env_fn" in message


def test_one_callable_making_new_envs_is_fine():
    with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3) as venv:
        assert venv.reset().obs.shape == (3, 1, 4)

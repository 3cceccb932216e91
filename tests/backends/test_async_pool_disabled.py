"""The async pool with ``autoreset="disabled"``: a finished env keeps its last
observation, ``send()`` refuses it until a ``reset()`` names it, and the reset then
continues the env's random stream as a plain loop's ``env.reset()`` does.

The Tianshou face serves Tianshou's contract (an env is reset by ``reset(env_id)``,
then) on this mode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import PoolNotReadyError


def cartpole():
    return gym.make("CartPole-v1", max_episode_steps=3)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_a_finished_env_waits_for_its_reset(backend):
    extra = {"num_workers": 2} if backend == "subproc" else {}
    plain = [cartpole() for _ in range(2)]
    want = [env.reset(seed=10 + i)[0] for i, env in enumerate(plain)]
    with mv.make_vec([cartpole] * 2, backend=backend, env_seed=10, autoreset="disabled", batch_size=2,
                     **extra) as venv:
        r = venv.reset()
        np.testing.assert_array_equal(r.obs[:, 0], want)
        r = venv.recv()
        for t in range(3):
            venv.send(np.ones((2, 1), dtype=np.int64), [0, 1])
            r = venv.recv()
            want = [env.step(1)[0] for env in plain]
            np.testing.assert_array_equal(r.obs[np.argsort(r.env_ids), 0], want, err_msg=f"step {t}")
        assert r.done.all() and r.truncated.all() and r.final_obs is None  # the last observation is obs
        with pytest.raises(PoolNotReadyError, match=r"envs \[0, 1\] finished their episode and "
                                                    r"autoreset='disabled': call reset\(env_ids=\[0, 1\]\) first"):
            venv.send(np.ones((2, 1), dtype=np.int64), [0, 1])
        r = venv.reset(env_ids=[1])
        np.testing.assert_array_equal(r.obs[1, 0], plain[1].reset()[0])  # its own stream, unseeded
        r = venv.recv()
        with pytest.raises(PoolNotReadyError, match=r"envs \[0\] finished"):
            venv.send(np.ones((2, 1), dtype=np.int64), [0, 1])
        venv.send(np.ones((1, 1), dtype=np.int64), [1])
        venv.batch_size = 1
        r = venv.recv()
        assert r.env_ids.tolist() == [1]
        np.testing.assert_array_equal(r.obs[0, 0], plain[1].step(1)[0])
        assert venv.episode_statistics()["episodes"] == 2


def test_other_modes_are_still_refused():
    with mv.DummyVecEnv([cartpole] * 2, autoreset="next_step") as venv:
        venv.reset()
        with pytest.raises(ValueError, match=r"recv\(\): the async pool needs autoreset='same_step' or 'fast' "
                                             r"\(final_\* ride in each batch\) or 'disabled'"):
            venv.recv()

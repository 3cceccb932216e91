"""Box actions of every shape reach the gymnasium env as sent: scalar ``()``, ``(1,)``
and ``(2, 3)``, on DummyVecEnv, SubprocVecEnv (sync and the async pool) and the
gymnasium face, checked against a plain loop over the same env with the same actions.

Issue 23, bug 1: a ``Box(shape=())`` env got ``0.0`` at every step, whatever was sent
(the group stepper had captured a numpy scalar, not a view of the action row).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat.gym.vector import GymVectorEnv

SHAPES = [(), (1,), (2, 3)]
N, STEPS = 3, 12


class EchoBoxEnv(gym.Env):
    """Observes the last action it got (flattened, padded to 6); reward is its sum.
    Episodes last 3 + seed-dependent steps, so autoresets happen mid-run."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.action_space = gym.spaces.Box(-10.0, 10.0, shape=shape, dtype=np.float32)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(7,), dtype=np.float64)
        self._t, self._len = 0, 4

    def _obs(self, action: np.ndarray) -> np.ndarray:
        flat = np.asarray(action, dtype=np.float64).reshape(-1)
        return np.concatenate([[self._t], flat, np.zeros(6 - flat.size)])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._len = 0, 3 + int(self.np_random.integers(0, 4))
        return self._obs(np.zeros(self.action_space.shape)), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=np.float32)), action
        self._t += 1
        return self._obs(action), float(np.sum(action)), self._t >= self._len, False, {}


def _actions(shape: tuple[int, ...]) -> np.ndarray:
    """(STEPS, N, *shape): distinct, nonzero values, the same for every backend."""
    rng = np.random.default_rng(7)
    return rng.uniform(-9, 9, size=(STEPS, N, *shape)).astype(np.float32)


def _plain_loop(shape: tuple[int, ...], actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observations and rewards (STEPS, N, ...) of a loop over the native envs, seeded 0 + i,
    reset when done (same_step: the observation after the reset)."""
    envs = [EchoBoxEnv(shape) for _ in range(N)]
    obs = np.zeros((STEPS, N, 7))
    rewards = np.zeros((STEPS, N))
    for i, env in enumerate(envs):
        env.reset(seed=i)
    for t in range(STEPS):
        for i, env in enumerate(envs):
            o, r, term, trunc, _ = env.step(actions[t, i])
            if term or trunc:
                o, _ = env.reset()
            obs[t, i], rewards[t, i] = o, r
    return obs, rewards


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_box_actions_reach_the_env_as_in_a_plain_loop(shape, backend):
    actions = _actions(shape)
    want_obs, want_rewards = _plain_loop(shape, actions)
    fns = [lambda: EchoBoxEnv(shape)] * N
    venv = mv.DummyVecEnv(fns, env_seed=0) if backend == "dummy" else mv.SubprocVecEnv(fns, env_seed=0, num_workers=2)
    with venv:
        assert venv.spec.action_shape == shape
        venv.reset()
        for t in range(STEPS):
            r = venv.step(actions[t][:, None])  # (N, 1 agent, *shape)
            np.testing.assert_array_equal(r.obs[:, 0], want_obs[t], err_msg=f"step {t}")
            np.testing.assert_array_equal(r.reward[:, 0], want_rewards[t], err_msg=f"step {t}")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_box_actions_through_the_async_pool(shape):
    actions = _actions(shape)
    want_obs, want_rewards = _plain_loop(shape, actions)
    with mv.SubprocVecEnv([lambda: EchoBoxEnv(shape)] * N, env_seed=0, num_workers=2, batch_size=N) as venv:
        venv.reset()
        ids = venv.recv().env_ids
        for t in range(STEPS):
            venv.send(actions[t][ids][:, None], ids)
            r = venv.recv()
            ids = r.env_ids
            np.testing.assert_array_equal(r.obs[:, 0], want_obs[t][ids], err_msg=f"step {t}")
            np.testing.assert_array_equal(r.reward[:, 0], want_rewards[t][ids], err_msg=f"step {t}")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_box_actions_through_the_gymnasium_face_as_sync_vector_env(shape):
    actions = _actions(shape)
    fns = [lambda: EchoBoxEnv(shape)] * N
    ours = GymVectorEnv(mv.DummyVecEnv(fns, env_seed=0))
    native = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    try:
        np.testing.assert_array_equal(ours.reset(seed=0)[0], native.reset(seed=0)[0])
        for t in range(STEPS):
            got, want = ours.step(actions[t]), native.step(actions[t])
            for a, b in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(a, b, err_msg=f"step {t}")
    finally:
        ours.close()
        native.close()

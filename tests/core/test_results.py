"""Returned arrays: copies by default (never changed by a later call), views with copy=False; shapes and dtypes."""

from __future__ import annotations

import numpy as np

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv


def test_returned_arrays_never_change_on_later_steps():
    venv = mv.make("mpe/simple_spread", num_envs=2)
    r0 = venv.reset()
    kept = {name: np.copy(value) for name, value in vars(r0).items() if isinstance(value, np.ndarray)}
    r1 = venv.step(np.ones((2, 3), dtype=np.int64))  # 1 moves; 0 is the no-op
    for _ in range(30):  # across an episode end (max_cycles 25)
        venv.step(np.ones((2, 3), dtype=np.int64))
    for name, value in kept.items():
        np.testing.assert_array_equal(getattr(r0, name), value, err_msg=name)
    assert not np.array_equal(r0.obs, r1.obs)
    venv.close()


def test_copy_false_returns_views_of_the_buffers():
    venv = mv.DummyVecEnv([DyingAgentEnv], copy=False)
    r0 = venv.reset()
    before = r0.obs.copy()
    r1 = venv.step(np.ones((1, 3), dtype=np.int64))
    assert r1.obs is r0.obs or np.shares_memory(r1.obs, r0.obs)
    assert not np.array_equal(before, r0.obs), "a view sees the next step"
    venv.close()


def test_shapes_and_dtypes_follow_the_spec():
    venv = mv.make("mpe/simple_spread", num_envs=3)
    r = venv.reset()
    spec = venv.spec
    assert r.obs.shape == (3, 3, 18) and r.obs.dtype == spec.obs_dtype == np.float32
    assert r.state.shape == (3, 54)
    assert r.avail_actions.shape == (3, 3, 5) and r.avail_actions.dtype == bool
    for name in ("agent_mask", "terminated", "truncated"):
        assert getattr(r, name).shape == (3, 3) and getattr(r, name).dtype == bool
    assert r.reward.shape == (3, 3) and r.reward.dtype == np.float32
    assert r.done.shape == (3,) and r.done.dtype == bool
    assert len(r.infos) == 3
    assert r.final_obs.shape == r.obs.shape and r.final_state.shape == r.state.shape
    assert venv.env_info() == {"n_agents": 3, "obs_shape": 18, "state_shape": 54, "n_actions": 5, "episode_limit": 25}
    venv.close()

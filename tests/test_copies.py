"""copy=True: every returned array is the caller's own (issue 12 hazards).

The state never shares memory with the observations (even where the buffers keep
it as their view), and ``final_*`` on steps where no env finished are fresh,
writable zeros, not shared read-only arrays.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

FIELDS = ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
          "final_obs", "final_state", "final_avail_actions")


def _cartpole():
    return gym.make("CartPole-v1")


def _spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(max_cycles=4)


def _arrays(r):
    return [(name, getattr(r, name)) for name in FIELDS if getattr(r, name) is not None]


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("env_fn, n_actions", [(_cartpole, 2), (_spread, 5)])
def test_returned_arrays_never_share_memory_with_copy(env_fn, n_actions, backend):
    with mv.make_vec([env_fn] * 2, backend=backend) as venv:
        assert venv.spec.state_is_obs  # the buffers keep the state as a view of obs
        results = [venv.reset()]
        actions = np.zeros((2, venv.spec.n_agents), np.int64)
        for _ in range(5):
            results.append(venv.step(actions))
    arrays = [(f"{t}:{name}", a) for t, r in enumerate(results) for name, a in _arrays(r)]
    for (name_a, a), (name_b, b) in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b), (name_a, name_b)
    first = results[1]
    before = first.state.copy()
    first.obs *= 2.0  # a trainer normalising obs in place leaves the state alone
    np.testing.assert_array_equal(first.state, before)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_final_arrays_are_writable_zeros_where_nothing_finished(backend):
    with mv.make_vec([_spread] * 2, backend=backend) as venv:
        venv.reset()
        r = venv.step(np.zeros((2, 3), np.int64))
        assert not r.done.any()
        for name in ("final_obs", "final_state", "final_avail_actions"):
            value = getattr(r, name)
            assert value.flags.writeable and not value.any(), name
            value[...] = 1  # in-place writes work (and torch.from_numpy would not warn)
        again = venv.step(np.zeros((2, 3), np.int64))
        assert not again.final_obs.any() and not np.shares_memory(again.final_obs, r.final_obs)


def test_copy_false_returns_the_buffers_themselves():
    with mv.DummyVecEnv([_cartpole] * 2, copy=False) as venv:
        r = venv.reset()
        # Documented: without copies, state is the observations' memory.
        assert np.shares_memory(r.state, r.obs) and r.obs is venv.buffers.obs

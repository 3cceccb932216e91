"""copy=True: every returned array is the caller's own (issue 12 hazards).

The state never shares memory with the observations (even where the buffers keep
it as their view), and ``final_*`` on steps where no env finished are fresh,
writable zeros, not shared read-only arrays.
"""

from __future__ import annotations

import itertools
import weakref

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


def _pistonball():
    from pettingzoo.butterfly import pistonball_v6

    return pistonball_v6.parallel_env(n_pistons=4, continuous=False, max_cycles=6)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_large_copies_reuse_only_memory_nobody_references(backend):
    """Large results (here 1.3 MB of pixels, 1.1 MB of state a step) are copied into
    the memory of earlier results the caller dropped; a result, a view of one, or a
    memoryview of one that the caller keeps is never written again."""
    from marl_vec.vec.copies import LARGE

    actions = np.ones((2, 4), np.int64)
    with mv.make_vec([_pistonball] * 2, backend=backend) as venv:
        first = venv.reset()
        assert first.obs.nbytes >= LARGE and first.state.nbytes >= LARGE
        kept = [first] + [venv.step(actions) for _ in range(8)]  # every one held: no reuse
        assert any(r.done.any() for r in kept) and not all(r.done.any() for r in kept)
        arrays = [(f"{t}:{name}", a) for t, r in enumerate(kept) for name, a in _arrays(r)]
        for (name_a, a), (name_b, b) in itertools.combinations(arrays, 2):
            assert not np.shares_memory(a, b), (name_a, name_b)
        values = [{name: a.copy() for name, a in _arrays(r)} for r in kept]

        # Parts of results kept through a view or a memoryview keep their values.
        view, borrowed = kept[1].obs[1], memoryview(kept[2].state)
        view_value, borrowed_value = view.copy(), np.asarray(borrowed).copy()
        del kept[1:]
        for _ in range(12):
            venv.step(actions)
        np.testing.assert_array_equal(view, view_value)
        np.testing.assert_array_equal(np.asarray(borrowed), borrowed_value)
        for name, a in _arrays(kept[0]):
            np.testing.assert_array_equal(a, values[0][name], err_msg=name)
        # A dropped result's memory is used again (what makes large copies cheap).
        r = venv.step(actions)
        obs, state = weakref.ref(r.obs), weakref.ref(r.state)
        del r
        again = venv.step(actions)
        assert again.obs is obs() and again.state is state()


class _Pixels(gym.Env):
    """Never ends; 16 KB observations, so that 8 envs' final_obs are large zeros."""

    observation_space = gym.spaces.Box(0, 1, (64, 64), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones((64, 64), np.float32), {}

    def step(self, action):
        return np.ones((64, 64), np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_final_zeros_kept_through_a_view_are_never_handed_out_again(backend):
    """The zeros of final_obs where nothing finished come from reused maps; a slice or a
    memoryview of one that the caller keeps pins it (a slice of a reshaped flat view
    once did not: later results' final_obs shared its memory and showed its writes)."""
    from marl_vec.vec.copies import LARGE

    actions = np.zeros((8, 1), np.int64)
    with mv.make_vec([_Pixels] * 8, backend=backend) as venv:
        venv.reset()
        r = venv.step(actions)
        assert r.final_obs.nbytes >= LARGE and not r.done.any()
        kept = r.final_obs[0][::2]
        del r
        for _ in range(6):
            later = venv.step(actions)
            kept[...] = 7
            assert not np.shares_memory(kept, later.final_obs) and not later.final_obs.any()
            del later
        borrowed = memoryview(venv.step(actions).final_obs)
        for _ in range(6):
            later = venv.step(actions)
            assert not np.shares_memory(np.asarray(borrowed), later.final_obs)
        # A dropped result's zeros are used again (what makes them cheap), zeros again.
        first = venv.step(actions)
        address = first.final_obs.__array_interface__["data"][0]
        first.final_obs[...] = 3
        del first, later
        addresses = set()
        for _ in range(4):
            r = venv.step(actions)
            assert not r.final_obs.any()
            addresses.add(r.final_obs.__array_interface__["data"][0])
            del r
        assert address in addresses


def test_large_final_zeros_are_fresh_writable_and_independent():
    from marl_vec.vec.copies import LARGE, fresh_zeros

    shape = (LARGE // 4, 3)
    a, b = fresh_zeros(shape, np.float32), fresh_zeros(shape, np.float32)
    assert a.shape == shape and a.dtype == np.float32 and a.flags.writeable and a.flags.c_contiguous
    assert not a.any() and not np.shares_memory(a, b)
    a[...] = 1
    assert not b.any() and a.all()


def test_zeros_of_several_large_fields_share_one_map_but_no_memory():
    from marl_vec.vec.copies import LARGE, zeros_makers

    big_obs, big_state = np.ones((3, LARGE // 3 + 7), np.uint8), np.ones((2, LARGE // 8 + 1), np.float64)
    small = np.ones((4, 2), bool)
    make = zeros_makers([big_obs, None, big_state, small])
    for _ in range(3):  # fresh on every call
        obs, none, state, mask = make()
        assert none is None
        for zeros, like in ((obs, big_obs), (state, big_state), (mask, small)):
            assert zeros.shape == like.shape and zeros.dtype == like.dtype and zeros.flags.writeable
            assert zeros.flags.c_contiguous and not zeros.any()
        assert not np.shares_memory(obs, state) and not np.shares_memory(obs, mask)
        obs[...] = 255  # a write into one leaves the others zero
        state[...] = -1.0
        assert not mask.any() and (obs == 255).all() and (state == -1.0).all()
        again = make()
        assert not again[0].any() and not again[2].any() and not np.shares_memory(again[0], obs)


# -- final_* where done is False (issue 23, bug 4) ------------------------------------------

def _cartpole_for(steps: int, kind: str) -> gym.Env:
    """CartPole cut at ``steps``: as it is, as Text (one object leaf), or as a Dict of an
    array leaf and object leaves."""
    from gymnasium.wrappers import TransformObservation

    from tests.helpers.object_space_envs import DICT_WITH_GRAPH, TEXT, dict_with_graph, text_of

    env = gym.make("CartPole-v1", max_episode_steps=steps)
    if kind == "text":
        return TransformObservation(env, text_of, TEXT)
    if kind == "dict":
        return TransformObservation(env, dict_with_graph, DICT_WITH_GRAPH)
    return env


def _leaves(tree):
    return list(tree.values()) if isinstance(tree, dict) else [tree]


def _assert_blank_where_not_done(r, step):
    """final_* rows of envs not done: zeros (False), or None in object leaves; rows of
    done envs: the episode's last observation (never blank)."""
    not_done = ~r.done
    for name in ("final_obs", "final_state", "final_avail_actions"):
        for leaf in _leaves(getattr(r, name)):
            rows = leaf[not_done]
            if leaf.dtype.hasobject:
                assert all(value is None for value in rows.reshape(-1)), (name, step, rows)
            else:
                assert not rows.any(), (name, step, rows)
    for leaf in _leaves(r.final_obs):
        for i in np.flatnonzero(r.done):
            assert leaf[i].dtype.hasobject and leaf[i].reshape(-1)[0] is not None or leaf[i].any(), (step, i)


@pytest.mark.parametrize("kind", ["array", "text", "dict"])
@pytest.mark.parametrize("backend", ["dummy", "subproc", "pool"])
def test_final_rows_of_envs_not_done_are_blank(kind, backend):
    # Env 0 ends every 3 steps, env 1 every 5: at step 5 env 1 ends while env 0 (which
    # ended at step 3) does not; its final_* row must not carry that older episode.
    import functools

    fns = [functools.partial(_cartpole_for, 3, kind), functools.partial(_cartpole_for, 5, kind)]
    pool = backend == "pool"
    with mv.make_vec(fns, backend="dummy" if backend == "dummy" else "subproc", env_seed=0,
                     **({"batch_size": 2} if pool else {})) as venv:
        venv.reset()
        if pool:
            ids = venv.recv().env_ids
        ones = np.ones((2, 1), np.int64)
        seen_done = []
        for step in range(1, 8):
            if pool:
                venv.send(ones, ids)
                r = venv.recv()
                ids = r.env_ids
                assert r.env_ids.tolist() in ([0, 1], [1, 0])
            else:
                r = venv.step(ones)
            seen_done.append(r.done.tolist() if not pool else [bool(r.done[r.env_ids.tolist().index(i)]) for i in (0, 1)])
            _assert_blank_where_not_done(r, step)
        assert [k + 1 for k, d in enumerate(seen_done) if any(d)] == [3, 5, 6]


def test_copy_results_own_their_arrays_where_the_engine_hands_out_its_own():
    """copy=True on the engine: a step where no env ended hands out the engine's fresh
    observation array (not a copy of the rows); every returned array is the caller's own,
    shares memory with no other, and no later step changes it."""
    pytest.importorskip("ale_py", reason="the atari extra is not installed")
    pytest.importorskip("cv2", reason="the atari extra is not installed")
    from marl_vec.envs.atari import make_atari

    def engine_fn():  # 8 frames: episodes of 2 steps, so steps with and without ends
        return make_atari("ALE/Breakout-v5", preprocess=True, engine="ale_vector", max_num_frames_per_episode=8)

    venv = mv.DummyVecEnv([engine_fn] * 2, env_seed=3)
    results = [venv.reset()]
    for a in np.random.default_rng(0).integers(0, 4, size=(12, 2, 1)):
        results.append(venv.step(a))
    kept = [(r.obs.copy(), r.state.copy()) for r in results]
    for _ in range(4):  # later steps (and their handed-out arrays) leave the kept results alone
        venv.step(np.zeros((2, 1), np.int64))
    venv.close()
    handed = [not r.obs.flags.owndata for r in results[1:]]
    assert any(handed) and not all(handed)  # both kinds of step occurred
    for r, handed_out in zip(results[1:], handed):
        assert handed_out == (not r.done.any())  # handed out only where no env ended
    arrays = [(t, name, getattr(r, name)) for t, r in enumerate(results)
              for name in ("obs", "state", "final_obs", "final_state") if getattr(r, name) is not None]
    for (ta, na, a), (tb, nb, b) in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b), (ta, na, tb, nb)
    for r, (obs, state) in zip(results, kept):
        assert np.array_equal(r.obs, obs) and np.array_equal(r.state, state)
        assert r.obs.flags.writeable

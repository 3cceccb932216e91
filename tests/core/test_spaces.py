"""Every gymnasium space, observation and action, against gymnasium's SyncVectorEnv.

Small real gymnasium envs with each space kind (and toy_text's FrozenLake, Taxi
and Blackjack) run through DummyVecEnv and SubprocVecEnv with the same seeds
and actions as a SyncVectorEnv in same_step autoreset mode: observations,
rewards, flags and final observations must be equal bit for bit, leaf by leaf,
with observations and actions laid out as gymnasium's ``batch_space`` lays them.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset
from gymnasium.vector.utils import batch_space

import marl_vec as mv
from marl_vec.core import spaces

S = gym.spaces


class SpaceEnv(gym.Env):
    """Observations drawn from ``obs_space`` by the env's seeded RNG; every action is
    checked with ``action_space.contains`` (as gymnasium envs check theirs) and folded
    into the reward, so a wrong or renumbered action shows in the results."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, limit: int = 6):
        self.observation_space, self.action_space, self.limit = obs_space, action_space, limit

    def _obs(self):
        return self.observation_space.sample()

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), (action, self.action_space)
        self.t += 1
        flat = np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in spaces.tree_leaves(action)])
        reward = float(self.np_random.normal()) + float(flat @ np.arange(1, flat.size + 1))
        terminated = bool(self.np_random.random() < 0.15)
        return self._obs(), reward, terminated, self.t >= self.limit, {}


NESTED = S.Dict({
    "pos": S.Box(-1.0, 1.0, (2,), np.float64),
    "cell": S.Discrete(4, start=10),
    "inner": S.Tuple((S.MultiBinary(2), S.Box(-5, 5, (1, 2), np.int16))),
})

CASES = {
    "bool-box/discrete-start": (S.Box(0, 1, (3,), dtype=bool), S.Discrete(5, start=3)),
    "discrete-start/multidiscrete": (S.Discrete(6, start=-2), S.MultiDiscrete([3, 4], start=[1, -1])),
    "multidiscrete/multibinary": (S.MultiDiscrete([2, 5]), S.MultiBinary(3)),
    "multibinary/box": (S.MultiBinary(4), S.Box(-1.0, 1.0, (2,), np.float32)),
    "uint8-box/discrete": (S.Box(0, 255, (2, 2), np.uint8), S.Discrete(3)),
    "dict/discrete": (NESTED, S.Discrete(2)),
    "tuple/multidiscrete": (S.Tuple((S.Discrete(3), S.Dict({"a": S.Box(0, 1, (2,)), "b": S.MultiBinary(1)}))),
                            S.MultiDiscrete([2, 2])),
    "box/dict-actions": (S.Box(-1.0, 1.0, (2,), np.float32),
                         S.Dict({"move": S.Discrete(3, start=-1), "aim": S.Box(-1.0, 1.0, (2,), np.float32)})),
    "dict/nested-tuple-actions": (NESTED, S.Tuple((S.MultiBinary(2), S.Dict({"k": S.MultiDiscrete([2, 3])})))),
    # MultiDiscrete of any rank, as gymnasium allows: nvec of shape (2, 2)
    "grid-multidiscrete/grid-multidiscrete": (S.MultiDiscrete(np.array([[2, 3], [4, 5]])),
                                              S.MultiDiscrete(np.array([[2, 3], [4, 5]]),
                                                              start=np.array([[0, -1], [1, 0]]))),
}


def _fns(obs_space, action_space, n=3):
    # Each env its own copy of the spaces: they carry the RNG that draws observations.
    import copy

    return [lambda o=obs_space, a=action_space, k=k: SpaceEnv(copy.deepcopy(o), copy.deepcopy(a), limit=4 + k)
            for k in range(n)]


def _actions(action_space, n, steps, seed=0):
    batched = batch_space(action_space, n)
    batched.seed(seed)
    return [batched.sample() for _ in range(steps)]


def _assert_tree_equal(ours, theirs, what):
    """``ours`` leaves are (E, 1, ...) (one agent), ``theirs`` gymnasium's (E, ...)."""
    ours_leaves, their_leaves = spaces.tree_leaves(ours), spaces.tree_leaves(theirs)
    assert len(ours_leaves) == len(their_leaves), what
    for k, (a, b) in enumerate(zip(ours_leaves, their_leaves)):
        assert a.dtype == np.asarray(b).dtype, (what, k, a.dtype, np.asarray(b).dtype)
        np.testing.assert_array_equal(a[:, 0], b, err_msg=f"{what}, leaf {k}")


def _run_against_sync(fns, actions, backend, seed=7):
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset.SAME_STEP)
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    with mv.make_vec(fns, backend=backend, env_seed=seed, **kwargs) as venv:
        r = venv.reset()
        obs, _ = sync.reset(seed=seed)
        _assert_tree_equal(r.obs, obs, "reset obs")
        ends = 0
        for t, a in enumerate(actions):
            ours_a = spaces.tree_map(lambda x: np.asarray(x)[:, None], a)  # (E, 1, ...)
            r = venv.step(ours_a)
            obs, rew, term, trunc, info = sync.step(a)
            _assert_tree_equal(r.obs, obs, f"obs at step {t}")
            np.testing.assert_array_equal(r.reward[:, 0], rew)
            np.testing.assert_array_equal(r.terminated[:, 0], term)
            np.testing.assert_array_equal(r.truncated[:, 0], trunc)
            for i in np.flatnonzero(r.done):
                ends += 1
                final = spaces.tree_map(lambda leaf: leaf[i:i + 1], r.final_obs)
                _assert_tree_equal(final, spaces.tree_map(lambda x: np.asarray(x)[None], info["final_obs"][i]),
                                   f"final obs of env {i} at step {t}")
        assert ends > 0  # final observations were compared
    sync.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("case", list(CASES))
def test_space_kind_equals_sync_vector_env(case, backend):
    obs_space, action_space = CASES[case]
    fns = _fns(obs_space, action_space)
    _run_against_sync(fns, _actions(action_space, 3, 25), backend)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Taxi-v4", "Blackjack-v1"])
def test_toy_text_equals_sync_vector_env(env_id, backend):
    fns = [lambda: gym.make(env_id, max_episode_steps=15)] * 3  # episodes end within the run
    space = gym.make(env_id).action_space
    _run_against_sync(fns, _actions(space, 3, 60, seed=1), backend)


def test_spec_describes_the_spaces():
    venv = mv.DummyVecEnv(_fns(NESTED, S.MultiDiscrete([3, 4], start=[1, -1]), n=2))
    spec = venv.spec
    assert spec.single_agent_observation_space == NESTED
    assert spec.observation_space == batch_space(NESTED, 1)
    assert spec.obs_is_tree and spec.obs_shape == (2 + 1 + 2 + 2,) and spec.obs_dtype == np.float64
    assert spec.single_agent_action_space == S.MultiDiscrete([3, 4], start=[1, -1])
    r = venv.reset()
    assert list(r.obs) == ["cell", "inner", "pos"]  # gymnasium's Dict key order
    assert r.obs["inner"][1].shape == (2, 1, 1, 2) and r.obs["inner"][1].dtype == np.int16
    assert r.obs["cell"].dtype == np.int64 and r.obs["cell"].min() >= 10
    assert r.avail_actions.shape == (2, 1, 2, 4)  # (E, A, components, largest component)
    # The state is the observation (one agent): a tree of the same leaves.
    np.testing.assert_array_equal(r.state["pos"], r.obs["pos"][:, 0])
    venv.close()
    cartpole = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")]).spec
    assert not cartpole.obs_is_tree and cartpole.single_agent_observation_space == gym.make("CartPole-v1").observation_space


def _all_arrays(result):
    out = []
    for name in ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
                 "final_obs", "final_state", "final_avail_actions"):
        value = getattr(result, name)
        if value is not None:
            out += [(f"{name}[{k}]", leaf) for k, leaf in enumerate(spaces.tree_leaves(value))]
    return out


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_tree_results_never_share_memory(backend):
    fns = _fns(NESTED, S.Discrete(2), n=2)
    with mv.make_vec(fns, backend=backend, env_seed=0) as venv:
        results = [venv.reset()]
        actions = np.zeros((2, 1), np.int64)
        while not results[-1].done.any():
            results.append(venv.step(actions))
        results.append(venv.step(actions))
    arrays = [(f"step {t} {name}", a) for t, r in enumerate(results) for name, a in _all_arrays(r)]
    for (name_a, a), (name_b, b) in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b), (name_a, name_b)
    assert all(a.flags.writeable for _, a in arrays)


def test_discrete_start_avail_actions_index_from_the_start():
    venv = mv.DummyVecEnv(_fns(S.Discrete(2), S.Discrete(3, start=5), n=1))
    r = venv.reset()
    assert r.avail_actions.shape == (1, 1, 3) and r.avail_actions.all()  # actions 5, 6, 7
    venv.step(np.array([[7]]))
    with pytest.raises(ValueError, match=r"action 4 for env 0, agent 'agent_0' is out of range; allowed: 5\.\.7"):
        venv.step(np.array([[4]]))
    with pytest.raises(ValueError, match=r"action 8 for env 0, agent 'agent_0' is out of range; allowed: 5\.\.7"):
        venv.step(np.array([[8]], dtype=np.uint8))
    venv.close()


@pytest.mark.parametrize("space, bad, message", [
    (S.MultiDiscrete([3, 4], start=[1, -1]), [[[1, 3]]],
     r"action \[1, 3\] for env 0, agent 'agent_0' is out of range; allowed per component: \[1\.\.3, -1\.\.2\]"),
    (S.MultiDiscrete([3, 4], start=[1, -1]), [[[0, 0]]], r"allowed per component: \[1\.\.3, -1\.\.2\]"),
    (S.MultiDiscrete([3, 4]), [[[0.5, 1.0]]], r"MultiDiscrete actions must be integers, got dtype float64"),
    (S.MultiBinary(3), [[[0, 2, 1]]], r"action \[0, 2, 1\] for env 0, agent 'agent_0' is not binary; allowed: 0 and 1"),
    (S.MultiBinary(3), [[[0, 1]]], r"actions must have shape \(1, 1, 3\) .*array of shape \(3,\) of 0/1 \(MultiBinary\)"),
    (S.MultiBinary(3), np.array([[[0.0, 0.5, 1.0]]], np.float32),
     r"action \[0\.0, 0\.5, 1\.0\] for env 0, agent 'agent_0' is not binary; allowed: 0 and 1"),
    (S.MultiBinary(2), [[[np.nan, 1.0]]], r"action \[nan, 1\.0\] for env 0, agent 'agent_0' is not binary"),
    (S.MultiBinary(2), np.array([[["0", "1"]]]), r"MultiBinary actions must be 0/1 integers, bools or floats, got dtype <U1"),
    (S.Box(-1.0, 1.0, (2,), np.float32), [[[0.0, 1.5]]],
     r"action \[0\.0, 1\.5\] for env 0, agent 'agent_0' is outside the action space \[\[-1\.0, -1\.0\], \[1\.0, 1\.0\]\]"),
    (S.Discrete(3, start=-1), [[2]], r"action 2 for env 0, agent 'agent_0' is out of range; allowed: -1\.\.1"),
    (S.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[0, -1], [1, 0]])), [[[[0, 0], [5, 0]]]],
     r"action \[\[0, 0\], \[5, 0\]\] for env 0, agent 'agent_0' is out of range; allowed per component "
     r"\(in C order\): \[0\.\.1, -1\.\.1, 1\.\.4, 0\.\.4\]"),
    (S.MultiDiscrete(np.array([[2, 3], [4, 5]])), [[[0, 0]]],
     r"actions must have shape \(1, 1, 2, 2\) .*array of shape \(2, 2\) of integers \(MultiDiscrete\)"),
])
def test_bad_actions_name_env_agent_action_and_range(space, bad, message):
    with mv.DummyVecEnv(_fns(S.Discrete(2), space, n=1)) as venv:
        venv.reset()
        with pytest.raises(ValueError, match=message):
            venv.step(np.array(bad))


def test_grid_multidiscrete_has_a_mask_per_component():
    space = S.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[0, -1], [1, 0]]))
    with mv.DummyVecEnv(_fns(S.Discrete(2), space, n=2)) as venv:
        assert venv.spec.action_shape == (2, 2) and venv.spec.single_agent_action_space == space
        r = venv.reset()
        assert r.avail_actions.shape == (2, 1, 2, 2, 5) and r.avail_actions.all()  # gymnasium envs: all available


def test_multibinary_takes_bools():
    # (Text, Graph, Sequence, OneOf and custom spaces: tests/core/test_object_spaces.py.)
    with mv.DummyVecEnv(_fns(S.Discrete(2), S.MultiBinary(2), n=1)) as venv:
        venv.reset()
        venv.step(np.array([[[True, False]]]))


@pytest.mark.parametrize("backend", [mv.DummyVecEnv, mv.SubprocVecEnv], ids=["dummy", "subproc"])
def test_multibinary_takes_floats_that_are_0_or_1(backend):
    """SB3's PPO and A2C send MultiBinary actions as float32 0./1.: the env gets the same actions as from ints."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(12, 2, 1, 3))
    results = []
    for dtype in (np.int64, np.float32, np.float64):
        with backend(_fns(S.Discrete(2), S.MultiBinary(3), n=2), env_seed=4) as venv:
            venv.reset()
            results.append([venv.step(a.astype(dtype)).reward.copy() for a in actions])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_bad_tree_actions_name_the_leaf_and_nothing_is_written():
    space = S.Dict({"move": S.Discrete(3, start=-1), "aim": S.Box(-1.0, 1.0, (2,), np.float32)})
    with mv.DummyVecEnv(_fns(S.Discrete(2), space, n=2)) as venv:
        venv.reset()
        good = {"move": np.array([[1], [-1]]), "aim": np.zeros((2, 1, 2), np.float32)}
        venv.step(good)
        with pytest.raises(ValueError, match=r"action\['move'\] 2 for env 1, agent 'agent_0' is out of range; "
                                             r"allowed: -1\.\.1"):
            venv.step({**good, "move": np.array([[0], [2]])})
        with pytest.raises(ValueError, match=r"action\['aim'\] \[0\.0, 3\.0\] for env 0, agent 'agent_0' is outside"):
            venv.step({**good, "aim": np.array([[[0.0, 3.0]], [[0.0, 0.0]]], np.float32)})
        with pytest.raises(ValueError, match=r"actions must be a tree like the action space .*: action\['aim'\] "
                                             r"is missing"):
            venv.step({"move": good["move"]})
        with pytest.raises(ValueError, match=r"actions\['move'\] must have shape \(2, 1\) .*one integer in -1\.\.1 "
                                             r"per agent\), got \(2,\)"):
            venv.step({**good, "move": np.array([0, 0])})
        # A refused step wrote nothing: the batch still holds the last good actions.
        np.testing.assert_array_equal(venv.buffers.actions["move"], good["move"])

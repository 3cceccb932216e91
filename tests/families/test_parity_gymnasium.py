"""Single-agent gymnasium envs: the batch equals gymnasium's SyncVectorEnv, value for value."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

import marl_vec as mv

T = 300


def cartpole_fns(n: int):
    # Half the envs time out after 15 steps, so truncation-only endings are frequent.
    return [
        (lambda: gym.make("CartPole-v1", max_episode_steps=15)) if i % 2 else (lambda: gym.make("CartPole-v1"))
        for i in range(n)
    ]


def _run_both(fns, mode: str, actions: np.ndarray, seed: int = 3):
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset[mode.upper()])
    venv = mv.DummyVecEnv(fns, env_seed=seed, autoreset=mode)
    ours = [venv.reset()]
    theirs_obs, _ = sync.reset(seed=seed)
    theirs = [(theirs_obs, None, None, None, {})]
    for a in actions:
        ours.append(venv.step(a[:, None] if a.ndim == 1 else a[:, None, ...]))
        theirs.append(sync.step(a))
    sync.close()
    venv.close()
    return ours, theirs


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_cartpole_equals_sync_vector_env(mode):
    n = 6
    actions = np.random.default_rng(0).integers(0, 2, size=(T, n))
    ours, theirs = _run_both(cartpole_fns(n), mode, actions)
    np.testing.assert_array_equal(ours[0].obs[:, 0], theirs[0][0])
    endings = {"terminated": 0, "truncated": 0}
    for t in range(1, T + 1):
        r, (obs, rew, term, trunc, info) = ours[t], theirs[t]
        np.testing.assert_array_equal(r.obs[:, 0], obs)
        np.testing.assert_array_equal(r.state, obs)
        np.testing.assert_array_equal(r.reward[:, 0], rew)
        np.testing.assert_array_equal(r.terminated[:, 0], term)
        np.testing.assert_array_equal(r.truncated[:, 0], trunc)
        np.testing.assert_array_equal(r.done, term | trunc)
        endings["terminated"] += int((term & ~trunc).sum())
        endings["truncated"] += int((trunc & ~term).sum())
        if mode == "same_step":
            final = info.get("_final_obs", np.zeros(n, bool))
            np.testing.assert_array_equal(final, r.done)
            for i in np.flatnonzero(final):
                np.testing.assert_array_equal(r.final_obs[i, 0], info["final_obs"][i])
                np.testing.assert_array_equal(r.final_state[i], info["final_obs"][i])
        else:
            assert r.final_obs is None
    assert endings["terminated"] > 10 and endings["truncated"] > 10, endings


def test_discrete_observations_equal_sync_vector_env():
    fns = [lambda: gym.make("FrozenLake-v1", is_slippery=True, max_episode_steps=8)] * 3
    actions = np.random.default_rng(1).integers(0, 4, size=(80, 3))
    ours, theirs = _run_both(fns, "same_step", actions)
    assert ours[0].obs.shape == (3, 1) and ours[0].obs.dtype == np.int64
    for t in range(1, 81):
        np.testing.assert_array_equal(ours[t].obs[:, 0], theirs[t][0])
        np.testing.assert_array_equal(ours[t].reward[:, 0], theirs[t][1])


def test_box_actions_equal_sync_vector_env():
    fns = [lambda: gym.make("Pendulum-v1", max_episode_steps=10)] * 2
    actions = np.random.default_rng(2).uniform(-2, 2, size=(35, 2, 1)).astype(np.float32)
    ours, theirs = _run_both(fns, "next_step", actions)
    venv_spec = mv.DummyVecEnv(fns[:1]).spec
    assert not venv_spec.discrete and venv_spec.action_shape == (1,)
    assert ours[0].avail_actions is None
    for t in range(1, 36):
        np.testing.assert_array_equal(ours[t].obs[:, 0], theirs[t][0])
        np.testing.assert_array_equal(ours[t].reward[:, 0], theirs[t][1])  # float64, bit for bit
        np.testing.assert_array_equal(ours[t].truncated[:, 0], theirs[t][3])


# -- the group stepper of GymAdapter (one loop over the native envs) ----------------

class Walk(gym.Env):
    """A seeded 1-D walk whose actions live in ``Discrete(3, start=-1)``: -1, 0, +1.

    It checks its actions like gymnasium envs do, so a wrong shift shows, and ends by
    termination at |x| >= 3 or by truncation after ``limit`` steps; its reward is the
    position plus noise from its seeded RNG."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def __init__(self, limit: int = 7, fail_at: int | None = None):
        self.action_space = gym.spaces.Discrete(3, start=-1)
        self.limit, self.fail_at, self.steps_taken = limit, fail_at, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0, 0
        return np.array([self.x, self.np_random.random()], np.float32), {"start": True}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.steps_taken += 1
        if self.steps_taken == self.fail_at:
            raise RuntimeError(f"walk failed at step {self.fail_at}")
        self.x += int(action)
        self.t += 1
        noise = self.np_random.random()
        obs = np.array([self.x, noise], np.float32)
        return obs, float(self.x) + noise, abs(self.x) >= 3, self.t >= self.limit, {"t": self.t}


def test_discrete_start_actions_keep_their_values():
    fns = [Walk, functools.partial(Walk, limit=4), Walk]
    actions = np.random.default_rng(4).integers(-1, 2, size=(40, 3))
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset.SAME_STEP)
    venv = mv.DummyVecEnv(fns, env_seed=1)
    assert venv.spec.n_actions == 3
    np.testing.assert_array_equal(venv.reset().obs[:, 0], sync.reset(seed=1)[0])
    endings = 0
    for a in actions:
        r = venv.step(a[:, None])
        obs, rew, term, trunc, info = sync.step(a)  # the same native actions: -1, 0, +1
        np.testing.assert_array_equal(r.obs[:, 0], obs)
        np.testing.assert_array_equal(r.reward[:, 0], rew)
        np.testing.assert_array_equal(r.terminated[:, 0], term)
        np.testing.assert_array_equal(r.truncated[:, 0], trunc)
        for i in np.flatnonzero(r.done):
            np.testing.assert_array_equal(r.final_obs[i, 0], info["final_obs"][i])
        endings += int(r.done.sum())
    assert endings > 5
    venv.close()
    sync.close()


@pytest.mark.parametrize("failing", [0, 2, 3])
def test_an_env_failing_in_the_group_stepper_is_restarted_and_the_others_step_on(failing):
    """Envs before the failing one are written by the stepper's cleanup, those after
    it by the stepper resumed at the next env: all equal to a batch without the failure."""
    class FailsFirst:
        """Builds a Walk that raises at its third step the first time only."""

        def __init__(self):
            self.builds = 0

        def __call__(self):
            self.builds += 1
            return Walk(limit=50, fail_at=3 if self.builds == 1 else None)

    def fns(fail: bool):
        return [FailsFirst() if fail and i == failing else functools.partial(Walk, limit=50) for i in range(4)]

    actions = np.random.default_rng(6).integers(-1, 2, size=(6, 4, 1))
    with mv.DummyVecEnv(fns(True), env_seed=2, restart_on_error=1) as venv, \
            mv.DummyVecEnv(fns(False), env_seed=2) as reference:
        ours, theirs = [venv.reset()], [reference.reset()]
        for a in actions:
            ours.append(venv.step(a))
            theirs.append(reference.step(a))
    others = [i for i in range(4) if i != failing]
    for r, ref in zip(ours, theirs):
        for name in ("obs", "reward", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(r, name)[others], getattr(ref, name)[others], err_msg=name)
    # Before the failure the failing env matched too; its third step raised.
    np.testing.assert_array_equal(ours[2].obs[failing], theirs[2].obs[failing])
    r = ours[3]
    assert r.done[failing] and r.truncated[failing, 0] and not r.terminated[failing, 0]
    assert r.reward[failing, 0] == 0.0
    info = r.infos[failing]
    assert info["restarted"] is True and "RuntimeError: walk failed at step 3" in info["error"]
    assert info["episode"]["length"] == 3 and info["episode"]["restarts"] == 1
    np.testing.assert_array_equal(r.final_obs[failing], ours[2].obs[failing])
    assert r.obs[failing, 0, 0] == 0.0  # the rebuilt env's first observation
    assert not any(ours[4].infos[i].get("restarted") for i in range(4))


def test_one_episode_with_gym_envs_repeats_the_finished_ones_and_steps_the_others():
    fns = [functools.partial(Walk, limit=2), functools.partial(Walk, limit=50), functools.partial(Walk, limit=3)]
    actions = np.zeros((5, 3, 1), dtype=np.int64)  # 0: stay, so only truncation ends
    with mv.DummyVecEnv(fns, env_seed=0, autoreset="one_episode") as venv, \
            mv.DummyVecEnv(fns, env_seed=0, autoreset="same_step") as reference:
        venv.reset(), reference.reset()
        last = {}
        for t, a in enumerate(actions, start=1):
            r, ref = venv.step(a), reference.step(a)
            # Env 1 never ends: stepped like in the reference, also between waiting envs.
            np.testing.assert_array_equal(r.obs[1], ref.obs[1])
            np.testing.assert_array_equal(r.reward[1], ref.reward[1])
            for i, limit in ((0, 2), (2, 3)):
                if t < limit:
                    np.testing.assert_array_equal(r.obs[i], ref.obs[i])
                elif t == limit:
                    np.testing.assert_array_equal(r.obs[i], ref.final_obs[i])
                    last[i] = r.obs[i].copy()
                    assert r.truncated[i, 0] and r.infos[i]["episode"]["length"] == limit
                else:  # finished: its last observation again, with zero reward and its flags
                    np.testing.assert_array_equal(r.obs[i], last[i])
                    assert r.reward[i, 0] == 0.0 and r.done[i] and "episode" not in r.infos[i]
            assert r.done.tolist() == [t >= 2, False, t >= 3]


def test_box_actions_in_the_group_stepper_are_the_rows_of_the_batch():
    seen = []

    class Recorder(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

        def reset(self, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            seen.append(np.array(action))
            return np.array([action[0]], np.float32), float(action[1]), False, False, {}

    actions = np.array([[[0.5, -0.25]], [[-1.0, 1.0]]], dtype=np.float32)
    with mv.DummyVecEnv([Recorder, Recorder]) as venv:
        venv.reset()
        r = venv.step(actions)
    np.testing.assert_array_equal(np.stack(seen), actions[:, 0])
    assert r.obs[:, 0, 0].tolist() == [0.5, -1.0] and r.reward[:, 0].tolist() == [-0.25, 1.0]


def test_a_subclass_that_changes_step_and_mixed_adapters_use_their_own_step():
    from marl_vec.core.adapter import GroupStepper
    from marl_vec.envs.gym import GymAdapter, _GymGroupStepper

    class Doubled(GymAdapter):
        def step(self, actions):
            info = super().step(actions)
            self.row.reward *= 2
            return info

    cartpole = functools.partial(gym.make, "CartPole-v1")
    plain = mv.DummyVecEnv([cartpole] * 2)
    doubled = mv.DummyVecEnv([lambda: Doubled(cartpole())] * 2)
    mixed = mv.DummyVecEnv([cartpole, lambda: Doubled(cartpole())])
    assert type(plain.group._stepper) is _GymGroupStepper
    assert type(doubled.group._stepper) is GroupStepper and type(mixed.group._stepper) is GroupStepper
    for venv in (plain, doubled, mixed):
        venv.reset()
    a = np.zeros((2, 1), dtype=np.int64)
    assert plain.step(a).reward[:, 0].tolist() == [1.0, 1.0]
    assert doubled.step(a).reward[:, 0].tolist() == [2.0, 2.0]
    assert mixed.step(a).reward[:, 0].tolist() == [1.0, 2.0]
    for venv in (plain, doubled, mixed):
        venv.close()


@pytest.mark.parametrize("flags", [
    [False] * 5, [False, True, False, np.True_, False], [0, 2, None, False, 1], [True] * 5,
    [np.False_, np.True_, 0, 1, False], [False] * 20 + [True], [True] * 9 + [False] * 3,
])
def test_flags_are_written_as_their_truth_values(flags):
    from marl_vec.envs.gym import _write_flags

    column = np.ones(len(flags), dtype=bool)
    _write_flags(column, flags)
    assert column.tolist() == [bool(f) for f in flags]


@pytest.mark.parametrize("rewards", [[1.0] * 4, [1.0, 2.0, 1.0], [np.float32(0.1)] * 3, [1, 0.1, np.float64(-2.5)]])
def test_rewards_are_written_as_one_element_writes_would(rewards):
    from marl_vec.envs.gym import _write_rewards

    column, expected = np.zeros(len(rewards), np.float32), np.zeros(len(rewards), np.float32)
    _write_rewards(column, rewards)
    for i, reward in enumerate(rewards):
        expected[i] = reward
    np.testing.assert_array_equal(column, expected)

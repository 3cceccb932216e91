"""PettingZoo agents with different spaces: padded Box actions, MultiDiscrete masks,
Dict observations padded leaf by leaf; each against a plain loop over the native envs."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv

import marl_vec as mv

S = gym.spaces


def _mpe(module: str, **kwargs):
    import importlib

    return importlib.import_module(f"mpe2.{module}").parallel_env(continuous_actions=True, max_cycles=12, **kwargs)


def _padded_actions(envs_spec, native_spaces, steps, num_envs, seed=3):
    """Uniform actions in each agent's own bounds; the padding is NaN (must be ignored)."""
    rng = np.random.default_rng(seed)
    A, shape = envs_spec.n_agents, envs_spec.action_shape
    actions = np.full((steps, num_envs, A, *shape), np.nan, np.float32)
    for j, space in enumerate(native_spaces):
        n = space.shape[0]
        actions[..., j, :n] = rng.uniform(space.low, space.high, size=(steps, num_envs, n))
    return actions


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("module", ["simple_speaker_listener_v4", "simple_world_comm_v3"])
def test_heterogeneous_box_actions_are_padded_and_equal_a_plain_loop(module, backend):
    fn = functools.partial(_mpe, module)
    num_envs, steps, seed = 2, 30, 5
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    natives = [fn() for _ in range(num_envs)]
    agents = natives[0].possible_agents
    spaces_ = [natives[0].action_space(a) for a in agents]
    with mv.make_vec([fn] * num_envs, backend=backend, env_seed=seed, **kwargs) as venv:
        spec = venv.spec
        assert spec.actions_padded and spec.action_shape == (max(s.shape[0] for s in spaces_),)
        assert spec.action.agent_shapes == tuple(s.shape for s in spaces_)
        # One agent's space: within every agent's bounds (the padding is no agent's).
        assert spec.single_agent_action_space == S.Box(0.0, 1.0, spec.action_shape, np.float32)
        assert venv.reset().avail_actions is None
        actions = _padded_actions(spec, spaces_, steps, num_envs)
        results = [venv.step(a) for a in actions]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(natives)]
    ends = 0
    for t in range(steps):
        for i, env in enumerate(natives):
            act = {a: actions[t, i, j, :spaces_[j].shape[0]] for j, a in enumerate(agents)}
            # the actions the env saw are the agents' own parts, not the NaN padding
            new_obs, rew, term, trunc, _ = env.step(act)
            r = results[t]
            got = r.final_obs[i] if r.done[i] else r.obs[i]
            for j, a in enumerate(agents):
                n = new_obs[a].shape[0]
                np.testing.assert_array_equal(got[j, :n], new_obs[a], err_msg=f"step {t} env {i} agent {a}")
                assert not got[j, n:].any()  # padding
                assert r.reward[i, j] == np.float32(rew[a])
                assert r.terminated[i, j] == term[a] and r.truncated[i, j] == trunc[a]
            if not env.agents:
                ends += 1
                env.reset()
    assert ends == num_envs * 2  # max_cycles=12: two episodes each, final obs compared


def test_padded_box_actions_are_checked_against_each_agents_own_bounds():
    with mv.DummyVecEnv([functools.partial(_mpe, "simple_speaker_listener_v4")]) as venv:
        venv.reset()
        ok = np.zeros((1, 2, 5), np.float32)
        ok[0, 0, 3:] = 7.0  # the speaker has 3 action dims: 3 and 4 are padding, ignored
        venv.step(ok)
        bad = np.zeros((1, 2, 5), np.float32)
        bad[0, 1, 4] = 1.5  # the listener's own fifth dim, bounded by [0, 1]
        with pytest.raises(ValueError, match=r"action \[0\.0, 0\.0, 0\.0, 0\.0, 1\.5\] for env 0, agent 'listener_0' "
                                             r"is outside the action space \[\[0\.0, 0\.0, 0\.0, 0\.0, 0\.0\], "
                                             r"\[1\.0, 1\.0, 1\.0, 1\.0, 1\.0\]\]"):
            venv.step(bad)
        bad = np.zeros((1, 2, 5), np.float32)
        bad[0, 0, 1] = np.nan
        with pytest.raises(ValueError, match=r"action \[0\.0, nan, 0\.0\] for env 0, agent 'speaker_0' is outside"):
            venv.step(bad)


class Picker(ParallelEnv):
    """Two agents with MultiDiscrete([3, 2], start=[0, 5]) actions and per-component
    masks in their infos; Dict observations whose ``vec`` leaf differs in size per
    agent. Rewards count how often an agent picked a masked-in value."""

    metadata = {"name": "picker"}

    def __init__(self, limit: int = 5):
        self.possible_agents = ["a", "b"]
        self.limit = limit
        self._obs = {
            "a": S.Dict({"vec": S.Box(-1, 1, (2,), np.float32), "id": S.Discrete(3)}),
            "b": S.Dict({"vec": S.Box(-1, 1, (4,), np.float32), "id": S.Discrete(3)}),
        }
        self._act = S.MultiDiscrete([3, 2], start=[0, 5])

    def observation_space(self, agent):
        return self._obs[agent]

    def action_space(self, agent):
        return self._act

    def _observe(self):
        return {a: {"id": np.int64(self.t % 3), "vec": self.rng.uniform(-1, 1, self._obs[a]["vec"].shape).astype(np.float32)}
                for a in self.agents}

    def _infos(self):
        # Component 0 may not take t % 3; component 1 may take only 5 on odd steps.
        masks = {}
        for a in self.agents:
            first = np.ones(3, np.int8)
            first[self.t % 3] = 0
            second = np.array([1, self.t % 2 == 0], np.int8)
            masks[a] = {"action_mask": (first, second)}
        return masks

    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "rng"):  # unseeded resets continue the stream
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._observe(), self._infos()

    def step(self, actions):
        for a, act in actions.items():
            assert self._act.contains(np.asarray(act, dtype=np.int64)), act
            assert act[0] != self.t % 3 and (act[1] == 5 or self.t % 2 == 0), (self.t, act)
        self.t += 1
        rewards = {a: float(actions[a][0] + actions[a][1]) for a in self.agents}
        done = self.t >= self.limit
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        obs, infos = self._observe(), self._infos()
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_multidiscrete_masks_and_dict_observations_padded_per_leaf(backend):
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    with mv.make_vec([Picker, Picker], backend=backend, env_seed=1, **kwargs) as venv:
        spec = venv.spec
        assert spec.obs_is_tree and spec.obs_padded
        assert spec.single_agent_observation_space["vec"].shape == (4,)
        r = venv.reset()
        assert r.avail_actions.shape == (2, 2, 2, 3)
        natives = [Picker(), Picker()]
        native_obs = [env.reset(seed=1 + i)[0] for i, env in enumerate(natives)]
        rng = np.random.default_rng(0)
        for t in range(12):
            for i, env in enumerate(natives):
                for j, a in enumerate(env.possible_agents):
                    n = 2 if a == "a" else 4
                    np.testing.assert_array_equal(r.obs["vec"][i, j, :n], native_obs[i][a]["vec"])
                    assert not r.obs["vec"][i, j, n:].any()
                    assert r.obs["id"][i, j] == native_obs[i][a]["id"]
            step = env_t = natives[0].t
            expected = np.array([[True] * 3, [True, step % 2 == 0, False]])
            expected[0, env_t % 3] = False
            assert (r.avail_actions == expected).all(), (t, r.avail_actions[0, 0])
            # A random available value per component, as the space's own numbers.
            scores = rng.random(r.avail_actions.shape)
            scores[~r.avail_actions] = -1
            actions = scores.argmax(-1) + np.array([0, 5])
            r = venv.step(actions)
            for i, env in enumerate(natives):
                native_obs[i], rew, _, trunc, _ = env.step({a: actions[i, j] for j, a in enumerate(env.possible_agents)})
                np.testing.assert_array_equal(r.reward[i], [rew[a] for a in env.possible_agents])
                if not env.agents:
                    assert r.done[i]
                    np.testing.assert_array_equal(r.final_obs["vec"][i, 1], native_obs[i]["b"]["vec"])
                    native_obs[i] = env.reset()[0]
        # A masked-out value is refused, naming the component and what it may take.
        bad = np.array([[[0, 5], [1, 5]], [[1, 5], [1, 5]]])
        bad[0, 0, 0] = natives[0].t % 3
        with pytest.raises(ValueError, match=r"action \[\d, 5\] for env 0, agent 'a' is not available: component 0 "
                                             r"may now take \[\d, \d\]"):
            venv.step(bad)


def test_pettingzoo_rewards_are_float32_unless_asked():
    fn = functools.partial(_mpe, "simple_speaker_listener_v4")
    with mv.DummyVecEnv([fn]) as f32, mv.DummyVecEnv([fn], reward_dtype="float64") as f64:
        assert f32.spec.reward_dtype == np.float32 and f64.spec.reward_dtype == np.float64
        f32.reset(), f64.reset()
        native = fn()
        native.reset(seed=0)
        actions = np.full((1, 2, 5), 0.5, np.float32)
        r32, r64 = f32.step(actions), f64.step(actions)
        _, rew, *_ = native.step({"speaker_0": actions[0, 0, :3], "listener_0": actions[0, 1]})
    assert r32.reward.dtype == np.float32 and r64.reward.dtype == np.float64
    assert r64.reward[0].tolist() == [rew["speaker_0"], rew["listener_0"]]  # the env's Python floats, exactly
    assert r32.reward[0].tolist() == [float(np.float32(rew["speaker_0"])), float(np.float32(rew["listener_0"]))]


class Steer(ParallelEnv):
    """Two agents with Dict actions {turn: Discrete(3, start=-1), speed: Box(0, 1, (1,))};
    each observes its position; rewards are turn * speed."""

    metadata = {"name": "steer"}

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self._act = S.Dict({"turn": S.Discrete(3, start=-1), "speed": S.Box(0.0, 1.0, (1,), np.float32)})

    def observation_space(self, agent):
        return S.Box(-np.inf, np.inf, (1,), np.float64)

    def action_space(self, agent):
        return self._act

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        self.pos = {a: 0.0 for a in self.agents}
        return {a: np.array([0.0]) for a in self.agents}, {}

    def step(self, actions):
        self.t += 1
        rewards = {}
        for a, act in actions.items():
            assert self._act.contains(act), act
            rewards[a] = float(act["turn"]) * float(act["speed"][0])
            self.pos[a] += rewards[a]
        done = self.t >= 4
        obs = {a: np.array([self.pos[a]]) for a in self.agents}
        flags = {a: done for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, {a: False for a in flags}, flags, {}


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_dict_actions_reach_each_agent_as_its_own_tree(backend):
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    rng = np.random.default_rng(2)
    with mv.make_vec([Steer, Steer], backend=backend, reward_dtype="float64", **kwargs) as venv:
        assert venv.spec.single_agent_action_space == Steer()._act
        venv.reset()
        natives = [Steer(), Steer()]
        for env in natives:
            env.reset()
        for t in range(9):
            actions = {"turn": rng.integers(-1, 2, size=(2, 2)),
                       "speed": rng.uniform(0, 1, size=(2, 2, 1)).astype(np.float32)}
            r = venv.step(actions)
            for i, env in enumerate(natives):
                obs, rew, *_ = env.step({a: {"turn": actions["turn"][i, j], "speed": actions["speed"][i, j]}
                                         for j, a in enumerate(env.possible_agents)})
                assert r.reward[i].tolist() == [rew["a"], rew["b"]]
                got = r.final_obs[i] if r.done[i] else r.obs[i]
                np.testing.assert_array_equal(got[:, 0], [obs["a"][0], obs["b"][0]])
                if not env.agents:
                    env.reset()
        with pytest.raises(ValueError, match=r"action\['speed'\] \[1\.5\] for env 0, agent 'b' is outside"):
            venv.step({"turn": np.zeros((2, 2), np.int64),
                       "speed": np.array([[[0.5], [1.5]], [[0.5], [0.5]]], np.float32)})

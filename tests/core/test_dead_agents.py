"""Agents that die, action masks from infos and observation dicts, padding, and how episodes end."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.scripted_envs import DyingAgentEnv, HeterogeneousEnv


def first_available(result):
    return result.avail_actions.argmax(axis=-1)


def run_episode(ending: str):
    venv = mv.DummyVecEnv([functools.partial(DyingAgentEnv, ending=ending)], env_seed=0)
    results, actions = [venv.reset()], []
    for _ in range(6):
        a = first_available(results[-1])
        actions.append(a)
        results.append(venv.step(a))
    venv.close()
    return results, actions


def test_agent_that_leaves_is_dead_from_then_on():
    results, actions = run_episode("truncation")
    for t in (1, 2):
        assert results[t].agent_mask[0].tolist() == [True, True, True]
    # Step 3: a1 dies. Its reward, terminated flag and last observation are written.
    r3 = results[3]
    assert r3.agent_mask[0].tolist() == [True, False, True]
    assert r3.terminated[0].tolist() == [False, True, False]
    assert r3.obs[0, 1, :2].tolist() == [3.0, 1.0]
    assert r3.reward[0, 1] == pytest.approx(actions[2][0, 1] + 0.1 + 0.03)
    assert r3.avail_actions[0, 1].tolist() == [True, False, False, False], "a dead agent may only take the no-op"
    # Steps 4 and 5: zero observation and reward, flags as the env last said.
    for t in (4, 5):
        r = results[t]
        assert r.agent_mask[0].tolist() == [True, False, True]
        assert not r.obs[0, 1].any() and r.reward[0, 1] == 0.0
        assert r.terminated[0].tolist() == [False, True, False] and not r.truncated[0].any()
        assert not r.done[0]


def test_truncation_only_ending_keeps_flags_apart():
    results, _ = run_episode("truncation")
    r = results[6]
    assert r.done[0]
    assert r.truncated[0].tolist() == [True, False, True]
    assert r.terminated[0].tolist() == [False, True, False]
    # same_step: the final observation of the living agents, zeros for the dead one.
    assert r.final_obs[0, 0, :2].tolist() == [6.0, 0.0] and r.final_obs[0, 2, :2].tolist() == [6.0, 2.0]
    assert not r.final_obs[0, 1].any()
    np.testing.assert_array_equal(r.final_state[0], r.final_obs[0].reshape(-1))
    # ... and the reset observation, with every agent alive again.
    assert r.obs[0, :, 0].tolist() == [0.0, 0.0, 0.0] and r.agent_mask[0].all()


def test_termination_ending():
    results, _ = run_episode("termination")
    r = results[6]
    assert r.done[0] and r.terminated[0].all() and not r.truncated[0].any()


def test_episode_summary_sums_each_agents_rewards():
    results, actions = run_episode("truncation")
    expected = np.zeros(3)
    for t, a in enumerate(actions, start=1):
        for i in range(3):
            if i == 1 and t > 3:
                continue
            expected[i] += a[0, i] + 0.1 * i + 0.01 * t
    episode = results[6].infos[0]["episode"]
    np.testing.assert_allclose(episode["agent_returns"], expected, rtol=1e-6)
    assert episode["return"] == pytest.approx(expected.mean(), rel=1e-6)
    assert episode["length"] == 6


def test_action_masks_from_infos_and_padded_actions():
    venv = mv.DummyVecEnv([DyingAgentEnv])
    r = venv.reset()
    assert venv.spec.actions_padded and venv.spec.n_actions == 4
    # t=0: action 0 is masked for everyone; a2 has 3 actions, so its action 3 is padding.
    assert r.avail_actions[0].tolist() == [
        [False, True, True, True],
        [False, True, True, True],
        [False, True, True, False],
    ]
    r = venv.step(np.array([[1, 1, 1]]))
    assert r.avail_actions[0, 0].tolist() == [True, False, True, True]
    with pytest.raises(ValueError, match=r"action 3 for env 0, agent 'a2' is not available"):
        venv.step(np.array([[2, 2, 3]]))
    venv.close()


def test_dead_agents_actions_are_ignored():
    venv = mv.DummyVecEnv([DyingAgentEnv])
    r = venv.reset()
    for _ in range(3):
        r = venv.step(first_available(r))
    assert not r.agent_mask[0, 1]
    a = first_available(r)
    a[0, 1] = 99  # out of range, but a1 is dead: ignored, not validated
    r = venv.step(a)
    assert not r.done[0]
    venv.close()


def test_heterogeneous_observations_are_padded_and_masks_come_from_obs_dicts():
    venv = mv.DummyVecEnv([HeterogeneousEnv])
    spec = venv.spec
    assert spec.obs_shape == (5,) and spec.obs_padded
    assert spec.n_actions == 4 and spec.actions_padded
    assert spec.state_shape == (10,), "no state(): the padded observations concatenated"
    r = venv.reset()
    assert r.obs[0].tolist() == [[0, 1, 2, 3, 4], [7, 0, 0, 0, 0]]
    assert r.avail_actions[0].tolist() == [[True, False, True, False], [False, True, False, False]]
    np.testing.assert_array_equal(r.state[0], r.obs[0].reshape(-1))
    r = venv.step(np.array([[2, 1]]))
    assert r.reward[0].tolist() == [2.0, -1.0]
    assert r.obs[0].tolist() == [[1, 2, 3, 4, 5], [7, 1, 0, 0, 0]]
    assert r.avail_actions[0, 0].tolist() == [True, False, True, True]
    venv.close()


class UnmaskedWithState(DyingAgentEnv):
    """DyingAgentEnv without action masks (every action always allowed), with a state:
    the adapter writes its results with array operations (observations by one
    concatenate, rewards and flags by index arrays)."""

    def action_space(self, agent):
        from gymnasium import spaces

        return spaces.Discrete(4)

    def _mask(self, agent):
        return np.ones(4, dtype=np.int8)

    @property
    def state_space(self):
        from gymnasium import spaces

        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def state(self):
        return np.array([self.t, len(self.agents)], np.float32)

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        return obs, {a: {} for a in self.agents}

    def step(self, actions):
        obs, rewards, terms, truncs, _ = super().step(actions)
        return obs, rewards, terms, truncs, {a: {} for a in self.agents}


class ReorderedDicts(UnmaskedWithState):
    """The same env, its dicts in reverse agent order (allowed by PettingZoo): the
    adapter takes its per-agent path for observations, rewards and flags."""

    def step(self, actions):
        obs, rewards, terms, truncs, infos = super().step(actions)
        return tuple({k: d[k] for k in reversed(list(d))} for d in (obs, rewards, terms, truncs, infos))


@pytest.mark.parametrize("ending", ["truncation", "termination"])
def test_array_writes_equal_per_agent_writes(ending, monkeypatch):
    from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter

    actions = np.random.default_rng(3).integers(0, 4, size=(20, 2, 3))

    def play(cls):
        fns = [functools.partial(cls, ending=ending, die_at=4, episode_len=6),
               functools.partial(cls, ending=ending, die_at=6, episode_len=9)]
        with mv.DummyVecEnv(fns, env_seed=4) as venv:
            return [venv.reset()] + [venv.step(a) for a in actions]

    by_array = play(UnmaskedWithState)
    bind = PettingZooAdapter.bind

    def bind_per_agent(self, row):
        bind(self, row)
        assert self._obs_by_array
        self._obs_by_array = False

    monkeypatch.setattr(PettingZooAdapter, "bind", bind_per_agent)
    per_agent = play(ReorderedDicts)
    assert sum(bool(r.done.any()) for r in by_array) >= 4
    assert any(r.agent_mask.all() for r in by_array[1:]) and not all(r.agent_mask.all() for r in by_array[1:])
    for t, (a, b) in enumerate(zip(by_array, per_agent)):
        for name in ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
                     "final_obs", "final_state", "final_avail_actions"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"{name} at step {t}")
        assert [info.get("episode", {}).get("length") for info in a.infos] == \
               [info.get("episode", {}).get("length") for info in b.infos]

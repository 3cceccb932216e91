"""An agent that leaves ``env.agents`` and comes back (respawn) is alive with clear flags,
and ``done`` is True exactly when the native env has no agents left."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

import marl_vec as mv


class RespawnEnv(ParallelEnv):
    """Two agents. ``b`` dies (terminated, removed) at step ``die_at`` and respawns at
    step ``back_at``; ``a`` dies at step ``a_dies_at``; the episode ends when ``b`` is
    cut off at step ``length`` (or when no agent is left)."""

    metadata = {"name": "respawn_v0"}

    def __init__(self, die_at=2, back_at=4, a_dies_at=5, length=8):
        self.possible_agents = ["a", "b"]
        self.die_at, self.back_at, self.a_dies_at, self.length = die_at, back_at, a_dies_at, length

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self):
        return {a: np.array([self.t, i], np.float32) for i, a in enumerate(self.possible_agents) if a in self.agents}

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        acting = list(self.agents)
        terms = {a: False for a in acting}
        truncs = {a: False for a in acting}
        if self.t == self.die_at and "b" in acting:
            terms["b"] = True
        if self.t == self.a_dies_at and "a" in acting:
            terms["a"] = True
        if self.t >= self.length:
            truncs = {a: True for a in acting}
        rewards = {a: float(actions[a]) for a in acting}
        obs = self._obs()
        self.agents = [a for a in acting if not (terms[a] or truncs[a])]
        if self.t == self.back_at:
            self.agents = [a for a in self.possible_agents if a in self.agents or a == "b"]
            obs = self._obs()
        return obs, rewards, terms, truncs, {a: {} for a in acting}


def play(env_fn, backend, steps):
    with mv.make_vec([env_fn], backend=backend, env_seed=0) as venv:
        results = [venv.reset()]
        for _ in range(steps):
            results.append(venv.step(np.ones((1, 2), np.int64)))
    return results


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_respawned_agent_starts_with_clear_flags(backend):
    r = play(RespawnEnv, backend, 8)
    # Step 2: b dies.
    assert r[2].agent_mask[0].tolist() == [True, False] and r[2].terminated[0].tolist() == [False, True]
    assert r[3].terminated[0].tolist() == [False, True] and not r[3].done[0]
    # Step 4: b is back in env.agents: alive, flags clear.
    assert r[4].agent_mask[0].tolist() == [True, True]
    assert r[4].terminated[0].tolist() == [False, False] and r[4].truncated[0].tolist() == [False, False]
    assert r[4].obs[0].tolist() == [[4.0, 0.0], [4.0, 1.0]]
    assert r[4].avail_actions[0].tolist() == [[True] * 3, [True] * 3]
    # Step 5: a dies while b lives: the native env goes on, so does the batch.
    assert r[5].terminated[0].tolist() == [True, False] and r[5].agent_mask[0].tolist() == [False, True]
    assert not r[5].done[0]
    assert r[5].reward[0].tolist() == [1.0, 1.0], "b acted at step 5 and is rewarded"
    # Step 8: b is cut off; now the native env has no agents.
    for t in (6, 7):
        assert not r[t].done[0]
    assert r[8].done[0] and r[8].terminated[0].tolist() == [True, False] and r[8].truncated[0].tolist() == [False, True]


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("a_dies_at", [3, 6])
def test_done_follows_native_env_over_episodes(backend, a_dies_at):
    # Three episodes of 8 steps; the native env is done exactly when its agents list is
    # empty. With a_dies_at=3, a dies at the very step b comes back.
    fn = functools.partial(RespawnEnv, die_at=1, back_at=3, a_dies_at=a_dies_at, length=8)
    results = play(fn, backend, 24)
    native = fn()
    native.reset()
    for t, r in enumerate(results[1:], start=1):
        native.step({a: 1 for a in native.agents})
        assert bool(r.done[0]) == (not native.agents), f"step {t}"
        np.testing.assert_array_equal(r.agent_mask[0], [a in native.agents for a in native.possible_agents]
                                      if native.agents else [True, True])
        if not native.agents:
            native.reset()

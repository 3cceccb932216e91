"""Hypothesis: the autoreset state machine against a small reference model.

A counter env (one agent) observes ``[episode, t]``, earns reward ``t`` and ends
after ``L`` steps, by termination in even episodes and truncation in odd ones.
Random sequences of steps, partial and full resets are run on a DummyVecEnv and
on a plain-Python model of each mode; every array must agree.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import marl_vec as mv


class CounterEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 1000, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int):
        self.length, self.episode, self.t = length, -1, 0

    def reset(self, seed=None, options=None):
        self.episode += 1
        self.t = 0
        return np.array([self.episode, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        term, trunc = end and self.episode % 2 == 0, end and self.episode % 2 == 1
        return np.array([self.episode, self.t], np.float32), float(self.t), term, trunc, {}


class Model:
    """What each mode promises, one env at a time."""

    def __init__(self, lengths, mode):
        self.lengths, self.mode = lengths, mode
        n = len(lengths)
        self.ep, self.t = [-1] * n, [0] * n
        self.ended = [False] * n
        self.obs = np.zeros((n, 2), np.float32)
        self.final = np.zeros((n, 2), np.float32)
        self.reward = np.zeros(n, np.float32)
        self.term, self.trunc, self.done = (np.zeros(n, bool) for _ in range(3))

    def _reset(self, i):
        self.ep[i] += 1
        self.t[i] = 0
        self.ended[i] = False
        self.obs[i] = (self.ep[i], 0)

    def reset(self, ids):
        for i in ids:
            self._reset(i)
            self.reward[i] = 0
            self.term[i] = self.trunc[i] = self.done[i] = False

    def step(self):
        """Returns False where the batch must refuse the step (disabled mode)."""
        if self.mode == "disabled" and any(self.ended):
            return False
        for i, length in enumerate(self.lengths):
            if self.ended[i]:
                if self.mode == "next_step":
                    self._reset(i)
                    self.reward[i] = 0
                    self.term[i] = self.trunc[i] = self.done[i] = False
                else:  # one_episode
                    self.reward[i] = 0
                continue
            self.t[i] += 1
            t, end = self.t[i], self.t[i] >= length
            self.reward[i] = t
            self.obs[i] = (self.ep[i], t)
            self.term[i] = end and self.ep[i] % 2 == 0
            self.trunc[i] = end and self.ep[i] % 2 == 1
            self.done[i] = end
            if end:
                if self.mode == "same_step":
                    self.final[i] = self.obs[i]
                    self._reset(i)
                else:
                    self.ended[i] = True
        return True


ops = st.lists(
    st.one_of(st.just("step"), st.just("step"), st.just("step"), st.just("reset"),
              st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True)),
    min_size=1, max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    mode=st.sampled_from(["same_step", "next_step", "disabled", "one_episode"]),
    operations=ops,
)
def test_autoreset_matches_the_model(lengths, mode, operations):
    fns = [functools.partial(CounterEnv, length) for length in lengths]
    venv = mv.DummyVecEnv(fns, autoreset=mode)
    model = Model(lengths, mode)
    venv.reset()
    model.reset(range(len(lengths)))
    actions = np.zeros((len(lengths), 1), np.int64)
    for op in operations:
        if op == "step":
            if not model.step():
                try:
                    venv.step(actions)
                except mv.EnvFinishedError:
                    continue
                raise AssertionError("stepping a finished env must raise in disabled mode")
            r = venv.step(actions)
        else:
            ids = None if op == "reset" else [i for i in op if i < len(lengths)]
            if ids == []:
                continue
            model.reset(range(len(lengths)) if ids is None else ids)
            r = venv.reset(env_ids=ids)
        np.testing.assert_array_equal(r.obs[:, 0], model.obs)
        np.testing.assert_array_equal(r.reward[:, 0], model.reward)
        np.testing.assert_array_equal(r.terminated[:, 0], model.term)
        np.testing.assert_array_equal(r.truncated[:, 0], model.trunc)
        np.testing.assert_array_equal(r.done, model.done)
        if mode == "same_step" and op == "step":
            np.testing.assert_array_equal(r.final_obs[r.done, 0], model.final[model.done])
    venv.close()

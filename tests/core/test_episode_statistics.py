"""episode_statistics(): what each number is a mean over.

- ``episodes`` is an int, every episode finished so far;
- ``restarts`` counts the env restarts (restart_on_error) of each episode, and its
  mean is over every episode of the window (one without a restart counts 0);
- family stats are means over the episodes that report them: an episode cut by a
  restart has no outcome and reports none.
"""

from __future__ import annotations

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter
from marl_vec.core.episode import EpisodeStatistics
from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv


class ScoredAdapter(PettingZooAdapter):
    """DyingAgentEnv with a family stat: ``score``, the env's step counter at the episode's end."""

    def episode_stats(self, info):
        return {"score": float(self.env.t)}


class Builds:
    """An env_fn whose first build fails at its step ``fail_at`` (then restarts into good envs)."""

    def __init__(self, episode_len: int, fail_at: int | None = None):
        self.episode_len, self.fail_at, self.builds = episode_len, fail_at, 0

    def __call__(self):
        self.builds += 1
        if self.fail_at is not None and self.builds == 1:
            return ScoredAdapter(FailingEnv(fail_at=self.fail_at, episode_len=self.episode_len))
        return ScoredAdapter(DyingAgentEnv(episode_len=self.episode_len))


class SecondResetFails(DyingAgentEnv):
    """Raises in its second reset (the first autoreset) when ``fail``."""

    def __init__(self, fail: bool, episode_len: int):
        super().__init__(episode_len=episode_len)
        self.fail, self.resets = fail, 0

    def reset(self, seed=None, options=None):
        self.resets += 1
        if self.fail and self.resets == 2:
            raise ConnectionError("Connection already closed. SC2 probably crashed")
        return super().reset(seed, options)


class ResetFailingBuilds:
    def __init__(self, episode_len: int):
        self.episode_len, self.builds = episode_len, 0

    def __call__(self):
        self.builds += 1
        return SecondResetFails(fail=self.builds == 1, episode_len=self.episode_len)


def zeros_available(r: mv.StepResult) -> np.ndarray:
    """The lowest available action of every agent."""
    return np.argmax(r.avail_actions, axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_restarts_are_a_mean_over_every_episode_and_family_stats_over_those_reporting(backend, request):
    # Env 0 fails in its 2nd step (restart, no score), then plays episodes of 6 steps;
    # env 1 plays episodes of 4. In 14 steps: env 0 ends at steps 2, 8, 14; env 1 at 4, 8, 12.
    fns = [Builds(episode_len=6, fail_at=2), Builds(episode_len=4)]
    with make_backend(backend, fns, request, env_seed=0, restart_on_error=1) as venv:
        stats = venv.episode_statistics()
        assert stats == {"episodes": 0} and type(stats["episodes"]) is int
        r = venv.reset()
        summaries: list[tuple[int, int, dict]] = []
        for t in range(1, 15):
            r = venv.step(zeros_available(r))
            summaries += [(t, i, r.infos[i]["episode"]) for i in np.flatnonzero(r.done)]
        assert [(t, i) for t, i, _ in summaries] == [(2, 0), (4, 1), (8, 0), (8, 1), (12, 1), (14, 0)]
        # Each summary counts the restarts of its own episode: only env 0's first has one.
        assert [s.get("restarts") for _, _, s in summaries] == [1, None, None, None, None, None]
        assert [s.get("score") for _, _, s in summaries] == [None, 4.0, 6.0, 4.0, 4.0, 6.0]
        stats = venv.episode_statistics()
        assert type(stats["episodes"]) is int and stats["episodes"] == 6
        assert stats["restarts"] == 1 / 6
        assert stats["score"] == 24 / 5  # over the 5 episodes with an outcome
        assert stats["length"] == (2 + 4 + 6 + 4 + 4 + 6) / 6


@pytest.mark.parametrize("autoreset", ["same_step", "next_step"])
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_a_restart_in_an_autoreset_counts_in_the_episode_it_starts(backend, autoreset, request):
    with make_backend(backend, [ResetFailingBuilds(episode_len=3)], request, env_seed=0,
                      restart_on_error=1, autoreset=autoreset) as venv:
        r = venv.reset()
        summaries = []
        for _ in range(12):
            r = venv.step(zeros_available(r))
            if r.done[0] and "episode" in r.infos[0]:
                summaries.append(r.infos[0]["episode"])
        # The first autoreset (after episode 1) failed: episode 2 began with a restart.
        assert [s.get("restarts") for s in summaries][:3] == [None, 1, None]
        assert [s["length"] for s in summaries][:3] == [3, 3, 3]
        stats = venv.episode_statistics()
        assert stats["restarts"] == 1 / stats["episodes"]


def test_a_restart_in_the_first_reset_counts_in_the_first_episode():
    from tests.backends.test_subproc_restart import ResetFailingBuilds as FirstResetFails

    with mv.DummyVecEnv([FirstResetFails()], env_seed=0, restart_on_error=1) as venv:
        r = venv.reset()
        assert r.infos[0]["restarted"] is True
        for _ in range(6):  # DyingAgentEnv's default episode: 6 steps
            r = venv.step(zeros_available(r))
        assert r.infos[0]["episode"]["restarts"] == 1
        assert venv.episode_statistics()["restarts"] == 1.0


def test_an_episode_dropped_by_reset_takes_its_restarts_with_it():
    with mv.DummyVecEnv([Builds(episode_len=6, fail_at=2)], env_seed=0, restart_on_error=1,
                        autoreset="next_step") as venv:
        r = venv.reset()
        for _ in range(3):  # step 2 fails and ends episode 1; step 3 starts episode 2
            r = venv.step(zeros_available(r))
        assert venv.episode_statistics()["restarts"] == 1.0
        r = venv.reset()  # episode 2 is dropped unfinished
        for _ in range(6):
            r = venv.step(zeros_available(r))
        assert "restarts" not in r.infos[0]["episode"]
        stats = venv.episode_statistics()
        assert (stats["episodes"], stats["restarts"], stats["length"]) == (2, 0.5, 4.0)


def test_rules_on_plain_summaries():
    stats = EpisodeStatistics(window=4)
    assert stats.means() == {"episodes": 0}
    stats.add([{"return": 1.0, "length": 5, "battle_won": True},
               {"return": 3.0, "length": 7, "restarts": 2},
               {"return": 2.0, "length": 6, "battle_won": False, "agent_returns": np.ones(3)}])
    assert stats.means() == {"episodes": 3, "return": 2.0, "length": 6.0, "battle_won": 0.5, "restarts": 2 / 3}
    stats.add([{"return": 0.0, "length": 1}] * 3)  # the window keeps the last 4
    means = stats.means()
    # No episode of the window restarted: no restarts mean (as with restart_on_error=0).
    assert means == {"episodes": 6, "return": 0.5, "length": 2.25, "battle_won": 0.0}
    assert type(means["episodes"]) is int

"""The async runner (``MarlVecAsyncEnvRunner``) samples as RLlib's own runner does, counted
against RLlib's ``MultiAgentEnvRunner`` on the same env (MPE simple_spread through RLlib's
``ParallelPettingZooEnv``, seed 7):

- ``sample(num_episodes=k)`` returns exactly k episodes (RLlib stops at k and drops the
  episodes still going), with the same values as RLlib's k;
- ``on_episode_start`` fires only for episodes that are stepped: RLlib starts the episode
  after an ended one at that env's next step, so ``num_episodes`` and
  ``batch_mode="complete_episodes"`` sampling start no follow-up episode;
- the env-to-module connectors run as in RLlib's runner: once over every env at a reset,
  after every step (the last step's batch serves the next ``sample()``), also with
  ``random_actions=True``, and over each observation once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from ray.rllib.connectors.connector_v2 import ConnectorV2  # noqa: E402
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner  # noqa: E402

from marl_vec.compat.rllib import ENV_NAME, MarlVecAsyncEnvRunner, MarlVecEnvRunner  # noqa: E402
from tests.helpers.rllib_runs import SIMPLE_SPREAD, ppo_config  # noqa: E402

RUNNERS = {"native": MultiAgentEnvRunner, "sync": MarlVecEnvRunner, "async": MarlVecAsyncEnvRunner}
CALLS: Counter[str] = Counter()


def count_start(**kwargs: Any) -> None:
    CALLS["start"] += 1


def count_end(**kwargs: Any) -> None:
    CALLS["end"] += 1


class CountCalls(ConnectorV2):
    """An env-to-module piece that counts its calls and the (episode, env_t) it was shown (episodes
    with data: RLlib's runner also passes the empty episode that follows an ended one)."""

    seen: list[tuple[str, int]] = []

    def __call__(self, *, rl_module: Any, batch: Any, episodes: list, **kwargs: Any) -> Any:
        CALLS["connector"] += 1
        CountCalls.seen.extend((ep.id_, ep.env_t) for ep in episodes if ep.is_reset)
        return batch


def make_runner(kind: str, num_envs: int, **env_runners: Any) -> Any:
    config = ppo_config("native" if kind == "native" else "face", num_envs=num_envs)
    if kind == "async":
        config = config.environment(ENV_NAME, env_config={"env_fn": SIMPLE_SPREAD, "backend": "dummy"})
    config = (config.env_runners(env_to_module_connector=lambda env, spaces, device: [CountCalls()], **env_runners)
              .callbacks(on_episode_start=count_start, on_episode_end=count_end, on_sample_end=None))
    return RUNNERS[kind](config=config)


def episode_values(episodes: list) -> list:
    out = []
    for ep in episodes:
        out.append([(agent, np.asarray(sa.get_observations()).tolist(), np.asarray(sa.get_actions()).tolist(),
                     list(sa.get_rewards())) for agent, sa in sorted(ep.agent_episodes.items())])
    return out


def sample(kind: str, num_envs: int, reset: bool = True, **kwargs: Any) -> tuple[list, Counter]:
    CALLS.clear()
    runner = make_runner(kind, num_envs, **kwargs.pop("env_runners", {}))
    try:
        episodes = runner.sample(**kwargs)
    finally:
        runner.stop()
    return episodes, Counter(CALLS)


def test_num_episodes_returns_exactly_k_episodes_the_same_as_rllibs():
    native, native_calls = sample("native", 8, num_episodes=3)
    assert len(native) == 3
    for kind in ("sync", "async"):
        ours, calls = sample(kind, 8, num_episodes=3)
        assert len(ours) == 3, kind
        assert episode_values(ours) == episode_values(native), kind
        assert all(ep.is_done for ep in ours)
        assert [ep.env_t for ep in ours] == [ep.env_t for ep in native] == [25] * 3
        # every env's first episode starts; 3 end, as natively
        assert (calls["start"], calls["end"]) == (native_calls["start"], native_calls["end"]) == (8, 3), kind


@pytest.mark.parametrize("mode", ["num_episodes", "complete_episodes"])
def test_on_episode_start_fires_only_for_episodes_rllib_starts(mode):
    counts = {}
    for kind in RUNNERS:
        if mode == "num_episodes":
            _, calls = sample(kind, 1, num_episodes=1, random_actions=True)
        else:
            _, calls = sample(kind, 1, random_actions=True, env_runners={"batch_mode": "complete_episodes"})
        counts[kind] = (calls["start"], calls["end"])
    assert counts == dict.fromkeys(RUNNERS, (1, 1))


def test_follow_up_episodes_start_at_their_first_step_as_in_rllib():
    """Timestep sampling over an episode's end: the next episode starts (on_episode_start)
    when its env is stepped again, in this sample() or the next one."""
    for steps, want in ((25, (1, 1)), (26, (2, 1))):
        counts = {}
        for kind in RUNNERS:
            _, calls = sample(kind, 1, num_timesteps=steps, random_actions=True)
            counts[kind] = (calls["start"], calls["end"])
        assert counts == dict.fromkeys(RUNNERS, want), steps


def test_random_actions_run_the_env_to_module_connectors():
    seen = {}
    for kind in RUNNERS:
        for random_actions in (True, False):
            CountCalls.seen = []
            episodes, calls = sample(kind, 2, num_timesteps=20, random_actions=random_actions)
            assert calls["connector"] > 0, (kind, random_actions)
            shown = set(CountCalls.seen)
            # Every observation an episode recorded before its last was shown to the connectors.
            for ep in episodes:
                for t in range(ep.env_t_started, ep.env_t):
                    assert (ep.id_, t) in shown, (kind, random_actions, t)
            seen[kind, random_actions] = calls["connector"]
    # On the reset and after every step, the last one included (its batch serves the next sample()).
    assert set(seen.values()) == {11}, seen


def test_a_reset_runs_the_env_to_module_connectors_once_as_rllibs_runner_does():
    """The reset's observations go through the connectors at the reset (RLlib's own test
    ``test_env_to_module_called_on_reset``), and that batch serves the first actions."""
    for kind in RUNNERS:
        CountCalls.seen = []
        episodes, calls = sample(kind, 3, num_timesteps=0, random_actions=True)
        assert episodes == []
        assert calls["connector"] == 1, kind
        assert sorted(t for _, t in CountCalls.seen) == [0, 0, 0], kind


def test_the_last_steps_connector_batch_serves_the_next_sample_once():
    """RLlib's runner runs the connectors after a sample()'s last step and acts on that batch in
    the next sample(); so does the async runner, each observation once, also across an
    episode's end (1 env, 30 steps at a time: episodes of ~20 random steps end in between)."""
    for kind in RUNNERS:
        CountCalls.seen = []
        CALLS.clear()
        runner = make_runner(kind, 1)
        try:
            episodes = [ep for _ in range(4) for ep in runner.sample(num_timesteps=30, random_actions=True)]
        finally:
            runner.stop()
        assert any(ep.is_done for ep in episodes)
        seen = Counter(CountCalls.seen)
        for ep in episodes:
            for t in range(ep.env_t_started, ep.env_t + (not ep.is_done)):
                assert seen[ep.id_, t] >= 1, (kind, t)
        # each (episode, env_t) once, but the done-episode pass RLlib makes over an episode's end
        ends = {(ep.id_, ep.env_t) for ep in episodes if ep.is_done}
        assert all(n == 1 for key, n in seen.items() if key not in ends), kind

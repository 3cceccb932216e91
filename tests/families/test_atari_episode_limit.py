"""Atari: spec.episode_limit is the step limit the env enforces, in agent steps.

ALE truncates at ``max_num_frames_per_episode`` emulator frames (108000 in v5),
gymnasium's TimeLimit at ``max_episode_steps`` agent steps, PettingZoo's Atari at
``max_cycles`` frames. Each test checks the reported limit and that an episode
of a still-running game ends exactly there (or sooner where noops count).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra is not installed")
pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.tools.cli import main  # noqa: E402
from marl_vec.envs.atari import make_atari  # noqa: E402


def _first_episode_length(env_fn, n_agents: int = 1) -> tuple[int, bool]:
    """Steps (action 0) until env 0's episode ends; returns its length and whether it was truncated."""
    with mv.DummyVecEnv([env_fn], env_seed=0) as venv:
        venv.reset()
        actions = np.zeros((1, n_agents), dtype=np.int64)
        for t in range(1, 100_000):
            r = venv.step(actions)
            if r.done[0]:
                assert r.infos[0]["episode"]["length"] == t
                return t, bool(r.truncated[0].all())
    raise AssertionError("no episode end")


def test_single_agent_defaults_report_the_emulator_frame_limit():
    # v5: 108000 frames, frameskip 4 in the raw env or frame_skip 4 in the preprocessing.
    assert make_atari("ALE/Pong-v5").spec.episode_limit == 27000
    assert make_atari("ALE/Pong-v5", preprocess=True).spec.episode_limit == 27000
    # NoFrameskip: one frame per raw step, four per preprocessed step.
    assert make_atari("PongNoFrameskip-v4").spec.episode_limit == 108000
    assert make_atari("PongNoFrameskip-v4", preprocess=True).spec.episode_limit == 27000
    # A stochastic frameskip (2, 5): at least 2 frames per step.
    assert make_atari("Pong-v4").spec.episode_limit == 54000


def test_time_limit_and_frame_limit_give_the_smaller():
    assert make_atari("ALE/Pong-v5", max_episode_steps=7).spec.episode_limit == 7
    assert make_atari("ALE/Pong-v5", preprocess=True, max_episode_steps=1000).spec.episode_limit == 1000
    env = make_atari("ALE/Pong-v5", preprocess=True, max_episode_steps=1000, max_num_frames_per_episode=400)
    assert env.spec.episode_limit == 100


@pytest.mark.parametrize(
    "kwargs, limit",
    [
        ({"max_num_frames_per_episode": 40}, 10),  # raw, frameskip 4
        ({"preprocess": True, "noop_max": 0, "max_num_frames_per_episode": 40}, 10),
        ({"preprocess": True, "noop_max": 0, "max_num_frames_per_episode": 42}, 11),  # ceil
        ({"preprocess": True, "noop_max": 0, "max_episode_steps": 9}, 9),
    ],
)
def test_single_agent_episode_ends_at_the_reported_limit(kwargs, limit):
    fn = lambda: make_atari("ALE/Pong-v5", repeat_action_probability=0.0, **kwargs)  # noqa: E731
    assert fn().spec.episode_limit == limit
    assert _first_episode_length(fn) == (limit, True)


def test_noop_starts_only_shorten_a_frame_limited_episode():
    fn = lambda: make_atari("ALE/Pong-v5", preprocess=True, noop_max=30, max_num_frames_per_episode=200)  # noqa: E731
    length, truncated = _first_episode_length(fn)
    assert truncated and -(-(200 - 30) // 4) <= length <= fn().spec.episode_limit == 50


def test_multiplayer_reports_max_cycles_in_agent_steps():
    pytest.importorskip("multi_agent_ale_py", reason="the atari extra is not installed")
    venv = mv.make("atari/pong_2p", num_envs=1)
    assert venv.spec.episode_limit == 5000 and venv.env_info()["episode_limit"] == 5000  # 20000 frames / 4
    venv.close()
    assert make_atari("pettingzoo.atari.pong_v3", max_cycles=30).spec.episode_limit == 30  # no frame skip
    assert make_atari("pettingzoo.atari.pong_v3").spec.episode_limit == 100000  # PettingZoo's default
    fn = lambda: make_atari("pettingzoo.atari.pong_v3", preprocess=True, noop_max=0, max_cycles=42)  # noqa: E731
    assert fn().spec.episode_limit == 11
    assert _first_episode_length(fn, n_agents=2) == (11, True)


def test_info_command_prints_the_multiplayer_limit(capsys):
    pytest.importorskip("multi_agent_ale_py", reason="the atari extra is not installed")
    assert main(["info", "configs/atari/pong_2p.yaml"]) == 0
    assert '"episode_limit": 5000' in capsys.readouterr().out

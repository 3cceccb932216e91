"""Atari: ALE games equal gymnasium's own envs, value for value; preprocessing; options and errors."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset

ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed")
pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.atari import AtariAdapter, make_atari  # noqa: E402
from marl_vec.envs.registry import MissingExtraError, make_env  # noqa: E402

gym.register_envs(ale_py)

E = 3
LIMIT = 40  # steps per episode (TimeLimit), so that autoresets happen in a short test


def raw_pong():
    return gym.make("ALE/Pong-v5", max_episode_steps=LIMIT)


def reference_preprocessed(env_id: str = "ALE/Pong-v5", **make_kwargs):
    """The standard chain, written with gymnasium alone; the time limit counts agent steps."""
    limit = make_kwargs.pop("max_episode_steps", None)
    env = gym.make(env_id, frameskip=1, obs_type="grayscale", **make_kwargs)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    env = gym.wrappers.FrameStackObservation(env, 4)
    return env if limit is None else gym.wrappers.TimeLimit(env, limit)


def _run(venv, sync, actions, seed):
    r = venv.reset(seed=seed)
    obs, _ = sync.reset(seed=seed)
    np.testing.assert_array_equal(r.obs[:, 0], obs)
    ends = 0
    for a in actions:
        r = venv.step(a[:, None])
        obs, reward, terminated, truncated, infos = sync.step(a)
        yield r, (obs, reward, terminated, truncated, infos)
        ends += int(r.done.sum())
    assert ends >= E, "the test should cover autoresets"


def test_raw_pong_equals_sync_vector_env():
    actions = np.random.default_rng(1).integers(0, 6, size=(2 * LIMIT + 5, E))
    fns = [lambda: make_atari("ALE/Pong-v5", max_episode_steps=LIMIT)] * E
    venv = mv.DummyVecEnv(fns, autoreset="same_step")
    sync = gym.vector.SyncVectorEnv([raw_pong] * E, autoreset_mode=GymAutoreset.SAME_STEP)
    assert venv.spec.obs_shape == (210, 160, 3) and venv.spec.obs_dtype == np.uint8
    for r, (obs, reward, terminated, truncated, infos) in _run(venv, sync, actions, seed=7):
        assert r.obs.dtype == np.uint8
        np.testing.assert_array_equal(r.obs[:, 0], obs)
        np.testing.assert_array_equal(r.state, obs)
        np.testing.assert_array_equal(r.reward[:, 0], reward)
        np.testing.assert_array_equal(r.terminated[:, 0], terminated)
        np.testing.assert_array_equal(r.truncated[:, 0], truncated)
        for i in np.flatnonzero(r.done):
            np.testing.assert_array_equal(r.final_obs[i, 0], infos["final_obs"][i])
    venv.close()
    sync.close()


def test_preprocessed_pong_equals_gymnasium_chain_next_step():
    actions = np.random.default_rng(2).integers(0, 6, size=(2 * LIMIT + 5, E))
    fns = [lambda: make_atari("ALE/Pong-v5", preprocess=True, engine="python", clip_rewards=False, max_episode_steps=LIMIT)] * E
    venv = mv.DummyVecEnv(fns, autoreset="next_step")
    sync = gym.vector.SyncVectorEnv(
        [lambda: reference_preprocessed(max_episode_steps=LIMIT)] * E, autoreset_mode=GymAutoreset.NEXT_STEP
    )
    for r, (obs, reward, terminated, truncated, _) in _run(venv, sync, actions, seed=11):
        np.testing.assert_array_equal(r.obs[:, 0], obs)
        np.testing.assert_array_equal(r.reward[:, 0], reward)
        np.testing.assert_array_equal(r.terminated[:, 0], terminated)
        np.testing.assert_array_equal(r.truncated[:, 0], truncated)
    venv.close()
    sync.close()


def test_reward_clipping_keeps_raw_score():
    # Breakout scores 1, 4 or 7 per brick; clipped rewards are the sign, the score is raw.
    env_kwargs = dict(preprocess=True, engine="python", repeat_action_probability=0.0, max_episode_steps=400)
    venv = mv.DummyVecEnv([lambda: make_atari("ALE/Breakout-v5", **env_kwargs)] * 2, env_seed=0)
    ref = [reference_preprocessed("ALE/Breakout-v5", repeat_action_probability=0.0, max_episode_steps=400) for _ in range(2)]
    venv.reset()
    for i, env in enumerate(ref):
        env.reset(seed=i)
    rng = np.random.default_rng(0)
    scores = np.zeros(2)
    summaries = []
    for _ in range(400):
        a = rng.integers(0, 4, size=2)
        r = venv.step(a[:, None])
        for i, env in enumerate(ref):
            _, raw, term, trunc, _ = env.step(a[i])
            scores[i] += raw
            assert r.reward[i, 0] == np.sign(raw)
            if term or trunc:
                summaries.append((r.infos[i]["episode"]["score"], scores[i]))
                scores[i] = 0.0
                env.reset()
    assert summaries and all(ours == theirs for ours, theirs in summaries)
    venv.close()


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({"preprocess": True}, (4, 84, 84)),
        ({"preprocess": True, "frame_stack": 1}, (84, 84)),
        ({"preprocess": True, "grayscale": False, "frame_stack": 2}, (2, 84, 84, 3)),
        ({"preprocess": True, "screen_size": 64, "frame_skip": 2}, (4, 64, 64)),
        ({}, (210, 160, 3)),
        ({"obs_type": "ram"}, (128,)),
    ],
)
@pytest.mark.parametrize("engine", ["python", "auto"])
def test_preprocessing_shapes_and_dtypes(kwargs, shape, engine):
    venv = mv.DummyVecEnv([lambda: make_atari("ALE/Breakout-v5", engine=engine, **kwargs)] * 2)
    assert venv.spec.obs_shape == shape and venv.spec.obs_dtype == np.uint8
    r = venv.reset()
    assert r.obs.shape == (2, 1, *shape) and r.obs.dtype == np.uint8 and r.state.dtype == np.uint8
    r = venv.step(np.ones((2, 1), dtype=np.int64))
    assert r.obs.shape == (2, 1, *shape) and r.obs.dtype == np.uint8
    assert r.avail_actions.all() and venv.spec.n_actions == 4
    venv.close()


def test_terminal_on_life_loss_ends_episodes_before_game_over():
    env = make_atari("ALE/Breakout-v5", preprocess=True, terminal_on_life_loss=True, repeat_action_probability=0.0)
    venv = mv.DummyVecEnv([lambda: env], env_seed=0)
    venv.reset()
    lives_at_end = []
    for _ in range(600):
        r = venv.step(np.array([[1]]))  # FIRE launches the ball, then it is lost
        if r.done[0]:
            lives_at_end.append(r.infos[0]["lives"])
            if len(lives_at_end) == 2:
                break
    # gymnasium's AtariPreprocessing: the episode ends at the first life lost, and the
    # reset after it restarts the game (all 5 lives again).
    assert lives_at_end == [4, 4] and r.terminated[0, 0]
    venv.close()


def test_config_files_build():
    for name, shape, agents in [("atari/pong", (4, 84, 84), 1), ("atari/breakout", (4, 84, 84), 1), ("atari/pong_2p", (4, 84, 84), 2)]:
        venv = mv.make(name, num_envs=2)
        r = venv.reset()
        assert r.obs.shape == (2, agents, *shape) and r.obs.dtype == np.uint8, name
        venv.step(np.zeros((2, agents), dtype=np.int64))
        venv.close()


def test_registry_family_and_episode_limit():
    env = make_env("atari", "ALE/Pong-v5", preprocess=True, engine="python", max_episode_steps=1000)
    assert isinstance(env, AtariAdapter) and env.spec.snapshots and env.spec.episode_limit == 1000
    default = make_env("atari", "ALE/Pong-v5", preprocess=True, max_episode_steps=1000)
    assert type(default).__name__ == "AleVectorAtariAdapter" and default.config.kind == "ale_vector"  # auto
    assert default.spec.episode_limit == 1000 and default.spec.snapshots  # fast mode: on the python path
    assert make_env("atari", "ALE/Pong-v5", max_episode_steps=7).spec.episode_limit == 7
    assert make_env("atari", "ALE/Pong-v5").spec.episode_limit == 27000  # 108000 frames, 4 per step
    env.close()


# -- errors ---------------------------------------------------------------------


def test_preprocessing_option_without_preprocess_is_an_error():
    with pytest.raises(ValueError, match=r"atari options \['frame_stack'\] need preprocess=True"):
        make_atari("ALE/Pong-v5", frame_stack=4)


@pytest.mark.parametrize("name, value", [("frame_stack", 0), ("frame_skip", -1), ("screen_size", 8.5), ("noop_max", -2)])
def test_bad_preprocessing_values(name, value):
    with pytest.raises(ValueError, match=f"atari option {name} must be an integer"):
        make_atari("ALE/Pong-v5", preprocess=True, **{name: value})


def test_frameskip_with_preprocess_is_an_error():
    with pytest.raises(ValueError, match="'frameskip' is set by preprocess=True"):
        make_atari("ALE/Pong-v5", preprocess=True, frameskip=4)


def test_non_atari_pettingzoo_id_is_an_error():
    with pytest.raises(ValueError, match="use the 'pettingzoo' family"):
        make_atari("pettingzoo.butterfly.pistonball_v6")


def test_missing_ale_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'marl_vec\[atari\]'"):
        make_atari("ALE/Pong-v5")


def test_rom_dir_is_ale_pys():
    from marl_vec.envs.atari import ale_rom_dir

    assert os.path.isfile(os.path.join(ale_rom_dir(), "pong.bin"))

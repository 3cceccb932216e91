"""Multi-player Atari (PettingZoo, multi-agent-ale-py): two-player Pong as two agents."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("multi_agent_ale_py", reason="the atari extra is not installed")
pytest.importorskip("ale_py", reason="the atari extra is not installed")
cv2 = pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.atari import ale_rom_dir, make_atari  # noqa: E402

E = 2
FRAMES = 60  # max_cycles, in emulator frames


def test_two_player_pong_raw_equals_pettingzoo_loop():
    from pettingzoo.atari import pong_v3

    T = 2 * FRAMES + 7
    actions = np.random.default_rng(0).integers(0, 6, size=(T, E, 2))
    venv = mv.DummyVecEnv([lambda: make_atari("pettingzoo.atari.pong_v3", max_cycles=FRAMES)] * E, env_seed=5)
    assert venv.spec.agents == ("first_0", "second_0") and venv.spec.obs_shape == (210, 160, 3)
    envs = [pong_v3.parallel_env(max_cycles=FRAMES, auto_rom_install_path=ale_rom_dir()) for _ in range(E)]
    agents = envs[0].possible_agents
    r = venv.reset()
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=5 + i)
        for k, a in enumerate(agents):
            np.testing.assert_array_equal(r.obs[i, k], obs[a])
    ends = 0
    for t in range(T):
        r = venv.step(actions[t])
        for i, env in enumerate(envs):
            obs, rew, term, trunc, _ = env.step({a: int(actions[t, i, k]) for k, a in enumerate(agents)})
            for k, a in enumerate(agents):
                np.testing.assert_array_equal(r.final_obs[i, k] if r.done[i] else r.obs[i, k], obs[a])
                assert r.reward[i, k] == rew[a]
                assert r.terminated[i, k] == term[a] and r.truncated[i, k] == trunc[a]
            np.testing.assert_array_equal(r.state[i], r.obs[i, 0])
            if not env.agents:
                assert r.done[i]
                ends += 1
                obs, _ = env.reset()
                np.testing.assert_array_equal(r.obs[i, 0], obs[agents[0]])
    assert ends == 2 * E
    assert r.agent_mask.all()
    venv.close()
    for env in envs:
        env.close()


def test_two_player_pong_preprocessed_frames():
    """Each new frame is the max of the last two of 4 skipped frames, resized with INTER_AREA."""
    from pettingzoo.atari import pong_v3

    venv = mv.DummyVecEnv(
        [lambda: make_atari("pettingzoo.atari.pong_v3", preprocess=True, noop_max=0, max_cycles=4 * 30)], env_seed=3
    )
    assert venv.spec.obs_shape == (4, 84, 84) and venv.spec.n_agents == 2
    ref = pong_v3.parallel_env(max_cycles=4 * 30, obs_type="grayscale_image", auto_rom_install_path=ale_rom_dir())
    agents = ref.possible_agents
    r = venv.reset()
    obs, _ = ref.reset(seed=3)
    first = cv2.resize(obs[agents[0]][..., 0], (84, 84), interpolation=cv2.INTER_AREA)
    assert r.obs.dtype == np.uint8 and r.obs.shape == (1, 2, 4, 84, 84)
    assert all((r.obs[0, k] == first).all() for k in range(2))
    rng = np.random.default_rng(1)
    prev = r.obs[0, 0].copy()
    for _ in range(29):
        a = rng.integers(0, 6, size=2)
        r = venv.step(a[None])
        frames, reward = [], np.zeros(2)
        for _ in range(4):
            obs, rew, _, _, _ = ref.step({ag: int(a[k]) for k, ag in enumerate(agents)})
            frames.append(obs[agents[0]][..., 0])
            reward += [rew[ag] for ag in agents]
        expected = cv2.resize(np.maximum(frames[-1], frames[-2]), (84, 84), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(r.obs[0, 0, -1], expected)
        np.testing.assert_array_equal(r.obs[0, 0, :-1], prev[1:])
        np.testing.assert_array_equal(r.obs[0, 1], r.obs[0, 0])
        np.testing.assert_array_equal(r.state[0], r.obs[0, 0])
        np.testing.assert_array_equal(r.reward[0], np.sign(reward))
        prev = r.obs[0, 0].copy()
    assert not r.done[0]
    venv.close()
    ref.close()


def test_two_player_pong_episode_stats_and_truncation():
    venv = mv.DummyVecEnv([lambda: make_atari("pettingzoo.atari.pong_v3", preprocess=True, max_cycles=40)] * E)
    venv.reset()
    r = venv.step(np.zeros((E, 2), dtype=np.int64))
    for _ in range(20):
        r = venv.step(np.zeros((E, 2), dtype=np.int64))
        if r.done.all():
            break
    assert r.done.all() and r.truncated.all() and not r.terminated.any()
    episode = r.infos[0]["episode"]
    assert episode["length"] == 10 and {"score", "score_first_0", "score_second_0"} <= set(episode)
    venv.close()


def test_same_seed_same_run_across_autoresets():
    """Noop starts after autoresets come from a seeded stream: two runs are identical."""

    def run(seed):
        fn = lambda: make_atari("pettingzoo.atari.pong_v3", preprocess=True, max_cycles=4 * 25)  # noqa: E731
        venv = mv.DummyVecEnv([fn] * 2, env_seed=seed)
        out = [venv.reset().obs]
        rng = np.random.default_rng(0)
        for _ in range(80):
            out.append(venv.step(rng.integers(0, 6, size=(2, 2))).obs)
        venv.close()
        return np.stack(out)

    first = run(1)
    np.testing.assert_array_equal(first, run(1))
    assert not np.array_equal(first, run(2))  # the noop starts do matter


def test_multiplayer_terminal_on_life_loss_is_an_error():
    with pytest.raises(ValueError, match="terminal_on_life_loss is not supported for multi-player Atari"):
        make_atari("pettingzoo.atari.pong_v3", preprocess=True, terminal_on_life_loss=True)


def test_unknown_game_is_an_error_naming_the_games():
    with pytest.raises(ValueError, match=r"unknown PettingZoo Atari game 'pongg_v3'; allowed: .*pong_v3"):
        make_atari("pettingzoo.atari.pongg_v3")
    with pytest.raises(ValueError, match="unknown PettingZoo Atari game 'base_atari_env'"):
        make_atari("pettingzoo.atari.base_atari_env")

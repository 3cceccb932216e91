"""Google Research Football on the real engine (installed by scripts/install/install_football.sh).

The batch must equal a plain gfootball loop with the same engine seeds and
actions; episode stats come from the game's score; fast autoreset restores the
first reset exactly; engines are reused across create/close cycles.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

football_env = pytest.importorskip(
    "gfootball.env", reason="gfootball is not installed (bash scripts/install/install_football.sh)"
)

SCENARIO = "academy_3_vs_1_with_keeper"
RIGHT = 5  # gfootball action 'right'
IDLE = 0


def fb(scenario: str = SCENARIO, **kwargs):
    kwargs.setdefault("left_agents", 3 if scenario == SCENARIO else 1)
    return make_env_fn("football", scenario, kwargs)


def random_actions(steps: int, num_envs: int, n_agents: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 19, size=(steps, num_envs, n_agents))


def run(venv, actions):
    first = venv.reset()
    return first, [venv.step(a) for a in actions]


def engine_seeds(seed: int):
    """The documented engine seed of each episode after reset(seed=seed)."""
    yield seed
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.integers(2**31))


def plain_state(obs: np.ndarray, n_left: int) -> np.ndarray:
    state = obs[0].copy()
    state[97:108] = obs[:n_left, 97:108].max(axis=0)
    return state


def plain_loop(scenario: str, n_left: int, seed: int, actions: np.ndarray, rewards: str = "scoring"):
    """One env, stepped with gfootball's own API; a fresh env per episode with the
    engine seed the adapter documents. Returns per-step records (same_step semantics)."""
    seeds = engine_seeds(seed)

    def new_env():
        env = football_env.create_environment(
            env_name=scenario, representation="simple115v2", rewards=rewards,
            number_of_left_players_agent_controls=n_left,
            other_config_options={"game_engine_random_seed": next(seeds)},
        )
        return env, np.reshape(env.reset(), (n_left, 115))

    env, obs = new_env()
    rec = {"first_obs": obs, "obs": [], "reward": [], "done": [], "final_obs": [], "score": []}
    for a in actions:
        o, r, done, _ = env.step(int(a[0]) if n_left == 1 else a)
        o = np.reshape(o, (n_left, 115))
        rec["reward"].append(np.reshape(np.asarray(r, np.float32), (n_left,)))
        rec["done"].append(done)
        rec["final_obs"].append(o)
        rec["score"].append(tuple(env.unwrapped.observation()[0]["score"]) if done else None)
        if done:
            env.close()
            env, o = new_env()
        rec["obs"].append(o)
    env.close()
    return rec


# -- spec, shapes and dtypes ---------------------------------------------------------


def test_spec_shapes_and_dtypes():
    with mv.DummyVecEnv([fb()] * 2, env_seed=0) as venv:
        spec = venv.spec
        assert spec.agents == ("left_0", "left_1", "left_2")
        assert (spec.obs_shape, spec.obs_dtype, spec.state_shape) == ((115,), np.float32, (115,))
        assert (spec.n_actions, spec.episode_limit, spec.snapshots) == (19, 401, True)
        assert spec.stats == ("score", "win", "goals_for", "goals_against")
        assert venv.env_info() == {"n_agents": 3, "obs_shape": 115, "state_shape": 115, "n_actions": 19, "episode_limit": 401}
        r = venv.reset()
        assert r.obs.shape == (2, 3, 115) and r.obs.dtype == np.float32
        assert r.state.shape == (2, 115) and r.state.dtype == np.float32
        assert r.avail_actions.shape == (2, 3, 19) and r.avail_actions.all()
        assert r.agent_mask.all()
        r = venv.step(np.full((2, 3), IDLE))
        assert r.reward.shape == (2, 3) and r.reward.dtype == np.float32
        # Each agent's active one-hot marks one player; the state marks all three.
        assert (r.obs[:, :, 97:108].sum(axis=2) == 1).all()
        assert (r.state[:, 97:108].sum(axis=1) == 3).all()


def test_extracted_minimap_and_right_agents():
    fn = fb(SCENARIO, left_agents=2, right_agents=1, representation="extracted")
    with mv.DummyVecEnv([fn], env_seed=0) as venv:
        assert venv.spec.agents == ("left_0", "left_1", "right_0")
        assert (venv.spec.obs_shape, venv.spec.obs_dtype) == ((72, 96, 4), np.uint8)
        r = venv.reset()
        assert r.obs.shape == (1, 3, 72, 96, 4) and r.obs.dtype == np.uint8
        assert r.state.shape == (1, 72, 96, 4)
        active = r.state[0, ..., 3]
        np.testing.assert_array_equal(active, r.obs[0, :2, ..., 3].max(axis=0))
        np.testing.assert_array_equal(r.state[0, ..., :3], r.obs[0, 0, ..., :3])


def test_single_agent_drops_no_axis():
    with mv.DummyVecEnv([fb("academy_empty_goal_close")], env_seed=0) as venv:
        r = venv.reset()
        assert r.obs.shape == (1, 1, 115)
        r = venv.step(np.array([[RIGHT]]))
        assert r.reward.shape == (1, 1)


# -- seeding and parity with gfootball -------------------------------------------------


def test_same_seed_same_trajectories_and_different_seeds_differ():
    actions = random_actions(120, 2, 3)
    runs = []
    for seed in (4, 4, 5):
        with mv.DummyVecEnv([fb()] * 2, env_seed=seed) as venv:
            first, results = run(venv, actions)
            runs.append((first.obs, np.stack([r.obs for r in results]), np.stack([r.reward for r in results]),
                         np.stack([r.done for r in results])))
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)
    assert runs[0][3].sum() >= 2, "the test should cross episode ends"
    assert not np.array_equal(runs[0][1], runs[2][1])


def test_equals_plain_gfootball_loop_across_episodes():
    seed, E, T = 10, 2, 120
    actions = random_actions(T, E, 3, seed=1)
    with mv.DummyVecEnv([fb()] * E, env_seed=seed) as venv:
        first, results = run(venv, actions)
    for i in range(E):
        ref = plain_loop(SCENARIO, 3, seed + i, actions[:, i])
        assert sum(ref["done"]) >= 1, "the test should cross an episode end"
        np.testing.assert_array_equal(first.obs[i], ref["first_obs"])
        np.testing.assert_array_equal(first.state[i], plain_state(ref["first_obs"], 3))
        for t, r in enumerate(results):
            np.testing.assert_array_equal(r.obs[i], ref["obs"][t], err_msg=f"env {i} obs at step {t}")
            np.testing.assert_array_equal(r.state[i], plain_state(ref["obs"][t], 3), err_msg=f"env {i} state at step {t}")
            np.testing.assert_array_equal(r.reward[i], ref["reward"][t], err_msg=f"env {i} reward at step {t}")
            assert r.done[i] == ref["done"][t], f"env {i} done at step {t}"
            # No episode reaches the 401-step limit here: every end is terminal.
            np.testing.assert_array_equal(r.terminated[i], [ref["done"][t]] * 3)
            assert not r.truncated[i].any()
            if r.done[i]:
                np.testing.assert_array_equal(r.final_obs[i], ref["final_obs"][t])
                goals_for, goals_against = ref["score"][t]
                assert r.infos[i]["episode"]["goals_for"] == goals_for
                assert r.infos[i]["episode"]["goals_against"] == goals_against


def test_reset_with_seed_replays_the_first_episode():
    actions = random_actions(40, 1, 3, seed=2)
    with mv.DummyVecEnv([fb()], env_seed=7) as venv:
        first, a = run(venv, actions)
        again = venv.reset(seed=7)
        b = [venv.step(x) for x in actions]
    np.testing.assert_array_equal(first.obs, again.obs)
    np.testing.assert_array_equal(np.stack([r.obs for r in a]), np.stack([r.obs for r in b]))


# -- episodes, stats, limits -------------------------------------------------------------


def test_goal_gives_score_stats_from_the_game_not_the_reward():
    # Running right from the edge of the box scores into the empty goal.
    fn = fb("academy_empty_goal_close", rewards="scoring,checkpoints")
    with mv.DummyVecEnv([fn], env_seed=0) as venv:
        venv.reset()
        for _ in range(100):
            r = venv.step(np.array([[RIGHT]]))
            if r.done[0]:
                break
        assert r.done[0] and r.terminated[0].all() and not r.truncated[0].any()
        ep = r.infos[0]["episode"]
        assert (ep["score"], ep["win"], ep["goals_for"], ep["goals_against"]) == (1.0, 1.0, 1.0, 0.0)
        assert r.infos[0]["score_reward"] == 1
        # Checkpoint rewards make the return (and the last reward) differ from the score.
        assert ep["return"] > 1.0
        assert venv.statistics.means()["win"] == 1.0


def test_time_limit_truncates_every_agent():
    # Standing still with the ball: the defender never comes, the game runs its
    # 400 frames; gfootball's last step is the 401st.
    with mv.DummyVecEnv([fb("academy_run_to_score")], env_seed=0) as venv:
        venv.reset()
        for t in range(500):
            r = venv.step(np.array([[IDLE]]))
            if r.done[0]:
                break
        assert t + 1 == 401 == venv.spec.episode_limit
        assert r.truncated[0].all() and not r.terminated[0].any()
        ep = r.infos[0]["episode"]
        assert ep["length"] == 401 and (ep["score"], ep["win"]) == (0.0, 0.0)


def test_fast_autoreset_restores_the_first_reset_exactly():
    fn = fb("academy_empty_goal_close")
    with mv.DummyVecEnv([fn], env_seed=3, autoreset="fast") as venv:
        first = venv.reset()
        obs, lengths, t = [], [], 0
        for _ in range(3):
            episode = []
            while True:
                r = venv.step(np.array([[RIGHT]]))
                t += 1
                episode.append(r.final_obs[0] if r.done[0] else r.obs[0])
                if r.done[0]:
                    np.testing.assert_array_equal(r.obs, first.obs)
                    np.testing.assert_array_equal(r.state, first.state)
                    lengths.append(r.infos[0]["episode"]["length"])
                    assert r.infos[0]["episode"]["goals_for"] == 1.0
                    break
            obs.append(np.stack(episode))
    assert lengths[0] == lengths[1] == lengths[2]
    np.testing.assert_array_equal(obs[0], obs[1])
    np.testing.assert_array_equal(obs[0], obs[2])


# -- engine lifetime and processes -----------------------------------------------------------


def test_create_close_cycles_reuse_pooled_engines():
    from gfootball.env import football_env_core

    pool = football_env_core._unused_engines
    sizes = []
    for cycle in range(4):
        with mv.DummyVecEnv([fb()], env_seed=cycle) as venv:
            venv.reset()
            venv.step(np.zeros((1, 3), dtype=np.int64))
        # close() hands the engine back; the next env takes it instead of a new one.
        sizes.append(len(pool))
    assert sizes[0] >= 1 and sizes == [sizes[0]] * 4, f"pooled engines after each cycle: {sizes}"


def test_subproc_two_workers_equal_dummy_and_leave_no_process():
    psutil = pytest.importorskip("psutil")
    actions = random_actions(60, 4, 3, seed=3)
    with mv.DummyVecEnv([fb()] * 4, env_seed=1) as venv:
        first_d, res_d = run(venv, actions)

    def workers() -> set[int]:
        # multiprocessing's resource tracker (and forkserver) live as long as this
        # interpreter by design; every other child must be gone after close().
        return {
            p.pid for p in psutil.Process(os.getpid()).children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE and not any(
                "resource_tracker" in part or "forkserver" in part for part in p.cmdline())
        }

    before = workers()
    venv = mv.SubprocVecEnv([fb()] * 4, env_seed=1, num_workers=2)
    first_s, res_s = run(venv, actions)
    venv.close()
    np.testing.assert_array_equal(first_d.obs, first_s.obs)
    for t, (d, s) in enumerate(zip(res_d, res_s)):
        for field in ("obs", "state", "reward", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(d, field), getattr(s, field), err_msg=f"{field} at step {t}")
        for i in np.flatnonzero(d.done):
            assert d.infos[i]["episode"]["score"] == s.infos[i]["episode"]["score"]
    left = workers() - before
    assert not left, f"worker processes left behind: {left}"


# -- configs and errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, n_agents, limit",
    [("academy_3_vs_1_with_keeper", 3, 401), ("academy_counterattack_hard", 4, 401),
     ("5_vs_5", 4, 3001), ("11_vs_11_stochastic", 11, 3001)],
)
def test_configs(name, n_agents, limit):
    with mv.make(f"football/{name}", num_envs=1, backend="dummy") as venv:
        assert (venv.spec.n_agents, venv.spec.episode_limit) == (n_agents, limit)
        r = venv.reset()
        assert r.obs.shape == (1, n_agents, 115)
        r = venv.step(np.zeros((1, n_agents), dtype=np.int64))
        assert r.reward.shape == (1, n_agents)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"env_id": "academy_no_such_drill"}, "unknown football scenario 'academy_no_such_drill'; allowed: 11_vs_11_competition"),
        ({"left_agents": 5}, "left_agents=5; allowed: 1 to 4"),
        ({"right_agents": 3}, "right_agents=3; allowed: 0 to 2"),
        ({"representation": "pixels"}, "unknown football representation 'pixels'; allowed: simple115v2, simple115, extracted"),
        ({"rewards": "checkpoints"}, "unknown football rewards 'checkpoints'; allowed: 'scoring' or 'scoring,checkpoints'"),
        ({"number_of_left_players_agent_controls": 2}, "unknown football option(s) number_of_left_players_agent_controls; allowed: left_agents"),
    ],
)
def test_bad_options_name_what_is_allowed(kwargs, message):
    from marl_vec.envs.football import make_football

    env_id = kwargs.pop("env_id", SCENARIO)
    with pytest.raises((ValueError, TypeError)) as exc:
        make_football(env_id, **kwargs)
    assert message in str(exc.value)


def test_bad_seed_names_the_range():
    with mv.DummyVecEnv([fb()], env_seed=0) as venv, pytest.raises(
        ValueError, match=r"football seed must be an int in \[0, 2\*\*31\), got -1"
    ):
        venv.reset(seed=-1)


def test_render_gives_an_offscreen_frame():
    # A small frame: the engine draws in software here (no GPU), slower with size.
    small = {"render_resolution_x": 320, "render_resolution_y": 180}
    env = fb("academy_empty_goal_close", other_config_options=small)()
    try:
        with mv.DummyVecEnv([lambda: env], env_seed=0) as venv:
            venv.reset()
            frames = venv.render()
            venv.step(np.array([[RIGHT]]))
            frames2 = venv.render()
            # gfootball allows one rendering engine per process: a second env says so.
            other = fb("academy_empty_goal_close", other_config_options=small)()
            try:
                with pytest.raises(RuntimeError, match="gfootball renders only one env per process"):
                    other.render()
            finally:
                other.close()
    except RuntimeError as exc:  # no EGL device at all: say so rather than pass
        pytest.fail(f"off-screen rendering failed: {exc}")
    frame = frames[0]
    assert frame.dtype == np.uint8 and frame.shape == (180, 320, 3)
    assert frame.std() > 0, "the frame is blank"
    assert frames2[0].shape == frame.shape


def test_missing_gfootball_names_the_extra(monkeypatch):
    from marl_vec.envs.football import make_football
    from marl_vec.envs.registry import MissingExtraError

    monkeypatch.setitem(__import__("sys").modules, "gfootball.env", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'marl_vec\[football\]'.*|install_football"):
        make_football(SCENARIO)

"""XuanCeVecEnv's conventions, checked against the VecEnv it wraps.

The face needs no XuanCe (only gymnasium's spaces), so these tests run in the
main venv and in the XuanCe one. Each step of the face must carry exactly what
a VecEnv with the same seeds and actions returns, in XuanCe's layout: dicts per
env, the final observation at an episode's end with the reset one in
``infos["reset_*"]``, one truncated flag per env, and the SC2 / Football
counters XuanCe's runners read. XuanCe's own trainers through the face:
tests/faces/test_xuance.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat import XuanCeVecEnv
from tests.helpers.scripted_envs import DyingAgentEnv

MPE = {"family": "pettingzoo", "id": "mpe2.simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 25}}


def mpe(continuous: bool = False, num_envs: int = 2, **vec) -> mv.VecEnv:
    env = {**MPE, "kwargs": {**MPE["kwargs"], "continuous_actions": continuous}}
    return mv.make({"env": env, "vec": {"num_envs": num_envs, "env_seed": 5, "reward_dtype": "float64", **vec}})


def first_available(avail: dict[str, np.ndarray]) -> dict[str, int]:
    return {agent: int(np.flatnonzero(row)[0]) for agent, row in avail.items()}


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("ending", ["truncation", "termination"])
def test_steps_carry_the_vecenv_results_in_xuance_layout(backend, ending):
    fns = [functools.partial(DyingAgentEnv, die_at=3, episode_len=5 + i, ending=ending) for i in range(2)]
    face = XuanCeVecEnv(mv.make_vec(fns, backend=backend, env_seed=7, reward_dtype="float64"), max_episode_steps=6)
    ref = mv.DummyVecEnv(fns, env_seed=7, reward_dtype="float64")
    ref.reset()  # the face resets once when made, as XuanCe's envs do
    obs, infos = face.reset()
    r = ref.reset()
    agents = ["a0", "a1", "a2"]
    assert face.agents == agents and face.num_agents == 3 and face.num_envs == 2
    for e in range(2):
        assert list(obs[e]) == agents
        for a, agent in enumerate(agents):
            np.testing.assert_array_equal(obs[e][agent], r.obs[e, a])
            np.testing.assert_array_equal(infos[e]["avail_actions"][agent], r.avail_actions[e, a])
        np.testing.assert_array_equal(infos[e]["state"], r.state[e])
        assert infos[e]["episode_step"] == 0 and infos[e]["episode_score"] == dict.fromkeys(agents, 0.0)
        assert face.buf_obs[e] is obs[e] and face.buf_state[e] is infos[e]["state"]
    scores = np.zeros((2, 3))
    ends = 0
    for t in range(12):
        actions = [first_available(face.buf_avail_actions[e]) for e in range(2)]
        obs, rewards, terminated, truncated, infos = face.step(actions)
        r = ref.step(np.array([[actions[e][a] for a in agents] for e in range(2)]))
        scores += r.reward
        for e in range(2):
            done = bool(r.done[e])
            seen_obs = r.final_obs if done else r.obs
            seen_state = r.final_state if done else r.state
            seen_avail = r.final_avail_actions if done else r.avail_actions
            for a, agent in enumerate(agents):
                np.testing.assert_array_equal(obs[e][agent], seen_obs[e, a])
                np.testing.assert_array_equal(face.buf_avail_actions[e][agent], seen_avail[e, a])
                assert rewards[e][agent] == float(r.reward[e, a])
                assert terminated[e][agent] == bool(r.terminated[e, a])
                assert infos[e]["agent_mask"][agent] == bool(r.agent_mask[e, a])
                assert infos[e]["episode_score"][agent] == pytest.approx(scores[e, a])
            np.testing.assert_array_equal(infos[e]["state"], seen_state[e])
            assert face.buf_state[e] is infos[e]["state"] and face.buf_obs[e] is obs[e]
            assert truncated[e] == (done and ending == "truncation")
            # XuanCe ends an episode where every agent terminated or the env truncated.
            assert (all(terminated[e].values()) or truncated[e]) == done
            if done:
                assert infos[e]["episode_step"] == r.infos[e]["episode"]["length"]
                ends += 1
                scores[e] = 0.0
                for a, agent in enumerate(agents):
                    np.testing.assert_array_equal(infos[e]["reset_obs"][agent], r.obs[e, a])
                    np.testing.assert_array_equal(infos[e]["reset_avail_actions"][agent], r.avail_actions[e, a])
                np.testing.assert_array_equal(infos[e]["reset_state"], r.state[e])
                assert face.battles_game[e] >= 1
                # XuanCe's trainer starts the next episode from reset_*.
                face.buf_obs[e] = infos[e]["reset_obs"]
                face.buf_avail_actions[e] = infos[e]["reset_avail_actions"]
            else:
                assert "reset_obs" not in infos[e]
    assert ends >= 3
    face.close()
    ref.close()


def test_spaces_and_episode_limit():
    face = XuanCeVecEnv(mpe())
    assert face.max_episode_steps == 25
    assert face.observation_space["agent_0"].shape == (18,)
    assert face.action_space["agent_2"].n == 5
    assert face.state_space.shape == (54,)
    assert face.env_info["num_agents"] == 3 and face.groups_info["num_groups"] == 0
    face.close()
    face = XuanCeVecEnv(mpe(continuous=True), max_episode_steps=10)
    space = face.action_space["agent_0"]
    assert face.max_episode_steps == 10 and space.shape == (5,)
    assert space.low.tolist() == [0.0] * 5 and space.high.tolist() == [1.0] * 5
    assert face.buf_avail_actions == [None, None]
    face.close()


def test_actions_are_copied_not_changed_in_place():
    # mpe2 divides a discrete action in place; XuanCe keeps its actions for learning.
    face, ref = XuanCeVecEnv(mpe()), mpe()
    ref.reset()
    ref.reset()
    face.reset()
    for t in range(3):
        actions = [{f"agent_{a}": np.array((a + t + e) % 5) for a in range(3)} for e in range(2)]
        kept = [{k: v.copy() for k, v in d.items()} for d in actions]
        obs, *_ = face.step(actions)
        r = ref.step(np.array([[actions[e][f"agent_{a}"] for a in range(3)] for e in range(2)]))
        assert all(np.array_equal(actions[e][k], kept[e][k]) for e in range(2) for k in kept[e])
        np.testing.assert_array_equal(obs[1]["agent_2"], r.obs[1, 2])
    face.close()
    ref.close()


def test_continuous_actions_are_clipped_to_the_action_space():
    # XuanCe's Gaussian policies sample outside the bounds and rely on the env to clip.
    face, ref = XuanCeVecEnv(mpe(continuous=True)), mpe(continuous=True)
    ref.reset()
    ref.reset()
    face.reset()
    raw = np.array([-0.5, 0.3, 1.7, 2.0, 0.9], np.float32)
    obs, *_ = face.step([{f"agent_{a}": raw for a in range(3)} for _ in range(2)])
    r = ref.step(np.broadcast_to(np.clip(raw, 0.0, 1.0), (2, 3, 5)))
    np.testing.assert_array_equal(obs[0]["agent_0"], r.obs[0, 0])
    assert raw.tolist()[0] == -0.5  # the caller's array is untouched
    face.close()
    ref.close()


def test_rewards_are_the_native_float64_values_by_default():
    """XuanCe's own mpe env hands the env's Python-float rewards on; so does the face from a config."""
    from mpe2 import simple_spread_v3

    face = XuanCeVecEnv.from_config({"env": MPE, "vec": {"env_seed": 5}}, num_envs=2)
    native = [simple_spread_v3.parallel_env(**MPE["kwargs"]) for _ in range(2)]
    for e, env in enumerate(native):  # the face reset twice (once when made): so do these, seeded alike
        env.reset(seed=5 + e)
        env.reset()
    face.reset()
    rng = np.random.default_rng(3)
    for t in range(30):
        actions = [{agent: int(rng.integers(0, 5)) for agent in face.agents} for _ in range(2)]
        _, rewards, *_ = face.step(actions)
        for e, env in enumerate(native):
            _, expected, *_ = env.step(dict(actions[e]))
            assert rewards[e] == expected, (t, e)  # Python floats, equal to the last bit
        if t == 24:  # max_cycles: both episodes end together
            for env in native:
                env.reset()
    face.close()


def test_misuse_names_what_is_wrong():
    with pytest.raises(TypeError, match="needs a marl_vec VecEnv, got list"):
        XuanCeVecEnv([])  # type: ignore[arg-type]
    venv = mpe(autoreset="next_step")
    with pytest.raises(ValueError, match="needs autoreset='same_step' \\(or 'fast'\\), got 'next_step'"):
        XuanCeVecEnv(venv)
    venv.close()
    venv = mv.DummyVecEnv([DyingAgentEnv], env_seed=0, reward_dtype="float64")
    with pytest.raises(ValueError, match="declares no episode_limit; pass max_episode_steps="):
        XuanCeVecEnv(venv)
    venv.close()
    venv = mv.DummyVecEnv([DyingAgentEnv], env_seed=0)
    with pytest.raises(ValueError, match=r"needs float64 rewards .* the VecEnv has float32; build it with "
                                         r"reward_dtype='float64' .* or use XuanCeVecEnv.from_config"):
        XuanCeVecEnv(venv, max_episode_steps=5)
    venv.close()
    face = XuanCeVecEnv(mpe())
    with pytest.raises(ValueError, match="one dict of actions per env \\(2\\), got 1"):
        face.step([{"agent_0": 0}])
    with pytest.raises(ValueError, match="actions of env 1 have no entry for agent 'agent_2'"):
        face.step([dict.fromkeys(face.agents, 0), {"agent_0": 0, "agent_1": 0}])
    with pytest.raises(ValueError, match="out of range; allowed: 0..4"):
        face.step([dict.fromkeys(face.agents, 0), dict.fromkeys(face.agents, 7)])
    with pytest.raises(AttributeError, match="pass XuanCeVecEnv\\(..., num_enemies=n\\)"):
        face.num_enemies
    face.close()


def test_football_win_counts_for_xuance_football_runner():
    pytest.importorskip("gfootball.env", reason="gfootball is not installed (bash scripts/install/install_football.sh)")
    from marl_vec.envs.registry import make_env_fn

    fn = make_env_fn("football", "academy_empty_goal_close", {"left_agents": 1})
    face = XuanCeVecEnv(mv.DummyVecEnv([fn], env_seed=0, reward_dtype="float64"))
    assert face.num_adversaries == 0
    for _ in range(100):  # running right from the edge of the box scores
        _, _, terminated, truncated, infos = face.step([{face.agents[0]: 5}])
        if all(terminated[0].values()) or truncated[0]:
            break
    assert infos[0]["episode"]["win"] == 1.0
    assert (face.battles_game.tolist(), face.battles_won.tolist()) == ([1], [1])
    face.close()


def test_starcraft2_battle_counts_for_xuance_sc2_runner():
    pytest.importorskip("pysc2", reason="pysc2 is installed by the sc2 extra and scripts/install/install_sc2.sh")
    from tests.families.test_starcraft2 import MAP_3V2, Games, StarCraft2Env, set_scene

    games = Games()
    face = XuanCeVecEnv(mv.DummyVecEnv([lambda: StarCraft2Env("3m", map_info=MAP_3V2, game_factory=games)],
                                       env_seed=0, reward_dtype="float64"))
    assert face.num_enemies == 2
    set_scene(games.game, t4=None, t5=None, t2=None)  # one marine dies, both zerglings die: won
    _, _, terminated, truncated, infos = face.step([dict(zip(face.agents, (6, 1, 1)))])
    assert all(terminated[0].values()) and truncated == [False]
    assert face.battles_game.tolist() == [1] and face.battles_won.tolist() == [1]
    assert face.dead_allies_count.tolist() == [1] and face.dead_enemies_count.tolist() == [2]
    face.close()

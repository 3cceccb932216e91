"""StarCraft II on pysc2: SMAC-style observations, rewards and episode ends.

The game binary cannot be installed here, so these tests drive the adapter with
pysc2's own ``mock_sc2_env.SC2TestEnv``, fed raw-unit observations built the way
the game sends them (``ResponseObservation`` protos, transformed by pysc2's
``features``). The scene: 3 marines against 2 zerglings on a 256x256 map.
Expected numbers are written out by hand from SMAC's definitions.
"""

from __future__ import annotations

import functools
import math
import os
import random
import sys

import numpy as np
import pytest

pytest.importorskip("pysc2", reason="pysc2 is installed by the sc2 extra and scripts/install/install_sc2.sh")

from marl_vec.envs.sc2_compat import import_pysc2, legacy_shuffle  # noqa: E402

import_pysc2()
from pysc2.env import environment, mock_sc2_env  # noqa: E402
from pysc2.lib import protocol  # noqa: E402
from pysc2.tests import dummy_observation  # noqa: E402
from s2clientprotocol import common_pb2  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.core.buffers import BatchBuffers  # noqa: E402
from marl_vec.envs.starcraft2 import GameNotFoundError, StarCraft2Env, make_starcraft2  # noqa: E402

MARINE, ZERGLING, ROACH, STALKER, ZEALOT = 48, 105, 110, 74, 73
# (tag, unit type, alliance 1=self 4=enemy, x, y, health, health max[, shield, shield max, weapon cooldown])
# Positions at pixel centres: the mock's 256x256 map has one raw pixel per world unit.
SCENE = [
    (1, MARINE, 1, 10.5, 10.5, 45, 45),
    (2, MARINE, 1, 12.5, 10.5, 30, 45),
    (3, MARINE, 1, 10.5, 13.5, 45, 45),
    (4, ZERGLING, 4, 14.5, 10.5, 35, 35),
    (5, ZERGLING, 4, 30.5, 30.5, 35, 35),
]
MAP_3V2 = {"n_enemies": 2, "enemy_types": ("zergling",), "enemy_race": "zerg"}
MAX_REWARD = 2 * 10 + 200 + 2 * 35  # SMAC: kills + win + enemy health


class ScriptedGame(mock_sc2_env.SC2TestEnv):
    """pysc2's mock game whose next observation is ``self.scene``; records what it is sent."""

    def __init__(self, scene: list, crash_at: int | None = None, crash: type[Exception] = protocol.ConnectionError, **kwargs):
        super().__init__(**kwargs)
        self.episode_length = float("inf")
        self.scene = self.initial_scene = list(scene)
        self.score = 0.0
        self.last = False
        self.crash_at, self.crash = crash_at, crash
        self.sent: list = []
        self.steps = 0
        self.closed = False

    def _timestep(self) -> environment.TimeStep:
        resp = dummy_observation.Builder(self.observation_spec()[0]).game_loop(0).build()
        for tag, unit_type, alliance, x, y, hp, hp_max, *extra in self.scene:
            shield, shield_max, cooldown = (list(extra) + [0, 0, 0])[:3]
            resp.observation.raw_data.units.add(
                tag=tag, unit_type=unit_type, alliance=alliance, owner=1 if alliance == 1 else 2,
                pos=common_pb2.Point(x=x, y=y, z=0), radius=0.375, health=hp, health_max=hp_max,
                shield=shield, shield_max=shield_max, weapon_cooldown=cooldown, is_on_screen=True, display_type=1)
        obs = self._features[0].transform_obs(resp)
        self.observation = obs
        step_type = environment.StepType.LAST if self.last else environment.StepType.MID
        return environment.TimeStep(step_type, self.score, 1.0, obs)

    def reset(self):
        self.scene, self.last = self.initial_scene, False  # a new episode starts from the map's units
        self.next_timestep = [self._timestep()]
        self._episode_steps = 0
        return mock_sc2_env.SC2TestEnv.step(self, [None])  # a FIRST timestep, as the mock's own reset

    def step(self, actions, step_mul=None):
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            raise self.crash("Connection already closed. SC2 probably crashed or hung.")
        # What the real SC2Env would send to the game: pysc2's own transform.
        self.sent.append([self._features[0].transform_action(self.observation, a, skip_available=True)
                          for a in actions[0]])
        self.next_timestep = [self._timestep()]
        return super().step(actions, step_mul)

    def close(self):
        self.closed = True


class Games:
    """A game_factory that records every launch (its kwargs and the game)."""

    def __init__(self, scene: list = SCENE, **game_kwargs):
        self.scene, self.game_kwargs = scene, game_kwargs
        self.launched: list[tuple[dict, ScriptedGame]] = []

    def __call__(self, **kwargs) -> ScriptedGame:
        game = ScriptedGame(self.scene, **self.game_kwargs, **kwargs)
        self.launched.append((kwargs, game))
        self.game_kwargs.pop("crash_at", None)  # only the first game crashes
        return game

    @property
    def game(self) -> ScriptedGame:
        return self.launched[-1][1]


def make_env(games: Games | None = None, map_name: str = "3m", map_info: dict | None = MAP_3V2, **kwargs):
    games = games or Games()
    env = StarCraft2Env(map_name, map_info=map_info, game_factory=games, **kwargs)
    buffers = BatchBuffers(env.spec, 1)
    env.bind(buffers.row(0))
    return env, buffers.row(0), games


def set_scene(game: ScriptedGame, **changes: tuple | None) -> None:
    """Replace units by tag: ``set_scene(g, t4=(hp,))`` sets health; ``t4=None`` removes the unit."""
    scene = []
    for unit in game.scene:
        key = f"t{unit[0]}"
        if key in changes:
            if changes[key] is None:
                continue
            unit = unit[:5] + tuple(changes[key]) + unit[5 + len(changes[key]):]
        scene.append(unit)
    game.scene = scene


# -- the pysc2 import shim -----------------------------------------------------


def test_sc2_shim_leaves_random_shuffle_alone():
    from pysc2.lib import colors

    assert random.shuffle.__module__ == "random"  # nobody else's shuffle changed
    x = list(range(10))
    with pytest.raises(TypeError):
        random.shuffle(x, lambda: 0.5)  # Python 3.11 still rejects the old form for everyone else
    assert colors.shuffled_hue(6).shape == (6, 3)  # pysc2's own call works


def test_sc2_legacy_shuffle_is_python310s_algorithm():
    x = [0, 1, 2, 3, 4]
    legacy_shuffle(x, lambda: 0.5)
    # i=4: j=2 -> [0,1,4,3,2]; i=3: j=2 -> [0,1,3,4,2]; i=2: j=1 -> [0,3,1,4,2]; i=1: j=1.
    assert x == [0, 3, 1, 4, 2]


# -- spec ------------------------------------------------------------------------


@pytest.mark.parametrize("map_name, obs, state, n_actions, limit", [
    # SMAC's get_env_info() values for these maps.
    ("3m", 30, 48, 9, 60),
    ("8m", 80, 168, 14, 120),
    ("2s3z", 80, 120, 11, 120),
    ("3s5z", 128, 216, 14, 150),
    ("5m_vs_6m", 55, 98, 12, 70),
])
def test_sc2_spec_matches_smac(map_name, obs, state, n_actions, limit):
    env = StarCraft2Env(map_name, game_factory=Games())
    assert env.spec.env_info() == {"n_agents": env.n_agents, "obs_shape": obs, "state_shape": state,
                                   "n_actions": n_actions, "episode_limit": limit}
    assert env.spec.stats == ("battle_won", "dead_allies", "dead_enemies")


def test_sc2_unknown_map_and_bad_arguments_name_what_is_allowed():
    with pytest.raises(ValueError, match=r"unknown StarCraft II map 'Nope'; known: 3m, 8m"):
        StarCraft2Env("Nope", game_factory=Games())
    with pytest.raises(ValueError, match="unknown unit type 'tank'; allowed: marine"):
        StarCraft2Env("3m", map_info={"ally_types": ("tank",)}, game_factory=Games())
    with pytest.raises(ValueError, match="reward must be 'smac' or 'game', got 'score'"):
        StarCraft2Env("3m", reward="score", game_factory=Games())
    with pytest.raises(ValueError, match="difficulty must be one of 1, 2"):
        StarCraft2Env("3m", difficulty="11", game_factory=Games())


# -- reset: observation, state, available actions ----------------------------------


def test_starcraft_reset_writes_smac_observation_state_and_avail():
    env, row, games = make_env()
    env.reset(seed=3)
    kwargs = games.launched[0][0]
    assert kwargs["random_seed"] == 3 and kwargs["map_name"] == "3m"
    assert [p.race for p in kwargs["players"]][1:] and len(kwargs["players"]) == 2  # agent + built-in bot
    # Agents in SMAC's order (type, x, y): tag 1 (10.5, 10.5), tag 3 (10.5, 13.5), tag 2 (12.5, 10.5).
    assert env.allies.tag.tolist() == [1, 3, 2]
    s = 9.0  # sight range
    #        move NSEW    enemy 0 (attackable,dist,dx,dy,hp)  enemy 1   ally a       ally b                     own hp
    expected_obs = np.array([
        [1, 1, 1, 1, 1, 4 / s, 4 / s, 0, 1, 0, 0, 0, 0, 0, 1, 3 / s, 0, 3 / s, 1, 1, 2 / s, 2 / s, 0, 30 / 45, 1],
        [1, 1, 1, 1, 1, 5 / s, 4 / s, -3 / s, 1, 0, 0, 0, 0, 0, 1, 3 / s, 0, -3 / s, 1,
         1, math.hypot(2, 3) / s, 2 / s, -3 / s, 30 / 45, 1],
        [1, 1, 1, 1, 1, 2 / s, 2 / s, 0, 1, 0, 0, 0, 0, 0, 1, 2 / s, -2 / s, 0, 1,
         1, math.hypot(2, 3) / s, -2 / s, 3 / s, 1, 30 / 45],
    ], dtype=np.float32)
    np.testing.assert_array_equal(row.obs, expected_obs)
    c, size = 128.0, 256.0  # map centre and size
    expected_state = np.zeros(42, np.float32)
    expected_state[:24] = [
        1, 0, (10.5 - c) / size, (10.5 - c) / size,   # ally tag 1: health, cooldown, x, y
        1, 0, (10.5 - c) / size, (13.5 - c) / size,   # ally tag 3
        30 / 45, 0, (12.5 - c) / size, (10.5 - c) / size,  # ally tag 2
        1, (14.5 - c) / size, (10.5 - c) / size,      # zergling tag 4
        1, (30.5 - c) / size, (30.5 - c) / size,      # zergling tag 5
        0, 0, 0, 0, 0, 0,                         # last actions (none yet), 3 agents x 8
    ]
    np.testing.assert_array_equal(row.state, expected_state)
    # no-op never for the living; stop and moves yes; attack only zergling 4 (in range 6).
    np.testing.assert_array_equal(row.avail_actions.astype(int), [[0, 1, 1, 1, 1, 1, 1, 0]] * 3)
    assert row.agent_mask.tolist() == [True, True, True]


def test_starcraft_shields_and_unit_types_in_obs_and_state():
    # 2s3z's features (shields on both sides, stalker/zealot one-hot) on a smaller scene.
    scene = [
        (1, STALKER, 1, 10.5, 10.5, 40, 80, 20, 80, 7),
        (2, ZEALOT, 1, 12.5, 10.5, 100, 100, 50, 50),
        (3, ZEALOT, 4, 10.5, 14.5, 50, 100, 25, 50),
    ]
    env, row, _ = make_env(Games(scene), map_name="2s3z", map_info={"n_agents": 2, "n_enemies": 1})
    env.reset()
    s, r20 = 9.0, math.sqrt(20)
    # Agents by (type, x, y): zealot (type 73) first, then the stalker. Type one-hot: [stalker, zealot].
    expected_obs = np.array([
        # moves       enemy: attackable, dist, dx, dy, hp, shield, type    ally: visible, dist, dx, dy, hp, shield, type   own
        [1, 1, 1, 1, 1, r20 / s, -2 / s, 4 / s, 0.5, 0.5, 0, 1, 1, 2 / s, -2 / s, 0, 0.5, 0.25, 1, 0, 1, 1, 0, 1],
        [1, 1, 1, 1, 1, 4 / s, 0, 4 / s, 0.5, 0.5, 0, 1, 1, 2 / s, 2 / s, 0, 1, 1, 0, 1, 0.5, 0.25, 1, 0],
    ], dtype=np.float32)
    np.testing.assert_array_equal(row.obs, expected_obs)
    c = (np.array([10.5, 12.5, 14.5]) - 128) / 256
    expected_state = np.zeros(34, np.float32)
    expected_state[:20] = [
        1, 0, c[1], c[0], 1, 0, 1,            # zealot: health, cooldown, x, y, shield, type
        0.5, 7 / 35, c[0], c[0], 0.25, 1, 0,  # stalker (cooldown 7 of SMAC's 35)
        0.5, c[0], c[2], 0.5, 0, 1,           # enemy zealot: health, x, y, shield, type
    ]
    np.testing.assert_array_equal(row.state, expected_state)


def test_starcraft_move_feasibility_stops_at_the_map_edge():
    scene = [(1, MARINE, 1, 0.5, 255.5, 45, 45), (4, ZERGLING, 4, 20.5, 20.5, 35, 35), (5, ZERGLING, 4, 30.5, 30.5, 35, 35)]
    env, row, _ = make_env(Games(scene), map_info={**MAP_3V2, "n_agents": 1})
    env.reset()
    # Half a unit from the top-left corner: a move of 2 north or west leaves the map (SMAC checks half of it).
    np.testing.assert_array_equal(row.avail_actions[0].astype(int), [0, 1, 0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(row.obs[0][:4], [0, 1, 1, 0])


# -- actions --------------------------------------------------------------------------


def test_starcraft_actions_reach_the_game_as_raw_commands():
    env, row, games = make_env()
    env.reset()
    env.step(np.array([6, 2, 1]))  # tag 1 attacks zergling 0; tag 3 moves north; tag 2 stops
    attack, move, stop = [c.action_raw.unit_command for c in games.game.sent[0]]
    assert (attack.ability_id, list(attack.unit_tags), attack.target_unit_tag) == (3674, [1], 4)  # Attack_unit
    assert (move.ability_id, list(move.unit_tags)) == (3794, [3])  # Move_pt
    assert (move.target_world_space_pos.x, move.target_world_space_pos.y) == (10.5, 15.5)  # 2 units north
    assert (stop.ability_id, list(stop.unit_tags)) == (3665, [2])  # Stop_quick
    env.step(np.array([3, 4, 5]))  # south, east, west
    south, east, west = [c.action_raw.unit_command.target_world_space_pos for c in games.game.sent[1]]
    assert [(p.x, p.y) for p in (south, east, west)] == [(10.5, 8.5), (12.5, 13.5), (10.5, 10.5)]
    np.testing.assert_array_equal(env.last_action.argmax(1), [3, 4, 5])
    np.testing.assert_array_equal(row.state[-24:].reshape(3, 8).argmax(1), [3, 4, 5])  # state_last_action


# -- reward ----------------------------------------------------------------------------------


def test_starcraft_reward_for_damage_and_kills():
    env, row, games = make_env()
    env.reset()
    set_scene(games.game, t4=(25,))  # zergling 4 loses 10 health
    info = env.step(np.array([6, 6, 6]))
    assert info == {}
    np.testing.assert_array_equal(row.reward, np.full(3, 10 / MAX_REWARD * 20, np.float32))
    assert not row.terminated.any() and not row.truncated.any()
    set_scene(games.game, t4=None, t2=(20,))  # zergling 4 killed (gone); marine 2 hit (no penalty by default)
    env.step(np.array([6, 6, 6]))
    np.testing.assert_array_equal(row.reward, np.full(3, (25 + 10) / MAX_REWARD * 20, np.float32))
    # The dead zergling: not attackable, zeros in obs and state.
    assert not row.avail_actions[:, 6].any()
    np.testing.assert_array_equal(row.obs[:, 4:9], 0)
    np.testing.assert_array_equal(row.state[12:15], 0)


def test_starcraft_negative_reward_when_asked():
    env, row, games = make_env(reward_only_positive=False, reward_scale=False)
    env.reset()
    set_scene(games.game, t4=(25,), t1=None)  # 10 dealt; marine 1 (45 health) killed
    env.step(np.array([1, 1, 1]))
    # SMAC: dealt - 0.5 * taken - 0.5 * 10 per own death
    np.testing.assert_array_equal(row.reward, np.full(3, 10 - 0.5 * 45 - 0.5 * 10, np.float32))


# -- an agent dying; the win ---------------------------------------------------------------


def test_starcraft_dead_agent_is_masked_and_may_only_noop():
    env, row, games = make_env()
    env.reset()
    set_scene(games.game, t3=None)  # agent 1 (tag 3) dies
    env.step(np.array([1, 1, 1]))
    assert row.agent_mask.tolist() == [True, False, True]
    np.testing.assert_array_equal(row.obs[1], 0)
    np.testing.assert_array_equal(row.avail_actions[1].astype(int), [1, 0, 0, 0, 0, 0, 0, 0])
    assert row.terminated.tolist() == [False, True, False] and not row.truncated.any()
    np.testing.assert_array_equal(row.obs[0][14:19], 0)  # agent 0 no longer sees it
    env.step(np.array([1, 4, 1]))  # the dead agent's action is ignored
    assert len(games.game.sent[1]) == 2
    assert env.last_action.argmax(1).tolist() == [1, 0, 1]  # and recorded as no-op


def test_starcraft_optional_last_action_and_agent_id_features():
    env, row, _ = make_env(obs_last_action=True, obs_agent_id=True)
    assert env.spec.obs_shape == (4 + 2 * 5 + 2 * (5 + 8) + (1 + 3 + 8),)
    env.reset()
    env.step(np.array([6, 2, 1]))
    onehot = np.eye(8, dtype=np.float32)
    ally = row.obs[0, 14:40].reshape(2, 13)  # agent 0 sees agents 1 and 2
    np.testing.assert_array_equal(ally[:, 5:], onehot[[2, 1]])
    own = row.obs[0, 40:]
    np.testing.assert_array_equal(own, np.concatenate([[1], [1, 0, 0], onehot[6]]))
    np.testing.assert_array_equal(row.obs[2, 40:], np.concatenate([[30 / 45], [0, 0, 1], onehot[1]]).astype(np.float32))


def test_starcraft_win_ends_the_episode_terminated_with_stats():
    games = Games()
    with mv.DummyVecEnv([lambda: StarCraft2Env("3m", map_info=MAP_3V2, game_factory=games)], env_seed=0) as venv:
        venv.reset()
        set_scene(games.game, t4=None, t5=None, t2=None)
        r = venv.step(np.array([[6, 1, 1]]))
    assert r.done.tolist() == [True]
    assert r.terminated.tolist() == [[True, True, True]] and not r.truncated.any()
    reward = (35 + 35 + 2 * 10 + 200) / MAX_REWARD * 20
    np.testing.assert_array_equal(r.reward, np.full((1, 3), reward, np.float32))
    info = r.infos[0]
    assert (info["battle_won"], info["dead_allies"], info["dead_enemies"]) == (True, 1, 2)
    episode = info["episode"]
    assert (episode["battle_won"], episode["dead_allies"], episode["dead_enemies"], episode["length"]) == (1.0, 1.0, 2.0, 1)
    # same_step: the final observation is the battle's last one; the reset one is fresh.
    assert not r.final_obs[0, 2].any() and r.final_avail_actions[0, 2].tolist() == [True] + [False] * 7
    assert r.final_obs[0, 0].any() and r.agent_mask.tolist() == [[True, True, True]]


def test_starcraft_loss_is_terminated_without_a_win():
    env, row, games = make_env()
    env.reset()
    set_scene(games.game, t1=None, t2=None, t3=None)
    info = env.step(np.array([1, 1, 1]))
    assert row.terminated.all() and not row.truncated.any()
    assert (info["battle_won"], info["dead_allies"], info["dead_enemies"]) == (False, 3, 0)


# -- time limits ---------------------------------------------------------------------------------


def test_starcraft_episode_limit_is_truncation():
    games = Games()
    fn = lambda: StarCraft2Env("3m", map_info={**MAP_3V2, "episode_limit": 3}, game_factory=games)  # noqa: E731
    with mv.DummyVecEnv([fn], env_seed=0) as venv:
        venv.reset()
        assert venv.spec.episode_limit == 3
        set_scene(games.game, t3=None)
        dones = [venv.step(np.array([[1, 1, 1]])) for _ in range(3)]  # a dead agent's action is ignored
    assert [r.done[0] for r in dones] == [False, False, True]
    last = dones[-1]
    # The dead agent stays terminated; the live ones are cut by the time limit.
    assert last.terminated.tolist() == [[False, True, False]]
    assert last.truncated.tolist() == [[True, False, True]]
    assert last.infos[0]["episode_limit"] is True and last.infos[0]["battle_won"] is False
    assert last.infos[0]["episode"]["length"] == 3


def test_starcraft_minigame_uses_the_map_score_and_its_timer_truncates():
    scene = [(1, MARINE, 1, 10.5, 10.5, 45, 45), (2, ROACH, 4, 15.5, 10.5, 145, 145)]
    games = Games(scene)
    env = StarCraft2Env("DefeatRoaches", game_factory=games)
    buffers = BatchBuffers(env.spec, 1)
    env.bind(buffers.row(0))
    row = buffers.row(0)
    env.reset()
    kwargs = games.launched[0][0]
    assert len(kwargs["players"]) == 1 and kwargs["map_name"] == "DefeatRoaches"
    assert env.spec.n_agents == 9 and row.agent_mask.tolist() == [True] + [False] * 8
    assert row.obs[0][4 + 0 * 7 + 5:4 + 0 * 7 + 7].tolist() == [0, 1]  # roach one-hot (types: marine, roach)
    games.game.score = 10.0
    env.step(np.zeros(9, np.int64) + np.array([1] + [0] * 8))
    assert row.reward[0] == 10.0
    games.game.last = True
    info = env.step(np.array([1] + [0] * 8))
    assert row.truncated[0] and not row.terminated[0] and info["episode_limit"] is True


# -- seeds, crashes, the missing game ----------------------------------------------------------------


def test_sc2_seeds_go_to_the_game():
    games = [Games(), Games()]
    fns = [lambda g=g: StarCraft2Env("3m", map_info=MAP_3V2, game_factory=g) for g in games]
    with mv.DummyVecEnv(fns, env_seed=7) as venv:
        venv.reset()
        venv.reset(seed=100)
        venv.reset()  # no seed: same game, same seed
    assert [[k["random_seed"] for k, _ in g.launched] for g in games] == [[7, 100], [8, 101]]
    assert all(g.launched[0][1].closed for g in games)  # the game of the old seed was closed


@pytest.mark.parametrize("crash", [protocol.ConnectionError, protocol.ProtocolError, ConnectionResetError])
def test_starcraft_crashed_game_is_restarted_and_truncated(crash):
    games = Games(crash_at=2, crash=crash)
    fn = lambda: StarCraft2Env("3m", map_info=MAP_3V2, game_factory=games)  # noqa: E731
    with mv.DummyVecEnv([fn], env_seed=5) as venv:
        first = venv.reset()
        venv.step(np.array([[1, 1, 1]]))
        r = venv.step(np.array([[1, 1, 1]]))  # the game dies here
        assert r.done.tolist() == [True]
        assert r.truncated.tolist() == [[True, True, True]] and not r.terminated.any()
        assert r.infos[0]["restarted"] is True and crash.__name__ in r.infos[0]["error"]
        assert r.reward.tolist() == [[0, 0, 0]]
        np.testing.assert_array_equal(r.final_obs, first.obs)  # the last observation we had
        assert len(games.launched) == 2 and games.launched[0][1].closed
        assert games.launched[1][0]["random_seed"] == 5
        r = venv.step(np.array([[1, 1, 1]]))  # the new game plays on
        assert not r.done.any()
        np.testing.assert_array_equal(r.obs, first.obs)


def test_starcraft_crashing_past_max_restarts_raises():
    games = Games(crash_at=1)
    env, _, _ = make_env(games, max_restarts=0)
    env.reset()
    with pytest.raises(RuntimeError, match=r"StarCraft II crashed again \(ConnectionError: Connection already closed"):
        env.step(np.array([1, 1, 1]))


def test_sc2_without_the_game_names_sc2path(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    with pytest.raises(GameNotFoundError, match=rf"no StarCraft II game at {tmp_path} \(SC2PATH\).*set SC2PATH"):
        make_starcraft2("3m")
    (tmp_path / "Versions" / "Base75689").mkdir(parents=True)  # an installed game version, as the game lays it out
    with pytest.raises(GameNotFoundError, match=r"map 'DefeatRoaches' not found: no file .*Maps/mini_games/DefeatRoaches.SC2Map"):
        mv.envs.registry.make_env("starcraft2", "DefeatRoaches")


@pytest.mark.parametrize("name, n_agents", [("defeat_roaches", 9), ("3m", 3), ("8m", 8)])
def test_sc2_configs_load_and_need_the_game(name, n_agents, tmp_path, monkeypatch):
    from marl_vec.tools.config import load_config, make

    cfg = load_config(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "sc2", f"{name}.yaml"))
    assert cfg.env.family == "starcraft2"
    assert StarCraft2Env(cfg.env.id, game_factory=Games(), **cfg.env.kwargs).spec.n_agents == n_agents
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    # The configs use the subproc backend: the worker's error reaches us with its message.
    with pytest.raises(Exception, match=r"no StarCraft II game at .* \(SC2PATH\)"):
        make(cfg.model_dump(by_alias=True), num_envs=1)


def _game_installed() -> bool:
    from marl_vec.envs.starcraft2 import sc2_path

    return os.path.isdir(os.path.join(sc2_path(), "Versions"))


@pytest.mark.skipif(not _game_installed(), reason="StarCraft II is not installed (SC2PATH has no Versions folder); "
                    "the game cannot be downloaded on this machine")
def test_sc2_real_game_3m():
    # Needs SC2PATH with the game and SMAC_Maps/3m.SC2Map. Every live agent attacks
    # the last enemy in range, else moves east; 3m ends within its 60-step limit.
    with mv.DummyVecEnv([lambda: make_starcraft2("3m")], env_seed=0) as venv:
        r = venv.reset()
        assert r.agent_mask.all() and r.avail_actions[0, :, 1].all() and not r.avail_actions[0, :, 0].any()
        for _ in range(61):
            actions = np.array([[np.flatnonzero(a)[-1] if a[6:].any() else (4 if a[4] else 1) for a in r.avail_actions[0]]])
            r = venv.step(actions)
            if r.done[0]:
                break
        assert r.done[0]
        episode = r.infos[0]["episode"]
        assert set(episode) >= {"battle_won", "dead_allies", "dead_enemies"} and episode["length"] <= 60


def test_sc2_missing_pysc2_names_the_extra(monkeypatch):
    from marl_vec.envs.registry import MissingExtraError

    monkeypatch.setitem(sys.modules, "pysc2", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"pysc2 is needed for StarCraft II.*install_sc2.sh.*marl_vec\[sc2\]"):
        import_pysc2()


def test_sc2_subproc_matches_dummy():
    fn = functools.partial(StarCraft2Env, "3m", map_info=MAP_3V2, game_factory=Games())
    actions = np.array([[6, 2, 1], [1, 3, 4]])
    results = []
    for backend in ("dummy", "subproc"):
        with mv.make_vec([fn, fn], backend=backend, env_seed=0) as venv:
            rs = [venv.reset()] + [venv.step(actions) for _ in range(3)]
            results.append([(r.obs, r.state, r.avail_actions, r.reward) for r in rs])
    for dummy, sub in zip(*results):
        for a, b in zip(dummy, sub):
            np.testing.assert_array_equal(a, b)


def test_pysc2_flags_have_their_defaults_outside_absl_app(tmp_path, monkeypatch):
    """Launching the game reads pysc2's absl flags; outside ``absl.app.run`` that raised
    UnparsedFlagAccessError before the game was even looked for. In a fresh process
    (absl's FLAGS are global), pysc2's run config is found through its defaults."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "Versions" / "Base75689").mkdir(parents=True)  # an installed game version, as the game lays it out
    code = textwrap.dedent("""
        from marl_vec.envs.starcraft2.pysc2_shim import import_pysc2
        import_pysc2("pysc2.env.sc2_env")
        from pysc2 import run_configs
        config = run_configs.get()
        print(type(config).__name__, config.data_dir)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "SC2PATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Linux", str(tmp_path)]

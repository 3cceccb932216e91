"""The opponent seat's seeds and errors: the default random opponent is reseeded by a
seeded reset (the seat's ``reset(seed=...)``, SB3's ``seed()``, gymnasium's
``reset(seed=...)``), env by env, so the same seeds give the same games; an opponent
(or env) that raises mid-step leaves no env where the learner is not to move unnoticed:
the error names the envs, the next step says which envs to reset, and a reset makes
the seat whole again."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat.opponent import OpponentSeat, RandomLegal
from marl_vec.envs.registry import make_env_fn
from tests.helpers.backends import make
from tests.helpers.toll_game import ILLEGAL, plain_return, toll_game

warnings.filterwarnings("ignore", category=DeprecationWarning, module="pettingzoo")

BACKENDS = ("dummy", "subproc")
CONNECT_FOUR = "pettingzoo.classic.connect_four_v3"


def connect_four(num_envs: int, backend: str = "dummy") -> mv.VecEnv:
    return make(backend, [make_env_fn("pettingzoo", CONNECT_FOUR)] * num_envs, env_seed=0)


def learner_moves(avail: np.ndarray) -> np.ndarray:
    """The learner's lowest legal move in each env (avail: (E, n))."""
    return avail.argmax(axis=1)


def seat_games(seat: OpponentSeat, seed: int | None, steps: int = 30) -> np.ndarray:
    """The learner's observations over ``steps`` steps after ``reset(seed=seed)``: (steps + 1, E, ...)."""
    r = seat.reset(seed=seed)
    seen = [r.obs[:, 0]]
    for _ in range(steps):
        r = seat.step(learner_moves(r.avail_actions[:, 0]))
        seen.append(r.obs[:, 0])
    return np.stack(seen)


# -- the same seeds give the same games ------------------------------------------------

def test_a_seeded_reset_reseeds_the_default_opponent():
    seat = OpponentSeat(connect_four(2), seat="player_1")  # the opponent opens: its first move shows at reset
    assert isinstance(seat.opponent, RandomLegal)
    first = seat_games(seat, seed=3)
    np.testing.assert_array_equal(seat_games(seat, seed=3), first)
    other = seat_games(seat, seed=11)
    assert not np.array_equal(other, first)
    # A fresh seat, another backend: the same games.
    fresh = OpponentSeat(connect_four(2, "subproc"), seat="player_1")
    np.testing.assert_array_equal(seat_games(fresh, seed=3), first)
    fresh.close()
    seat.close()


def test_env_i_plays_the_games_of_its_seed_whatever_its_index():
    a = OpponentSeat(connect_four(2), seat="player_1")
    b = OpponentSeat(connect_four(1), seat="player_1")
    games_a = seat_games(a, seed=5)  # env 1: seed 6
    games_b = seat_games(b, seed=6)  # env 0: seed 6
    np.testing.assert_array_equal(games_a[:, 1], games_b[:, 0])
    assert not np.array_equal(games_a[:, 0], games_a[:, 1])
    # A partial seeded reset reseeds only the envs it resets.
    a.reset(seed=5)
    r = a.reset(seed=5, env_ids=[1])  # env 1 again from seed 6; env 0 goes on
    np.testing.assert_array_equal(r.obs[1, 0], games_b[0, 0])
    a.close()
    b.close()


def test_unseeded_resets_go_on_and_a_fresh_opponent_starts_from_its_seed():
    seat = OpponentSeat(connect_four(2), seat="player_1")
    again = OpponentSeat(connect_four(2), seat="player_1", opponent=RandomLegal(0))
    np.testing.assert_array_equal(seat_games(seat, seed=None), seat_games(again, seed=None))
    np.testing.assert_array_equal(seat_games(seat, seed=None), seat_games(again, seed=None))
    seat.close()
    again.close()


def test_sb3_seed_then_reset_replays_the_same_games():
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import SB3VecEnv

    def play(env: SB3VecEnv, seed: int) -> np.ndarray:
        env.seed(seed)
        seen = [env.reset()]
        for _ in range(30):
            masks = np.stack(env.env_method("action_masks"))
            seen.append(env.step(learner_moves(masks))[0])
        return np.stack(seen)

    env = SB3VecEnv(connect_four(2), seat="player_1")
    first = play(env, 7)
    np.testing.assert_array_equal(play(env, 7), first)
    assert not np.array_equal(play(env, 8), first)
    env.close()


def test_gym_reset_with_a_seed_replays_the_same_games():
    from marl_vec.compat import GymVectorEnv

    def play(envs: GymVectorEnv, seed) -> np.ndarray:
        obs, _ = envs.reset(seed=seed)
        seen = [obs]
        for _ in range(30):
            masks = np.stack(envs.call("action_masks"))
            seen.append(envs.step(learner_moves(masks))[0])
        return np.stack(seen)

    envs = GymVectorEnv(connect_four(2), seat="player_1")
    first = play(envs, 7)
    np.testing.assert_array_equal(play(envs, 7), first)
    np.testing.assert_array_equal(play(envs, [7, 8]), first)  # per-env seeds: env i with seed + i
    envs.close()


def test_gym_per_env_seeds_of_several_offsets_on_a_fresh_batch_play_each_envs_seed():
    # The batch resets per offset (seed 5 for env 0, seed 8 for env 1); the openings wait
    # until both are reset (they step the whole batch, env 1 included).
    from marl_vec.compat import GymVectorEnv

    envs = GymVectorEnv(connect_four(2), seat="player_1")
    obs, _ = envs.reset(seed=[5, 9])
    seen = [obs]
    for _ in range(30):
        seen.append(envs.step(learner_moves(np.stack(envs.call("action_masks"))))[0])
    envs.close()
    alone = [OpponentSeat(connect_four(1), seat="player_1") for _ in range(2)]
    for k, seed in enumerate((5, 9)):
        np.testing.assert_array_equal(np.stack(seen)[:, k], seat_games(alone[k], seed=seed)[:, 0])
        alone[k].close()


class Recording:
    """An opponent with the seat's two hooks: it records its reseeds and the envs it plays."""

    def __init__(self):
        self.reseeds: list[tuple[list[int], list[int]]] = []
        self.played: list[list[int]] = []

    def reseed(self, env_ids, seeds):
        self.reseeds.append((list(env_ids), list(seeds)))

    def play(self, env_ids, obs, avail):
        self.played.append(list(env_ids))
        return avail.argmax(axis=1)


def test_an_opponent_with_reseed_and_play_is_seeded_as_the_envs_and_told_the_envs():
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import GymVectorEnv, SB3VecEnv

    opponent = Recording()
    env = SB3VecEnv(mv.make_vec([toll_game] * 3), opponent=opponent, seat="player_1")
    env.seed(4)
    env.reset()
    assert opponent.reseeds == [([0, 1, 2], [4, 5, 6])] and opponent.played == [[0, 1, 2]]
    env.reset()  # unseeded: no reseed
    assert len(opponent.reseeds) == 1
    env.close()
    opponent = Recording()
    envs = GymVectorEnv(mv.make_vec([toll_game] * 3), opponent=opponent, seat="player_1")
    _, infos = envs.reset(seed=[4, 9, None])  # two offsets: the batch's reset(seed=4) and reset(seed=8)
    assert opponent.reseeds == [([0, 1], [4, 9])] and opponent.played == [[0, 1, 2]]
    assert infos["agents"]["player_0"]["phase"].tolist() == ["reset"] * 3
    opponent.played.clear()
    envs.reset(options={"reset_mask": np.array([False, True, False])})
    assert opponent.played == [[1]]
    envs.close()


# -- an opponent that raises -----------------------------------------------------------

class Crashing:
    """The lowest legal move, until its ``crash_at``-th call raises."""

    def __init__(self, crash_at: int):
        self.calls, self.crash_at = 0, crash_at

    def __call__(self, obs, avail):
        self.calls += 1
        if self.calls == self.crash_at:
            raise RuntimeError("the opponent's policy crashed")
        return avail.argmax(axis=1)


def assert_whole_games(seat: OpponentSeat, games: int = 2) -> None:
    """After a reset, every env's games give the plain loop's return and length."""
    game_return, game_moves = plain_return("player_1")
    for _ in range(games):
        total = np.zeros(seat.num_envs)
        for _ in range(game_moves):
            r = seat.step(np.zeros(seat.num_envs, np.int64))
            total += r.reward[:, 0]
        assert r.done.all() and total.tolist() == [game_return] * seat.num_envs
        assert [info["episode"]["length"] for info in r.infos] == [game_moves] * seat.num_envs


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_opponent_that_raises_mid_step_names_the_envs_and_the_seat_asks_for_a_reset(backend):
    seat = OpponentSeat(make(backend, [toll_game] * 2, env_seed=0), opponent=Crashing(crash_at=2),
                        seat="player_1")
    seat.reset()  # call 1: the openings
    with pytest.raises(RuntimeError, match="the opponent's policy crashed") as caught:
        seat.step(np.zeros(2, np.int64))  # the learner's moves are played, the answers are not
    if sys.version_info >= (3, 11):  # exceptions carry notes
        assert any("raised while the opponent moved in env(s) [0, 1]" in note for note in caught.value.__notes__)
    for _ in range(2):  # the learner is not to move where it last saw the games: refused, every time
        with pytest.raises(RuntimeError, match=r"OpponentSeat: env\(s\) \[0, 1\] must be reset before the next step: "
                                               r"RuntimeError while the opponent moved in env\(s\) \[0, 1\] cut "
                                               r"the learner's step short"):
            seat.step(np.zeros(2, np.int64))
    seat.reset()
    assert_whole_games(seat)
    seat.close()


def test_an_opponent_that_raises_in_a_partial_reset_leaves_the_other_envs_playing():
    seat = OpponentSeat(mv.make_vec([toll_game] * 2, env_seed=0), opponent=Crashing(crash_at=3), seat="player_1")
    seat.reset()  # call 1
    r = seat.step(np.zeros(2, np.int64))  # call 2: 3 of the game's 4 moves played
    assert r.reward[:, 0].tolist() == [-2.0, -2.0]  # the opening's -1 and the answer's
    with pytest.raises(RuntimeError, match="crashed"):
        seat.reset(env_ids=[1])  # call 3 raises: env 1 waits for a reset, env 0 is as it was
    with pytest.raises(RuntimeError, match=r"env\(s\) \[1\] must be reset .* cut the reset short"):
        seat.step(np.zeros(2, np.int64))
    seat.reset(env_ids=np.array([False, True]))
    r = seat.step(np.zeros(2, np.int64))  # env 0 ends its game; env 1 makes its first move of a new one
    assert r.done.tolist() == [True, False] and r.reward[:, 0].tolist() == [0.0, -2.0]
    assert r.infos[0]["episode"]["length"] == 2 and r.infos[0]["episode"]["return"] == -2.0
    seat.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_env_that_raises_in_the_learners_step_makes_the_seat_ask_for_a_reset(backend):
    # With validation off (as GymVectorEnv sets it) the illegal move reaches the game, which raises.
    seat = OpponentSeat(make(backend, [toll_game] * 2, env_seed=0), opponent=lambda o, a: a.argmax(1),
                        seat="player_1")
    seat.validate = False
    seat.reset()
    with pytest.raises(Exception, match="toll_v0: move 2 is illegal for player_1"):
        seat.step(np.array([0, ILLEGAL]))  # env 0's move may be played before env 1 raises
    with pytest.raises(RuntimeError, match=r"env\(s\) \[0, 1\] must be reset .* from the batch cut the learner's "
                                           r"step short"):
        seat.step(np.zeros(2, np.int64))
    seat.reset()
    assert_whole_games(seat)
    seat.close()


def test_a_bad_seed_is_refused_and_changes_nothing():
    seat = OpponentSeat(mv.make_vec([toll_game] * 2, env_seed=0), opponent=lambda o, a: a.argmax(1),
                        seat="player_1")
    seat.reset()
    r = seat.step(np.zeros(2, np.int64))  # 3 of the game's 4 moves played
    for bad in (1.5, [1, "x"], [1]):
        with pytest.raises(ValueError, match=r"OpponentSeat.reset: seed must be None, an int, or one int \(or None\) "
                                             r"per reset env \(2 envs\), got"):
            seat.reset(seed=bad)
    r = seat.step(np.zeros(2, np.int64))  # the games went on: the learner's last move ends them
    assert r.done.all() and [info["episode"]["length"] for info in r.infos] == [2, 2]
    seat.close()

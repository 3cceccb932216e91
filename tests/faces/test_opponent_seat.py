"""The opponent seat (marl_vec/compat/opponent.py) keeps the batch's rules: a refused
step changes nothing (the rewards sum to a plain ``agent_iter`` loop's return and the
length counts only moves played), env_ids and indices are read as the batch reads them
(boolean masks, ints, negative ints), and a reset returns the reset's infos. Directly,
through SB3VecEnv and through GymVectorEnv, on DummyVecEnv and SubprocVecEnv."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat.opponent import OpponentSeat
from marl_vec.envs.registry import make_env_fn
from tests.helpers.backends import make
from tests.helpers.toll_game import ILLEGAL, plain_return, toll_game

warnings.filterwarnings("ignore", category=DeprecationWarning, module="pettingzoo")

BACKENDS = ("dummy", "subproc")
TICTACTOE = "pettingzoo.classic.tictactoe_v3"
REFUSED = r"illegal move 2 for env 1 \(toll_v0\), agent 'player_1' to move; legal moves now: \[0, 1\]"


def lowest(obs, avail):
    """A deterministic opponent: the lowest legal move."""
    return avail.argmax(axis=1)


def learner_moves(r) -> np.ndarray:
    """The learner's lowest legal move in each env."""
    return r.avail_actions[:, 0].argmax(axis=1)


def kth_legal(r) -> np.ndarray:
    """Env k's k-th legal move (mod their number): the envs' games part ways."""
    return np.array([legal[k % len(legal)] for k, legal in
                     enumerate(np.flatnonzero(row) for row in r.avail_actions[:, 0])])


# -- a refused step changes nothing ---------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_move_loses_no_reward_and_counts_no_move(backend):
    game_return, game_moves = plain_return("player_1")  # -2 over 2 moves: player_0 opens, player_1 closes
    assert (game_return, game_moves) == (-2.0, 2)
    seat = OpponentSeat(make(backend, [toll_game] * 2, env_seed=0), opponent=lowest, seat="player_1")
    seat.reset()
    for game in range(2):
        with pytest.raises(ValueError, match=REFUSED):
            seat.step(np.array([0, ILLEGAL]))  # env 0's legal move is not played either
        total = np.zeros(2)
        for _ in range(game_moves):
            r = seat.step(np.zeros(2, np.int64))
            total += r.reward[:, 0]
        assert r.done.tolist() == [True, True], f"game {game}"
        assert total.tolist() == [game_return] * 2, f"game {game}"
        for info in r.infos:
            assert info["episode"]["length"] == game_moves and info["episode"]["return"] == game_return
    seat.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sb3_after_a_refused_move_reports_the_games_return_and_length(backend):
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import SB3VecEnv

    game_return, game_moves = plain_return("player_1")
    env = SB3VecEnv(make(backend, [toll_game] * 2, env_seed=0), opponent=lowest, seat="player_1")
    env.reset()
    with pytest.raises(ValueError, match=REFUSED):
        env.step(np.array([0, ILLEGAL]))
    total = np.zeros(2)
    for _ in range(game_moves):
        _, reward, done, infos = env.step(np.zeros(2, np.int64))
        total += reward
    assert done.tolist() == [True, True] and total.tolist() == [game_return] * 2
    assert [(info["episode"]["r"], info["episode"]["l"]) for info in infos] == [(game_return, game_moves)] * 2
    env.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_gym_with_validation_on_after_a_refused_move_reports_the_games_return(backend):
    from marl_vec.compat import GymVectorEnv

    game_return, game_moves = plain_return("player_1")
    envs = GymVectorEnv(make(backend, [toll_game] * 2, env_seed=0), opponent=lowest, seat="player_1",
                        episode_info=True)
    envs.venv.validate = True  # the face turns it off (gymnasium passes actions unchecked): the batch refuses
    envs.reset()
    with pytest.raises(ValueError, match=REFUSED):
        envs.step(np.array([0, ILLEGAL]))
    total = np.zeros(2)
    for _ in range(game_moves):
        _, reward, terminated, _, infos = envs.step(np.zeros(2, np.int64))
        total += reward
    assert terminated.tolist() == [True, True] and total.tolist() == [game_return] * 2
    assert infos["episode"]["r"].tolist() == [game_return] * 2
    assert infos["episode"]["l"].tolist() == [game_moves] * 2
    envs.close()


# -- env_ids and indices as the batch reads them ---------------------------------------

def tictactoe_seat(num_envs: int = 3) -> OpponentSeat:
    """player_2's seat: the opponent opens every game."""
    return OpponentSeat(mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)] * num_envs, env_seed=4),
                        opponent=lowest, seat="player_2")


def test_a_masked_reset_resets_the_masked_envs_and_plays_their_openings():
    masked, listed = tictactoe_seat(), tictactoe_seat()
    for seat in (masked, listed):
        before = seat.reset()
        for _ in range(2):
            before = seat.step(kth_legal(before))
    ra = masked.reset(env_ids=np.array([False, False, True]))
    rb = listed.reset(env_ids=[2])
    np.testing.assert_array_equal(ra.obs, rb.obs)
    np.testing.assert_array_equal(ra.obs[:2], before.obs[:2])  # envs 0 and 1 as they were
    assert ra.obs[2].sum() == 1  # env 2: a new game, with the opponent's opening mark
    np.testing.assert_array_equal(ra.avail_actions, rb.avail_actions)
    # The learner is to move in every env: its moves are played, and the games go on alike.
    for t in range(8):
        moves = learner_moves(ra)
        ra, rb = masked.step(moves), listed.step(moves)
        for field in ("obs", "reward", "done", "avail_actions"):
            np.testing.assert_array_equal(getattr(ra, field), getattr(rb, field), err_msg=f"step {t} {field}")
        for a, b in zip(ra.infos, rb.infos):
            assert a.get("episode", {}).get("length") == b.get("episode", {}).get("length"), f"step {t}"
    assert ra.obs[2].sum() > 1 or ra.done[2]
    masked.close()
    listed.close()


def test_call_get_attr_and_set_attr_read_indices_as_the_batch():
    seat = tictactoe_seat()
    r = seat.step(kth_legal(seat.reset()))  # different boards, different masks
    avail = r.avail_actions[:, 0]
    mask = np.array([True, False, True])
    got = seat.call("action_masks", indices=mask)
    assert len(got) == 2 and all(m.shape == (9,) for m in got)
    np.testing.assert_array_equal(np.stack(got), avail[[0, 2]])
    np.testing.assert_array_equal(np.stack(seat.call("action_masks", indices=1)), avail[[1]])
    np.testing.assert_array_equal(np.stack(seat.call("action_masks", indices=[-1])), avail[[2]])
    assert len(seat.get_attr("observation_space", indices=mask)) == 2
    assert len(seat.get_attr("action_space", indices=2)) == 1
    seat.set_attr("seat_test_flag", [5, 6], indices=mask)
    assert seat.get_attr("seat_test_flag", indices=[0, 2]) == [5, 6]
    assert seat.get_attr("seat_test_flag", indices=mask) == [5, 6]
    with pytest.raises(AttributeError):
        seat.get_attr("seat_test_flag", indices=1)
    with pytest.raises(ValueError, match=r"a boolean env mask must have shape \(3,\)"):
        seat.call("action_masks", indices=np.array([True, False]))
    with pytest.raises(IndexError, match=r"env indices \[3\] out of range \[-3, 3\)"):
        seat.get_attr("observation_space", indices=[3])
    with pytest.raises(ValueError, match=r"env_ids name envs \[1\] more than once"):
        seat.reset(env_ids=[1, 1])
    seat.close()


def test_sb3_env_method_get_attr_and_set_attr_take_masks_and_ints():
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import SB3VecEnv

    env = SB3VecEnv(mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)] * 3, env_seed=4), opponent=lowest,
                    seat="player_2")
    env.reset()
    env.step(np.array([1, 2, 3]))  # the opponent opened on 0: different boards, different masks
    avail = np.stack(env.env_method("action_masks"))
    mask = np.array([True, False, True])
    np.testing.assert_array_equal(np.stack(env.env_method("action_masks", indices=mask)), avail[[0, 2]])
    np.testing.assert_array_equal(np.stack(env.env_method("action_masks", indices=1)), avail[[1]])
    assert len(env.get_attr("observation_space", indices=mask)) == 2
    env.set_attr("seat_test_flag", 7, indices=mask)
    assert env.get_attr("seat_test_flag", indices=mask) == [7, 7]
    assert env.has_attr("seat_test_flag") is False  # env 1 has none
    assert env.env_is_wrapped(gymnasium.Wrapper, indices=mask) == [False, False]
    env.close()


# -- a reset returns the reset's infos -------------------------------------------------

RESET_INFO = {"agents": {"player_0": {"phase": "reset"}, "player_1": {"phase": "reset"}}}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reset_where_the_opponent_opens_returns_the_resets_infos(backend):
    seat = OpponentSeat(make(backend, [toll_game] * 2, env_seed=0), opponent=lowest, seat="player_1")
    r = seat.reset()
    assert r.infos == [RESET_INFO, RESET_INFO] and r.obs[:, 0, 0].tolist() == [1.0, 1.0]  # the opening was played
    assert r.reward.tolist() == [[0.0], [0.0]]  # the opening's -1 comes with the learner's first step, once
    seat.step(np.zeros(2, np.int64))
    r = seat.reset(env_ids=np.array([False, True]))
    assert r.infos == [{}, RESET_INFO]  # as the batch's partial reset gives them
    seat.close()


def test_the_faces_reset_infos_are_the_resets():
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import GymVectorEnv, SB3VecEnv

    env = SB3VecEnv(mv.make_vec([toll_game] * 2), opponent=lowest, seat="player_1")
    env.reset()
    assert env.reset_infos == [RESET_INFO, RESET_INFO]
    env.close()
    envs = GymVectorEnv(mv.make_vec([toll_game] * 2), opponent=lowest, seat="player_1")
    _, infos = envs.reset()
    assert infos["agents"]["player_1"]["phase"].tolist() == ["reset", "reset"]
    assert "played" not in infos["agents"]["player_1"]
    envs.close()


# -- games the opponent ends before the learner's first move in them -----------------


def _seat_over_short_games(seed: int) -> OpponentSeat:
    from tests.fuzz.turn_game import FuzzGame  # knockouts on: p0 may end a game before p1 moves

    return OpponentSeat(mv.DummyVecEnv([FuzzGame], env_seed=seed), lowest, seat="p1")


def _game_ends_before_p1_moves(seed: int) -> bool:
    from tests.fuzz.turn_game import FuzzGame

    game = FuzzGame()
    game.reset(seed=seed)
    for agent in game.agent_iter():
        obs, _, term, trunc, _ = game.last()
        if agent == "p1" and not (term or trunc):
            return False
        game.step(None if term or trunc else int(np.flatnonzero(obs["action_mask"])[0]))
    return True


@pytest.mark.parametrize("seed", [s for s in range(60) if _game_ends_before_p1_moves(s)][:3])
def test_a_game_the_learner_never_moved_in_is_not_its_episode(seed):
    """The seat plays past it: a reset is not done, and the learner's step rewards sum to the
    return of the games it played (the skipped game's reward is neither carried nor lost into another)."""
    seat = _seat_over_short_games(seed)
    r = seat.reset()
    assert not r.done[0] and r.reward[0, 0] == 0.0, "a reset that ends a game the learner never saw"
    total, games = 0.0, 0
    for _ in range(300):
        r = seat.step(learner_moves(r))
        total += float(r.reward[0, 0])
        if r.done[0]:
            summary = r.infos[0]["episode"]
            assert summary["length"] >= 1
            assert total == pytest.approx(summary["return"]), f"game {games}: step rewards against its return"
            total, games = 0.0, games + 1
            if games == 6:
                break
    assert games == 6
    seat.close()

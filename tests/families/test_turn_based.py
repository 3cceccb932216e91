"""Turn-based games (PettingZoo AEC envs) in one process: every classic game bit for bit
against a plain ``agent_iter()`` loop with the same seeds and moves (obs, masks, acting,
rewards, flags, final views, each game's returns), and the rules around it: only the
mover's action is read, illegal moves, ``legal_actions``, episode statistics, configs,
autoreset modes, simultaneous envs' ``acting``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn
from tests.helpers.turn_reference import Chooser, aec_turns, assert_game_sums, assert_same_turns, batch_turns, game_fn

warnings.filterwarnings("ignore", category=DeprecationWarning, module="pettingzoo")

# (marl_vec id, env() kwargs, a move the chooser plays half the time when legal, turns per env)
GAMES = {
    "tictactoe": ("pettingzoo.classic.tictactoe_v3", {}, None, 30),
    "connect_four": ("pettingzoo.classic.connect_four_v3", {}, None, 50),
    "chess": ("pettingzoo.classic.chess_v6", {}, None, 10),
    "go_9x9": ("pettingzoo.classic.go_v5", {"board_size": 9}, 81, 30),  # 81: pass; two passes end a game
    "go_19x19": ("pettingzoo.classic.go_v5", {}, 361, 10),
    "leduc_holdem": ("pettingzoo.classic.leduc_holdem_v4", {}, None, 30),
    "texas_holdem": ("pettingzoo.classic.texas_holdem_v4", {}, None, 30),
    "texas_holdem_no_limit": ("pettingzoo.classic.texas_holdem_no_limit_v6", {}, None, 30),
    "rps": ("pettingzoo.classic.rps_v2.env", {"max_cycles": 3}, None, 20),
    "hanabi": ("pettingzoo.classic.hanabi_v5", {}, None, 40),
}
NEEDS = {"chess": "chess", "leduc_holdem": "rlcard", "texas_holdem": "rlcard", "texas_holdem_no_limit": "rlcard",
         "hanabi": "pyspiel"}


def module_of(env_id: str) -> str:
    return env_id[: -len(".env")] if env_id.endswith(".env") else env_id


def run_both(game: str, num_envs: int = 2, turns: int | None = None, backend: str = "dummy", seed: int = 7,
             **kwargs):
    """(batch records, reference records, reference game sums, batch first rows, reference first views)."""
    if game in NEEDS:
        pytest.importorskip(NEEDS[game], reason="the classic extra is not installed: pip install 'marl_vec[classic]'")
    env_id, env_kwargs, prefer, default_turns = GAMES[game]
    turns = default_turns if turns is None else turns
    fns = [make_env_fn("pettingzoo", env_id, env_kwargs)] * num_envs
    with mv.make_vec(fns, backend=backend, env_seed=seed, reward_dtype="float64", **kwargs) as venv:
        got, extra = batch_turns(venv, [Chooser(i, prefer) for i in range(num_envs)], turns)
    refs = [aec_turns(game_fn(module_of(env_id), **env_kwargs), seed + i, turns, Chooser(i, prefer), np.float64)
            for i in range(num_envs)]
    return got, refs, extra["first"]


@pytest.mark.parametrize("game", sorted(GAMES))
def test_every_game_equals_a_plain_aec_loop_bit_for_bit(game):
    got, refs, first = run_both(game)
    for i, (records, (expected, start, sums)) in enumerate(zip(got, refs)):
        for field in ("obs", "avail", "acting", "agent_mask"):
            np.testing.assert_array_equal(first[i][field], start[field], err_msg=f"env {i} reset: {field}")
        assert_same_turns(records, expected, i)
        assert_game_sums(records, sums, i)


@pytest.mark.slow
def test_whole_chess_games_equal_the_plain_loop():
    got, refs, _ = run_both("chess", num_envs=1, turns=400)
    records, (expected, _, sums) = got[0], refs[0]
    assert_same_turns(records, expected, 0)
    assert sums and any(r["done"] for r in records)  # a game ended (random chess: ~350 turns)
    assert_game_sums(records, sums, 0)


def test_games_end_and_the_loser_gets_its_reward_on_the_winners_move():
    got, refs, _ = run_both("connect_four", num_envs=3)
    ends = [r for records in got for r in records if r["done"]]
    assert ends, "no game ended"
    for r in ends:
        assert r["terminated"].all() and not r["final_acting"].any() and r["acting"].sum() == 1  # the next game
        assert sorted(r["reward"].tolist()) in ([-1.0, 1.0], [0.0, 0.0])
        assert r["final_avail"].shape == (2, 7)
        assert r["episode"]["winner"] in ("player_0", "player_1", "draw")
        winner = r["episode"]["winner"]
        if winner != "draw":
            assert r["episode"][f"won_{winner}"] == 1.0 and r["episode"]["draw"] == 0.0


def make_game(game: str, num_envs: int = 2, **kwargs) -> mv.VecEnv:
    env_id, env_kwargs, _, _ = GAMES[game]
    return mv.make_vec([make_env_fn("pettingzoo", env_id, env_kwargs)] * num_envs, env_seed=0, **kwargs)


def test_only_the_acting_agents_action_is_read():
    with make_game("tictactoe") as a, make_game("tictactoe") as b:
        ra, rb = a.reset(), b.reset()
        assert a.spec.turn_based and ra.acting.sum(axis=1).tolist() == [1, 1]
        for t in range(4):
            mover = ra.acting.argmax(axis=1)
            moves = np.array([a.legal_actions(i)[0] for i in range(2)])
            nan = np.full((2, 2), np.nan)
            junk = np.full((2, 2), -5)
            nan[np.arange(2), mover] = moves
            junk[np.arange(2), mover] = moves
            ra, rb = a.step(nan), b.step(junk)
            np.testing.assert_array_equal(ra.obs, rb.obs)
            np.testing.assert_array_equal(ra.acting, rb.acting)


def test_an_illegal_move_names_the_env_the_agent_the_move_and_the_legal_moves():
    with make_game("connect_four") as venv:
        r = venv.reset()
        with pytest.raises(ValueError, match=r"illegal move 9 for env 0 \(connect_four_v3\), agent 'player_0' to "
                                             r"move; legal moves now: \[0, 1, 2, 3, 4, 5, 6\]"):
            venv.step(np.array([[9, 0], [0, 0]]))
        for _ in range(6):  # fill column 0
            r = venv.step(np.zeros((2, 2), np.int64))
        assert 0 not in venv.legal_actions(0).tolist()
        mover = venv.spec.agents[int(r.acting[1].argmax())]
        with pytest.raises(ValueError, match=rf"illegal move 0 for env 1 \(connect_four_v3\), agent '{mover}' to move; "
                                             r"legal moves now: \[1, 2, 3, 4, 5, 6\]"):
            venv.step(np.array([[1, 1], [0, 0]]))
        with pytest.raises(ValueError, match=r"move 1.5 for env 0 \(connect_four_v3\), agent '.*' to move is not a "
                                             r"whole number"):
            venv.step(np.array([[1.5, 1.5], [1, 1]]))
        with pytest.raises(ValueError, match=r"actions must have shape \(2, 2\)"):
            venv.step(np.zeros(2, np.int64))


def test_without_validation_the_games_own_rule_applies():
    # PettingZoo's TerminateIllegalWrapper: an illegal move ends the game, the offender gets -1.
    with make_game("tictactoe", validate=False) as venv:
        venv.reset()
        venv.step(np.array([[4, 0], [4, 0]]))
        r = venv.step(np.array([[0, 4], [0, 4]]))  # player_2 plays the taken centre
        assert r.done.all()
        assert r.reward.tolist() == [[0.0, -1.0], [0.0, -1.0]]


def test_legal_actions_follow_the_agent_to_move():
    with make_game("tictactoe", num_envs=1) as venv:
        r = venv.reset()
        assert venv.legal_actions(0).tolist() == list(range(9))
        venv.step(np.array([[4, 0]]))
        assert venv.legal_actions(0).tolist() == [0, 1, 2, 3, 5, 6, 7, 8]
        assert venv.legal_actions(0, "player_1").tolist() == []  # the env reports none for the waiting agent
        with pytest.raises(ValueError, match="unknown agent 'nobody'"):
            venv.legal_actions(0, "nobody")
    del r


def test_simultaneous_envs_act_with_every_live_agent():
    from mpe2 import simple_spread_v3

    with mv.make_vec([lambda: simple_spread_v3.parallel_env(max_cycles=2)] * 2, env_seed=0) as venv:
        assert not venv.spec.turn_based
        r = venv.reset()
        np.testing.assert_array_equal(r.acting, r.agent_mask)
        assert not np.shares_memory(r.acting, r.agent_mask)
        with pytest.raises(ValueError, match="not turn-based"):
            venv.legal_actions(0)
        for _ in range(2):
            r = venv.step(np.zeros((2, 3), np.int64))
        assert r.done.all()
        np.testing.assert_array_equal(r.final_acting, np.zeros((2, 3), bool))  # every agent left at the end
        np.testing.assert_array_equal(r.acting, r.agent_mask)


@pytest.mark.parametrize("mode", ["next_step", "one_episode", "disabled"])
def test_autoreset_modes_serve_games(mode):
    with make_game("tictactoe", num_envs=1, autoreset=mode) as venv:
        r = venv.reset()
        for move in (0, 3, 1, 4, 2):  # player_1 wins on the top row
            mover = int(r.acting[0].argmax())
            actions = np.zeros((1, 2), np.int64)
            actions[0, mover] = move
            r = venv.step(actions)
        assert r.done[0] and r.reward[0].tolist() == [1.0, -1.0] and not r.acting.any()
        assert r.infos[0]["episode"]["winner"] == "player_1"
        if mode == "next_step":
            r = venv.step(np.zeros((1, 2), np.int64))
            assert not r.done[0] and r.acting[0].tolist() == [True, False] and r.obs.sum() == 0
        elif mode == "disabled":
            with pytest.raises(RuntimeError, match="autoreset='disabled'"):
                venv.step(np.zeros((1, 2), np.int64))


def test_configs_make_every_game():
    cfg = {"env": {"family": "pettingzoo", "id": "pettingzoo.classic.go_v5", "kwargs": {"board_size": 9}},
           "vec": {"num_envs": 2, "backend": "dummy"}}
    with mv.make(cfg) as venv:
        assert venv.spec.turn_based and venv.spec.n_actions == 82
    import pathlib

    files = sorted(pathlib.Path(__file__).resolve().parents[2].glob("configs/classic/*.yaml"))
    assert len(files) >= 10
    from marl_vec.tools.config import load_config

    for path in files:
        load_config(str(path))  # every key and value valid


def test_an_aec_env_with_box_actions_reads_only_the_movers_action():
    from mpe2 import simple_spread_v3

    with mv.make_vec([lambda: simple_spread_v3.env(max_cycles=2, continuous_actions=True)], env_seed=0) as venv:
        r = venv.reset()
        assert venv.spec.turn_based and r.acting[0].tolist() == [True, False, False]
        actions = np.full((1, 3, 5), np.nan, np.float32)
        actions[0, 0] = 0.5
        r = venv.step(actions)
        assert r.acting[0].tolist() == [False, True, False]
        with pytest.raises(ValueError, match="agent 'agent_1'"):
            venv.step(np.full((1, 3, 5), np.nan, np.float32))


def test_wait_leaves_an_env_as_it_is_and_lengths_count_turns():
    with make_game("tictactoe") as venv:
        r0 = venv.reset()
        r = venv.step(np.array([[4, 0], [mv.WAIT, np.nan]]))  # env 0 plays, env 1 sits this step out
        np.testing.assert_array_equal(r.obs[1], r0.obs[1])
        assert r.acting.tolist() == [[False, True], [True, False]] and r.reward[1].tolist() == [0.0, 0.0]
        for move in (0, 3, 1, 4, 2):  # env 1: player_1 wins in 5 turns, over 6 steps (one waited)
            actions = np.where(r.acting, float(mv.WAIT), np.nan)  # every env waits but env 1
            actions[1, r.acting[1].argmax()] = move
            r = venv.step(actions)
        assert r.done.tolist() == [False, True]
        assert r.infos[1]["episode"]["length"] == 5 and r.infos[1]["episode"]["winner"] == "player_1"
        np.testing.assert_array_equal(r.obs[0], venv.step(np.where(r.acting, mv.WAIT, np.nan)).obs[0])

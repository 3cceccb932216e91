"""Turn-based games on the process and Ray backends and under the async pool: each env's
turns equal a plain ``agent_iter()`` loop bit for bit (obs, masks, acting, rewards, flags,
final views), also when the games of one batch end at very different lengths."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from marl_vec.envs.registry import make_env_fn
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.families.test_turn_based import GAMES, NEEDS, module_of
from tests.helpers.turn_reference import (Chooser, aec_turns, assert_game_sums, assert_same_turns, batch_turns, game_fn,
                                  pool_turns)

warnings.filterwarnings("ignore", category=DeprecationWarning, module="pettingzoo")

backend = backends.backend_fixture(backends.PROCESS_BACKENDS)


def references(game: str, num_envs: int, turns: int, seed: int, prefers: list[int | None]):
    env_id, env_kwargs, _, _ = GAMES[game]
    return [aec_turns(game_fn(module_of(env_id), **env_kwargs), seed + i, turns, Chooser(i, prefers[i]), np.float32)
            for i in range(num_envs)]


def check_backend(backend: str, game: str, num_envs: int = 4, turns: int | None = None, seed: int = 3) -> None:
    if game in NEEDS:
        pytest.importorskip(NEEDS[game], reason="the classic extra is not installed: pip install 'marl_vec[classic]'")
    env_id, env_kwargs, prefer, default_turns = GAMES[game]
    turns = default_turns if turns is None else turns
    fns = [make_env_fn("pettingzoo", env_id, env_kwargs)] * num_envs
    with backends.make(backend, fns, env_seed=seed) as venv:
        assert venv.spec.turn_based
        got, _ = batch_turns(venv, [Chooser(i, prefer) for i in range(num_envs)], turns)
    for i, (expected, _, sums) in enumerate(references(game, num_envs, turns, seed, [prefer] * num_envs)):
        assert_same_turns(got[i], expected, i)
        assert_game_sums(got[i], sums, i)


@pytest.mark.parametrize("game", ["tictactoe", "go_9x9"])
def test_games_equal_the_plain_loop_on_every_process_backend(backend, game):
    check_backend(backend, game)


# Every other game on worker processes (each batch starts its workers: about a second a game).
@pytest.mark.parametrize("game", sorted(set(GAMES) - {"tictactoe", "go_9x9"}))
def test_every_game_equals_the_plain_loop_in_worker_processes(game):
    check_backend("subproc", game, num_envs=2)


@pytest.mark.parametrize("pool_backend", ["subproc", "ray-auto"])
def test_the_pool_serves_games_of_very_different_lengths(pool_backend, request):
    # Go 9x9: envs 0 and 2 pass half the time (games of a few turns), 1 and 3 never
    # pass (games of ~100 turns): the pool hands out whichever envs are ready.
    env_id, env_kwargs, _, _ = GAMES["go_9x9"]
    num_envs, seed, turns = 4, 11, 140
    prefers: list[int | None] = [81, None, 81, None]
    fns = [make_env_fn("pettingzoo", env_id, env_kwargs)] * num_envs
    if pool_backend.startswith("ray-"):
        request.getfixturevalue("ray_cluster")
    with backends.make(pool_backend, fns, env_seed=seed, batch_size=2) as venv:
        got = pool_turns(venv, [Chooser(i, prefers[i]) for i in range(num_envs)], turns)
        stats = venv.episode_statistics()
    refs = references("go_9x9", num_envs, turns, seed, prefers)
    lengths = []
    for i, (expected, _, sums) in enumerate(refs):
        assert_same_turns(got[i], expected, i)
        assert_game_sums(got[i], sums, i)
        lengths += [r["episode"]["length"] for r in got[i] if r["done"]]
    assert min(lengths) < 10 < 60 < max(lengths), lengths
    assert stats["episodes"] >= len(lengths)


def test_the_pool_names_an_illegal_move_of_a_sent_env():
    env_id, env_kwargs, _, _ = GAMES["connect_four"]
    fns = [make_env_fn("pettingzoo", env_id, env_kwargs)] * 4
    with backends.make("subproc", fns, env_seed=0, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        assert r.acting.shape == (2, 2) and r.final_acting.shape == (2, 2)
        ids = r.env_ids.tolist()
        with pytest.raises(ValueError, match=rf"illegal move 8 for env {ids[0]} \(connect_four_v3\), agent 'player_0'"):
            venv.send(np.array([[8, 0], [0, 0]]), ids)
        venv.send(np.array([[3, np.nan], [4, np.nan]]), ids)
        r = venv.recv()

"""Regression tests: the sequences of the bugs the fuzzer met, one test each, all fixed (the
Ray one is in tests/fuzz/test_fuzz_ray.py, beside its cluster): issue 23's bugs 2, 3, 4 and
6, and three the fuzzer found itself (a failed synchronous step that skipped the bookkeeping
of the envs stepped before it, a whole-block Ray pool error that took its block out of the
pool, a recv() that read two envs' errors and dropped the second).

The machine generates these sequences too; a test here pins each one down, so that it runs
on every build whatever Hypothesis draws. At the end, the open bugs the fuzzer holds back
(tests/fuzz/known_bugs.py), each as a strict xfail. docs/fuzzing.md says how to hold back a check
while a newly found bug is open.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import marl_vec as mv
from marl_vec.core.errors import PoolNotReadyError, WorkerError
from tests.fuzz.envs import AGENTS, box_env
from tests.fuzz.harness import arm

A = len(AGENTS)


def _pool(num_envs: int, batch_size: int, **kwargs) -> mv.SubprocVecEnv:
    return mv.SubprocVecEnv([box_env] * num_envs, num_workers=2, batch_size=batch_size, env_seed=0, timeout=60,
                            **kwargs)


def _zeros(n: int) -> np.ndarray:
    return np.zeros((n, A), np.int64)


def test_reset_drops_the_error_of_a_pool_step_never_received():
    with _pool(2, 2) as venv:
        arm(venv, 0)
        r = venv.recv()
        venv.send(_zeros(2), r.env_ids)  # env 0 raises in its worker; nobody receives it
        venv.reset()  # README: drops the results in flight and brings the failed env back
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1]


def test_pool_refuses_an_env_never_reset_as_step_does():
    with _pool(2, 2) as venv:
        venv.reset(env_ids=[0])
        with pytest.raises(ResetNeeded):  # the rule of step() (DummyVecEnv raises the env's own error)
            _step_partial_dummy()
        with pytest.raises((PoolNotReadyError, WorkerError, ResetNeeded), match="reset"):
            r = venv.recv()
            venv.send(_zeros(len(r.env_ids)), r.env_ids)
            venv.recv()


def _step_partial_dummy() -> None:
    with mv.DummyVecEnv([box_env] * 2, env_seed=0) as venv:
        venv.reset(env_ids=[0])
        venv.step(_zeros(2))


def test_partial_reset_keeps_a_failed_env_out_of_the_pool():
    with _pool(2, 1) as venv:
        arm(venv, 1)
        with pytest.raises(WorkerError, match="env 1"):
            for _ in range(200):  # env 0, env 1 (sent: raises in its worker), env 0 until the recv that meets it (timing: may take several)
                r = venv.recv()
                venv.send(_zeros(1), r.env_ids)
        venv.reset(env_ids=[0])  # README: the failed env 1 stays out of the pool until it is reset
        for _ in range(3):
            r = venv.recv()
            assert r.env_ids.tolist() == [0]
            venv.send(_zeros(1), r.env_ids)


@pytest.mark.parametrize("backend", ["dummy", "pool"])
def test_final_rows_are_zeros_where_not_done(backend):
    venv = mv.DummyVecEnv([box_env] * 3, env_seed=0) if backend == "dummy" else _pool(3, 3)
    with venv:
        venv.reset()
        for t in range(20):
            if backend == "dummy":
                r = venv.step(_zeros(3))
            else:
                r = venv.recv()
                venv.send(_zeros(3), r.env_ids)
            assert not np.any(r.final_obs[~r.done]), f"step {t}: final_obs where done is False"


@pytest.mark.parametrize("env_ids", [np.array([False, True, True]), [1.0, 2.7]], ids=["mask", "floats"])
def test_send_reads_env_ids_as_reset_does(env_ids):
    with _pool(3, 3) as venv:
        venv.reset()
        venv.recv()
        if isinstance(env_ids, np.ndarray):  # envs 1 and 2, as reset(env_ids=mask) reads it
            venv.send(_zeros(2), env_ids)
            venv.send(_zeros(1), [0])
        else:
            with pytest.raises(TypeError):
                venv.send(_zeros(2), env_ids)


def _short_second_episode() -> int:
    """An env_seed whose env 0 ends its second episode (after :func:`arm`) at its first step."""
    from tests.fuzz.envs import FuzzEnv

    for seed in range(1000):
        env = FuzzEnv()
        env.reset(seed=seed)
        env.reset()
        if env.length == 1:
            return seed
    raise AssertionError("no such seed")


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_an_error_in_step_leaves_the_other_envs_consistent(backend):
    seed = _short_second_episode()
    venv = (mv.DummyVecEnv([box_env] * 2, env_seed=seed) if backend == "dummy" else  # one worker: one EnvGroup
            mv.SubprocVecEnv([box_env] * 2, num_workers=1, env_seed=seed, timeout=60))
    with venv:
        arm(venv, 1)
        with pytest.raises(RuntimeError, match="armed failure"):
            venv.step(_zeros(2))  # env 0 ends its episode (length 1), then env 1 raises
        assert venv.get_attr("agents", indices=[0]) == [list(AGENTS)], "env 0 finished and was not reset"
        r = venv.step(_zeros(2))
        assert not (r.done[0] and r.infos[0]["episode"]["return"] == 0.0), f"phantom episode {r.infos[0]}"



def test_each_pool_error_is_raised():
    import time

    with _pool(2, 1) as venv:
        venv.reset()
        venv.set_attr("fail_in", 1, indices=[0, 1])
        venv.reset()  # a new round, every env ready; an unseeded reset keeps the envs armed
        for _ in range(2):  # env 0, then env 1: each raises in its own worker
            r = venv.recv()
            venv.send(_zeros(1), r.env_ids)
        time.sleep(1.0)  # both answers wait: the next recv() reads them together
        named = []
        for _ in range(2):
            with pytest.raises(WorkerError) as err:
                venv.recv()
            named.append(err.value.env_index)
        assert sorted(named) == [0, 1]


# -- issue 40's three bugs, which the new machines met (tests/fuzz/known_bugs.py held them back until fixed) --

def _seat(num_envs: int, seed: int):
    import functools

    from marl_vec.compat.opponent import OpponentSeat
    from tests.fuzz.seat_oracle import Opponent, SeatOracle
    from tests.fuzz.turn_game import seat_game

    fn = functools.partial(seat_game, "p1")
    seat = OpponentSeat(mv.DummyVecEnv([fn] * num_envs, env_seed=seed), Opponent(), seat="p1")
    return seat, [SeatOracle(fn, i, seed, "p1", Opponent()) for i in range(num_envs)]


def _opponent_opens(env: int = 0) -> int:
    """A seed whose env ``env``'s game the opponent opens (so that the learner, p1, has opening
    rewards carried, and a reset of the env must play the opponent's moves)."""
    from tests.fuzz.turn_game import seat_game

    for seed in range(100):
        g = seat_game("p1")
        g.reset(seed=seed + env)
        if g.agent_selection != "p1":
            return seed
    raise AssertionError("no such seed")


def test_a_refused_seat_step_changes_nothing():
    """Issue 40, bug 1 (fixed): a refused move kept the carried reward consumed and a move counted."""
    seat, (oracle,) = _seat(1, _opponent_opens())
    r = seat.reset()
    oracle.reset(None)
    with pytest.raises(ValueError, match="illegal move .* for env 0"):
        seat.step(np.array([int(np.flatnonzero(~oracle.row.avail)[0])]))
    for _ in range(40):  # the game, played on with legal moves, as the plain loop plays it
        move = int(np.flatnonzero(oracle.row.avail)[0])
        r = seat.step(np.array([move]))
        oracle.step(move)
        assert float(r.reward[0, 0]) == oracle.row.reward, "the reward the refused step consumed"
        if oracle.row.done:
            summary = r.infos[0]["episode"]
            assert (summary["return"], summary["length"]) == (oracle.row.summary["return"],
                                                              oracle.row.summary["length"])
            break
    seat.close()


def test_seat_reset_with_a_boolean_mask_resets_the_envs_it_names():
    """Issue 40, bug 2 (fixed): a boolean mask was read as the int ids [0, 0, 1]."""
    seat, oracles = _seat(3, 0)
    seat.reset()
    for o in oracles:
        o.reset(None)
    moves = np.array([int(np.flatnonzero(o.row.avail)[0]) for o in oracles])
    seat.step(moves)
    for o, m in zip(oracles, moves):
        o.step(int(m))
    seed = _opponent_opens(env=2)  # env 2's game (seeded seed + 2) opens with the opponent's moves
    r = seat.reset(seed=seed, env_ids=np.array([False, False, True]))
    oracles[2].reset(seed)
    for i, o in enumerate(oracles):
        np.testing.assert_array_equal(r.obs[i, 0], o.row.obs, err_msg=f"env {i}")
    seat.close()


def test_backend_auto_after_a_one_worker_plus_main_tune_serves_the_pool():
    """Issue 40, bug 3 (fixed): the tuner's '1 worker + main' choice refused send()/recv()."""
    from marl_vec.tools import tune_cache
    from marl_vec.tools.config import load_config
    from tests.fuzz.auto_backend import CHOICES, config, layout

    data = config(3, 0)
    tune_cache.save(load_config(data).model_dump(by_alias=True), {"choice": CHOICES["main"], "when": "a test"})
    with mv.make(data) as venv:
        assert layout(venv) == CHOICES["main"]
        venv.reset()
        r = venv.recv()  # docs/tuning.md: a tune changes only processes, memory and speed
        assert r.env_ids.tolist() == [0, 1, 2]

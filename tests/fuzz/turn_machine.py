"""The turn-based state machine: random calls on a batch of the scripted AEC game, each checked against a plain loop.

Rules: ``reset(seed, env_ids)`` full and partial (env ids as a list, tuple, array, int
or boolean mask); ``step`` with the mover's legal move (the other players' entries
random numbers or NaN: only the mover's is read), or ``WAIT``; a step with an illegal
move (the move the game's mask forbids, or one out of range) on purpose: the batch
refuses it with ``ValueError`` naming the env and the agent and steps nothing;
``send``/``recv`` where the backend has the async pool, illegal sends too;
``call``/``get_attr``/``set_attr``. After every call each row returned equals the
oracle's (tests/fuzz/turn_oracle.py, an ``agent_iter()`` loop per env over the same
game with the same seeds and moves) and ``episode_statistics()`` counts every game.

Example:
    >>> TestTurnsDummy = turn_test("dummy", TurnCache("dummy"))   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import marl_vec as mv
from marl_vec.core.spec import WAIT
from tests.fuzz.harness import TIMEOUT
from tests.fuzz.machine import FORMS, ids_in, tracked
from tests.fuzz.turn_game import N_MOVES, PLAYERS, game
from tests.fuzz.turn_oracle import GameOracle, TurnRow
from tests.helpers import backends

A = len(PLAYERS)
POOL = ("subproc", "ray-auto", "ray-ray")


@dataclass(frozen=True)
class TurnConfig:
    num_envs: int
    batch_size: int | None = None
    env_seed: int = 11


# ray-ray actors step whole blocks: a batch of the whole batch keeps every send complete.
TURN_CONFIGS: dict[str, list[TurnConfig]] = {
    "dummy": [TurnConfig(3), TurnConfig(5)],
    "subproc": [TurnConfig(4, 2), TurnConfig(5, 1), TurnConfig(3, 3)],
    "subproc-main": [TurnConfig(3), TurnConfig(4)],
    "ray-auto": [TurnConfig(4, 2), TurnConfig(3, 1)],
    "ray-ray": [TurnConfig(4, 4)],
}


class TurnCache:
    """One batch per configuration of ``backend``, kept across examples (each starts with a seeded full reset)."""

    def __init__(self, backend: str):
        self.backend, self.venvs = backend, {}

    def get(self, cfg: TurnConfig) -> mv.VecEnv:
        venv = self.venvs.get(cfg)
        if venv is None or venv.closed:
            kwargs: dict[str, Any] = {"env_seed": cfg.env_seed}
            if self.backend in POOL:
                kwargs.update(batch_size=cfg.batch_size, timeout=TIMEOUT)
            if self.backend.startswith("ray-"):
                kwargs["num_cpus_per_worker"] = 0
            venv = self.venvs[cfg] = backends.make(self.backend, [game] * cfg.num_envs, num_workers=2, **kwargs)
        return venv

    def drop(self, cfg: TurnConfig) -> None:
        venv = self.venvs.pop(cfg, None)
        if venv is not None:
            venv.close()

    def close_all(self) -> None:
        for venv in self.venvs.values():
            venv.close()
        self.venvs = {}


def _eq(got: Any, want: Any, what: str) -> None:
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=what)


def check_turn_row(r: Any, k: int, row: TurnRow, what: str) -> None:
    """Row ``k`` of result ``r`` is the oracle's ``row``: every field bit for bit."""
    _eq(r.obs[k], row.obs, f"{what}: obs")
    _eq(r.avail_actions[k], row.avail, f"{what}: avail_actions")
    _eq(r.acting[k], row.acting, f"{what}: acting")
    _eq(r.agent_mask[k], row.agent_mask, f"{what}: agent_mask")
    _eq(r.reward[k], row.reward, f"{what}: reward")
    _eq(r.terminated[k], row.terminated, f"{what}: terminated")
    _eq(r.truncated[k], row.truncated, f"{what}: truncated")
    assert bool(r.done[k]) == row.done, f"{what}: done {bool(r.done[k])} != {row.done}"
    info = r.infos[k]
    if row.done:
        _eq(r.final_obs[k], row.final_obs, f"{what}: final_obs")
        _eq(r.final_avail_actions[k], row.final_avail, f"{what}: final_avail_actions")
        _eq(r.final_acting[k], np.zeros(A, bool), f"{what}: final_acting")
    if row.info:
        summary = info.get("episode")
        assert summary is not None, f"{what}: no episode summary in {info}"
        _eq(summary["agent_returns"], row.summary["agent_returns"], f"{what}: episode agent_returns")
        assert summary["length"] == row.summary["length"], f"{what}: episode {summary} != {row.summary}"
        assert info["agent_selection"] == row.summary["agent_selection"], f"{what}: agent_selection {info}"
    else:
        assert "episode" not in info, f"{what}: a summary {info} where no game ended (or it was handed out)"


class TurnMachine(RuleBasedStateMachine):
    backend = "dummy"
    cache: TurnCache

    def __init__(self) -> None:
        super().__init__()
        self.venv: Any = None
        self.ok = True

    @initialize(data=st.data())
    @tracked
    def start(self, data: st.DataObject) -> None:
        configs = TURN_CONFIGS.get(self.backend, [TurnConfig(3), TurnConfig(4)])  # auto-*: backend auto's choices
        cfg = self.cfg = data.draw(st.sampled_from(configs), label="config")
        self.venv = self.cache.get(cfg)
        self.n = cfg.num_envs
        self.oracles = [GameOracle(game, i, cfg.env_seed) for i in range(self.n)]
        self.pool = self.backend in POOL or getattr(self.cache, "serves_pool", False)
        self.owed: set[int] = set()  # received from recv(), not sent since
        self.ready: list[int] = []  # ready for recv(), in env order (none in flight)
        self.flying: set[int] = set()
        self.games = 0
        self.history: list[list[str]] = [[] for _ in range(self.n)]  # per env, for the failure message
        self.venv.set_attr("label", None)  # a kept batch: also waits for what the last example left in flight
        self.venv.set_attr("resets", 0)
        self.base_games = self.venv.episode_statistics()["episodes"]
        self._reset(data.draw(st.integers(0, 10_000), label="first seed"), None, list(range(self.n)))

    def teardown(self) -> None:
        if self.venv is not None and not self.ok:
            self.cache.drop(self.cfg)

    # -- helpers ------------------------------------------------------------------------

    def _check(self, r: Any, envs: list[int], what: str) -> None:
        for k, i in enumerate(envs):
            row = self.oracles[i].row
            self.history[i].append(f"{what} -> done={row.done} summary={bool(row.info)} t={self.oracles[i].env.t}")
            try:
                check_turn_row(r, k, row, f"{what}: env {i} (row {k})")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nenv {i}'s calls so far: " + "; ".join(self.history[i][-8:])) from None
            self.oracles[i].delivered()
        if self.flying:  # games that ended in flight are counted when the batch reads their results
            return
        got = self.venv.episode_statistics()["episodes"] - self.base_games
        assert got == self.games, f"episode_statistics() counts {got} games, the loops finished {self.games}"

    def _restart_pool(self) -> None:
        """reset()/step(): envs in flight finish, their results dropped; every env ready in env order."""
        for i in self.flying:
            self.oracles[i].delivered()
        self.owed.clear()
        self.flying.clear()
        self.ready = list(range(self.n))

    def _reset(self, seed: int | None, env_ids: Any, targets: list[int]) -> None:
        result = self.venv.reset(seed=seed, env_ids=env_ids)
        for o in self.oracles:
            o.delivered()  # results dropped in flight, and a reset's infos carry no summary
        for i in targets:
            self.oracles[i].reset(seed)
        self._restart_pool()
        self._check(result, list(range(self.n)), f"reset(seed={seed}, env_ids={env_ids!r})")

    def _moves(self, data: st.DataObject, envs: list[int]) -> np.ndarray:
        """One row per env: the mover's legal move (or WAIT), the others' entries ignored (random or NaN)."""
        nan = data.draw(st.booleans(), label="NaN for the others")
        out = np.full((len(envs), A), np.nan) if nan else np.array(
            data.draw(st.lists(st.integers(0, N_MOVES - 1), min_size=len(envs) * A, max_size=len(envs) * A),
                      label="ignored entries"), np.int64).reshape(len(envs), A)
        for k, i in enumerate(envs):
            o = self.oracles[i]
            legal = np.flatnonzero(o.row.avail[o.mover]).tolist()
            out[k, o.mover] = data.draw(st.sampled_from(legal) | st.just(WAIT) if data.draw(
                st.integers(0, 9), label="wait?") == 0 else st.sampled_from(legal), label=f"env {i} move")
        return out

    def _play(self, envs: list[int], moves: np.ndarray) -> None:
        for k, i in enumerate(envs):
            o = self.oracles[i]
            move = int(moves[k, o.mover])
            if move == WAIT:
                o.wait()
            else:
                o.step(move)
                self.games += o.row.done
            self.history[i].append(f"move {move} -> done={o.row.done}")

    def _ids(self, data: st.DataObject, label: str) -> tuple[list[int], Any]:
        if data.draw(st.booleans(), label=f"{label}: all"):
            return list(range(self.n)), None
        ids = sorted(data.draw(st.sets(st.integers(0, self.n - 1), min_size=1), label=label))
        form = data.draw(st.sampled_from(FORMS), label=f"{label} form")
        if form == "list" and len(ids) == 1 and data.draw(st.booleans(), label=f"{label} as int"):
            return ids, ids[0]
        return ids, ids_in(form, ids, self.n)

    def _illegal(self, data: st.DataObject, envs: list[int]) -> tuple[np.ndarray, int, int, int]:
        """Legal moves but in one env (drawn): its mover's forbidden move, or one out of range."""
        moves = self._moves(data, envs)
        k = data.draw(st.integers(0, len(envs) - 1), label="env with the illegal move")
        o = self.oracles[envs[k]]
        forbidden = np.flatnonzero(~o.row.avail[o.mover]).tolist()
        bad = data.draw(st.sampled_from(forbidden + [N_MOVES, -2]), label="illegal move")
        moves[k, o.mover] = bad
        return moves, k, envs[k], bad

    # -- rules ------------------------------------------------------------------------

    @rule(data=st.data())
    @tracked
    def reset(self, data: st.DataObject) -> None:
        targets, env_ids = self._ids(data, "reset env_ids")
        self._reset(data.draw(st.none() | st.integers(0, 10_000), label="seed"), env_ids, targets)

    @rule(data=st.data())
    @tracked
    def step(self, data: st.DataObject) -> None:
        envs = list(range(self.n))
        moves = self._moves(data, envs)
        r = self.venv.step(moves)
        self._restart_pool()  # first: the results in flight are dropped, then the step is played
        self._play(envs, moves)
        event(f"turns: step ({'a game ended' if r.done.any() else 'no game ended'})")
        self._check(r, envs, "step()")

    @rule(data=st.data())
    @tracked
    def illegal_step(self, data: st.DataObject) -> None:
        envs = list(range(self.n))
        moves, _, i, bad = self._illegal(data, envs)
        mover = PLAYERS[self.oracles[i].mover]
        try:
            self.venv.step(moves)
        except ValueError as exc:
            text = str(exc)
            assert f"for env {i}" in text and repr(mover) in text, f"illegal move {bad} of env {i}: {text}"
        else:
            raise AssertionError(f"step() took the illegal move {bad} of env {i}")
        self._restart_pool()
        self.ready = []  # the refused step drained the pool (results in flight dropped): empty until reset()/step()

    @rule(data=st.data(), what=st.sampled_from(["get_attr", "set_attr", "call"]))
    @tracked
    def attrs(self, data: st.DataObject, what: str) -> None:
        ids, indices = self._ids(data, f"{what} indices")
        if what == "set_attr":
            self.venv.set_attr("label", data.draw(st.integers(0, 9), label="label"), indices=indices)
        elif what == "get_attr":
            assert len(self.venv.get_attr("label", indices=indices)) == len(ids)
        else:
            for (resets, t, _), i in zip(self.venv.call("peek", indices=indices), ids, strict=True):
                assert (resets, t) == (self.oracles[i].env.resets, self.oracles[i].env.t), f"call('peek') env {i}"

    # -- the async pool -------------------------------------------------------------------

    @precondition(lambda self: self.pool and len(self.ready) + len(self.flying) >= self.venv.batch_size)
    @rule()
    @tracked
    def recv(self) -> None:
        r = self.venv.recv()
        ids = r.env_ids.tolist()
        assert len(ids) == len(set(ids)) == self.venv.batch_size, f"recv() -> {ids}"
        if not self.flying:  # nothing in flight: the ready envs, in env order
            assert ids == self.ready[: len(ids)], f"recv() -> {ids}; ready in order: {self.ready}"
        assert set(ids) <= set(self.ready) | self.flying, f"recv() -> {ids}: ready {self.ready}, sent {self.flying}"
        self.ready = [i for i in self.ready if i not in ids]
        self.flying -= set(ids)
        self.owed |= set(ids)
        self._check(r, ids, f"recv() -> {ids}")

    @precondition(lambda self: self.pool and self.owed)
    @rule(data=st.data())
    @tracked
    def send(self, data: st.DataObject) -> None:
        ids = data.draw(st.permutations(sorted(self.owed)), label="send order")
        if self.backend != "ray-ray":  # its actors step whole blocks: every received env at once
            ids = ids[: data.draw(st.integers(1, len(ids)), label="how many")]
        moves = self._moves(data, ids)
        self.venv.send(moves, ids)
        self._play(ids, moves)
        self.owed -= set(ids)
        self.flying |= set(ids)

    @precondition(lambda self: self.pool and self.owed)
    @rule(data=st.data())
    @tracked
    def illegal_send(self, data: st.DataObject) -> None:
        ids = sorted(self.owed)
        moves, _, i, bad = self._illegal(data, ids)
        try:
            self.venv.send(moves, ids)
        except ValueError as exc:
            assert f"for env {i}" in str(exc), f"illegal move {bad} of env {i}: {exc}"
        else:
            raise AssertionError(f"send() took the illegal move {bad} of env {i}")


def turn_test(backend: str, cache: TurnCache, max_examples: int | None = None) -> type:
    """The TestCase that runs the turn machine over ``backend`` (examples: the profile's, or ``max_examples``)."""
    machine = type(f"Turns_{backend.replace('-', '_')}", (TurnMachine,), {"backend": backend, "cache": cache})
    case = machine.TestCase
    case.settings = settings(stateful_step_count=25, **({} if max_examples is None else {"max_examples": max_examples}))
    return case

"""The opponent seat's state machine: the scripted game served single-agent, through each face.

Faces: :class:`~marl_vec.compat.opponent.OpponentSeat` itself (``reset(seed, env_ids)``
with env ids as a list, an int array, an int or a boolean mask), SB3's
(:class:`~marl_vec.compat.SB3VecEnv`: ``seed()`` + ``reset()``, ``step_async``/``step_wait``)
and gymnasium's (:class:`~marl_vec.compat.GymVectorEnv`: ``reset(seed, options={"reset_mask":
...})``, which refuses an int mask). Rules: resets; learner steps with legal moves; a step
with an illegal learner move on purpose (refused with ``ValueError``; it must change
nothing, docs/concepts/step_result.md); an opponent armed to raise (its error reaches the
caller; a seeded full reset then starts over). After every call each env's row equals the
oracle's (tests/fuzz/seat_oracle.py: plain ``agent_iter()`` games with the same seeds and
moves). What meets an open bug is held back (tests/fuzz/known_bugs.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from marl_vec.compat import GymVectorEnv, SB3VecEnv
from marl_vec.compat.opponent import OpponentSeat
from tests.fuzz.machine import ids_in, tracked
from tests.fuzz.seat_oracle import Opponent, SeatOracle, SeatRow
from tests.fuzz.turn_game import N_MOVES, seat_game
from tests.helpers import backends


@dataclass(frozen=True)
class SeatConfig:
    face: str  # "seat", "sb3", "gym"
    num_envs: int
    seat: str = "p0"
    env_seed: int = 5


SEAT_CONFIGS = {
    "dummy": [SeatConfig(face, n, seat) for face in ("seat", "sb3", "gym") for n, seat in ((3, "p0"), (4, "p1"))],
    "subproc": [SeatConfig("seat", 4, "p2"), SeatConfig("sb3", 3, "p1"), SeatConfig("gym", 4, "p0")],
}


class SeatCache:
    """One face (and its opponent) per configuration, kept across examples."""

    def __init__(self, backend: str):
        self.backend, self.faces = backend, {}

    def get(self, cfg: SeatConfig) -> tuple[Any, Opponent]:
        if cfg not in self.faces:
            opponent = Opponent()
            venv = backends.make(self.backend, [functools.partial(seat_game, cfg.seat)] * cfg.num_envs,
                                 num_workers=2, env_seed=cfg.env_seed)
            face = {"seat": OpponentSeat, "sb3": SB3VecEnv, "gym": GymVectorEnv}[cfg.face]
            self.faces[cfg] = (face(venv, opponent=opponent, seat=cfg.seat) if cfg.face != "seat"
                               else OpponentSeat(venv, opponent, seat=cfg.seat)), opponent
        return self.faces[cfg]

    def drop(self, cfg: SeatConfig) -> None:
        face = self.faces.pop(cfg, None)
        if face is not None:
            face[0].close()

    def close_all(self) -> None:
        for face, _ in self.faces.values():
            face.close()
        self.faces = {}


def _eq(got: Any, want: Any, what: str) -> None:
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=what)


class SeatMachine(RuleBasedStateMachine):
    backend = "dummy"
    cache: SeatCache

    def __init__(self) -> None:
        super().__init__()
        self.face: Any = None
        self.ok = True

    @initialize(data=st.data())
    @tracked
    def start(self, data: st.DataObject) -> None:
        cfg = self.cfg = data.draw(st.sampled_from(SEAT_CONFIGS[self.backend]), label="config")
        self.face, self.opponent = self.cache.get(cfg)
        self.opponent.fail_in = None
        self.n = cfg.num_envs
        fn = functools.partial(seat_game, cfg.seat)
        self.oracles = [SeatOracle(fn, i, cfg.env_seed, cfg.seat, self.opponent) for i in range(self.n)]
        self.broken = False  # an opponent raised: a seeded full reset starts over
        self._reset(data.draw(st.integers(0, 10_000), label="first seed"), list(range(self.n)), None)

    def teardown(self) -> None:
        if self.face is not None and not self.ok:
            self.cache.drop(self.cfg)

    # -- each face's calls, as (obs, reward, done, per-env extras) --------------------------

    def _face_reset(self, seed: int | None, env_ids: Any) -> np.ndarray:
        face = self.face
        if self.cfg.face == "seat":
            return face.reset(seed=seed, env_ids=env_ids).obs[:, 0]
        if self.cfg.face == "sb3":
            if seed is not None:  # SB3's seed(None) draws a seed of its own
                face.seed(seed)
            return face.reset()
        options = None if env_ids is None else {"reset_mask": env_ids}
        return face.reset(seed=seed, options=options)[0]

    def _face_step(self, moves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """(obs, reward, done, per env: terminated, truncated, final_obs, return, length where done)."""
        face, n = self.face, self.n
        if self.cfg.face == "seat":
            r = face.step(moves)
            extras = [{"terminated": r.terminated[i, 0], "truncated": r.truncated[i, 0], "final_obs": r.final_obs[i, 0],
                       "final_avail": r.final_avail_actions[i, 0], "avail": r.avail_actions[i, 0],
                       "summary": r.infos[i].get("episode")} for i in range(n)]
            return r.obs[:, 0], r.reward[:, 0], r.done, extras
        if self.cfg.face == "sb3":
            face.step_async(moves)
            obs, reward, done, infos = face.step_wait()
            assert reward.dtype == np.float32 and done.dtype == bool
            extras = [{"final_obs": info.get("terminal_observation"), "time_limit": info["TimeLimit.truncated"],
                       "summary": info.get("episode")} for info in infos]
            return obs, reward, done, extras
        obs, reward, terminated, truncated, infos = face.step(moves)
        done = terminated | truncated
        extras = [{"terminated": terminated[i], "truncated": truncated[i],
                   "final_obs": infos["final_obs"][i] if done[i] else None} for i in range(n)]
        return obs, reward, done, extras

    # -- checks ----------------------------------------------------------------------------

    def _check_obs(self, obs: np.ndarray, what: str) -> None:
        for i, o in enumerate(self.oracles):
            _eq(obs[i], o.row.obs, f"{what}: env {i} obs")
        if self.cfg.face == "seat":  # the learner's legal moves: what MaskablePPO asks for
            masks = self.face.call("action_masks")
            for i, o in enumerate(self.oracles):
                _eq(masks[i], o.row.avail, f"{what}: env {i} action_masks")

    def _check_step(self, got: tuple, what: str) -> None:
        obs, reward, done, extras = got
        self._check_obs(obs, what)
        for i, o in enumerate(self.oracles):
            row, extra, at = o.row, extras[i], f"{what}: env {i}"
            assert float(reward[i]) == row.reward, f"{at}: reward {float(reward[i])} != {row.reward} (plain loop)"
            assert bool(done[i]) == row.done, f"{at}: done {bool(done[i])} != {row.done}"
            self._check_extra(row, extra, at)
            o.delivered()

    def _check_extra(self, row: SeatRow, extra: dict[str, Any], at: str) -> None:
        face = self.cfg.face
        if "terminated" in extra:
            assert (bool(extra["terminated"]), bool(extra["truncated"])) == (row.terminated, row.truncated), \
                f"{at}: terminated/truncated {extra['terminated'], extra['truncated']} != {row.terminated, row.truncated}"
        if face == "sb3":
            assert extra["time_limit"] == (row.truncated and not row.terminated), f"{at}: TimeLimit.truncated"
        if not row.done:
            assert extra.get("summary") is None and extra["final_obs"] is None or face == "seat", f"{at}: {extra}"
            if face == "seat":
                assert extra["summary"] is None, f"{at}: a summary {extra['summary']} where no game ended"
            return
        _eq(extra["final_obs"], row.final_obs, f"{at}: final_obs")
        if face == "seat":
            _eq(extra["final_avail"], row.final_avail, f"{at}: final_avail_actions")
        summary = extra.get("summary")
        if face == "gym":
            return  # GymVectorEnv adds no summary unless episode_info=True
        ret, length = (summary["return"], summary["length"]) if face == "seat" else (summary["r"], summary["l"])
        want = row.summary["return"] if face == "seat" else round(row.summary["return"], 6)
        assert (ret, length) == (want, row.summary["length"]), f"{at}: summary {summary} != {row.summary} (plain loop)"

    # -- rules -----------------------------------------------------------------------------

    def _reset(self, seed: int | None, targets: list[int], env_ids: Any) -> None:
        try:
            obs = self._face_reset(seed, env_ids)
        except RuntimeError as exc:
            assert "fuzz opponent" in str(exc), f"reset raised {exc!r}"
            self.broken = True
            event("seat: the opponent raised in reset()")
            return
        for i in targets:
            self.oracles[i].reset(seed)
            self.oracles[i].delivered()
        self._check_obs(obs, f"reset(seed={seed}, env_ids={env_ids!r})")

    @rule(data=st.data())
    @tracked
    def reset(self, data: st.DataObject) -> None:
        seed = data.draw(st.integers(0, 10_000), label="seed") if self.broken else data.draw(
            st.none() | st.integers(0, 10_000), label="seed")
        if self.broken or self.cfg.face == "sb3" or data.draw(st.booleans(), label="all"):
            self.broken = False
            self._reset(seed, list(range(self.n)), None)
            return
        ids = sorted(data.draw(st.sets(st.integers(0, self.n - 1), min_size=1), label="env ids"))
        if self.cfg.face == "gym":
            if data.draw(st.booleans(), label="an int mask"):
                mask = np.zeros(self.n, np.int64)
                mask[ids] = 1
                try:
                    self.face.reset(options={"reset_mask": mask})
                except TypeError as exc:  # SyncVectorEnv's check: a boolean mask only
                    assert "np.bool_" in str(exc), str(exc)
                else:
                    raise AssertionError(f"GymVectorEnv took the int reset_mask {mask}")
                return
            self._reset(seed, ids, ids_in("mask", ids, self.n))
            return
        forms = ["list", "array", "mask"]
        form = data.draw(st.sampled_from(forms), label="env ids form")
        self._reset(seed, ids, ids[0] if len(ids) == 1 and form == "list" else ids_in(form, ids, self.n))

    def _moves(self, data: st.DataObject) -> np.ndarray:
        return np.array([data.draw(st.sampled_from(np.flatnonzero(o.row.avail).tolist()), label=f"env {i} move")
                         for i, o in enumerate(self.oracles)], np.int64)

    @precondition(lambda self: not self.broken)
    @rule(data=st.data())
    @tracked
    def step(self, data: st.DataObject) -> None:
        moves = self._moves(data)
        try:
            got = self._face_step(moves)
        except RuntimeError as exc:
            assert "fuzz opponent" in str(exc), f"step raised {exc!r}"
            self.broken = True
            event("seat: the opponent raised in step()")
            return
        for i, o in enumerate(self.oracles):
            o.step(int(moves[i]))
        event(f"seat: step ({'a game ended' if got[2].any() else 'no game ended'})")
        self._check_step(got, f"{self.cfg.face} step({moves.tolist()})")

    @precondition(lambda self: not self.broken)
    @rule(data=st.data())
    @tracked
    def illegal_step(self, data: st.DataObject) -> None:
        """The seat and SB3's face refuse an illegal move (ValueError naming the env) and change
        nothing; gymnasium's face checks no action (docs/faces/gymnasium_vector.md): the move
        reaches the game, whose own error is raised, the batch's step left part done."""
        moves = self._moves(data)
        i = data.draw(st.integers(0, self.n - 1), label="env with the illegal move")
        forbidden = np.flatnonzero(~self.oracles[i].row.avail).tolist()
        moves[i] = data.draw(st.sampled_from(forbidden + [N_MOVES]), label="illegal move")
        try:
            self._face_step(moves)
        except Exception as exc:  # noqa: BLE001 - checked below against what each face documents
            if self.cfg.face == "gym":  # the game's ValueError (Dummy) or the worker's error naming it (Subproc)
                text = " ".join([str(exc), *getattr(exc, "__notes__", [])])
                assert "fuzz game: illegal move" in text and f"env {i}" in text, text
                self.broken = True
            else:
                assert isinstance(exc, ValueError) and f"for env {i}" in str(exc), repr(exc)
        else:
            raise AssertionError(f"{self.cfg.face} took the illegal move {moves[i]} of env {i}")

    @precondition(lambda self: not self.broken)
    @rule(calls=st.integers(1, 3))
    @tracked
    def arm_opponent(self, calls: int) -> None:
        self.opponent.fail_in = calls


def seat_test(backend: str, cache: SeatCache, max_examples: int | None = None) -> type:
    machine = type(f"Seat_{backend}", (SeatMachine,), {"backend": backend, "cache": cache})
    case = machine.TestCase
    case.settings = settings(stateful_step_count=25, **({} if max_examples is None else {"max_examples": max_examples}))
    return case

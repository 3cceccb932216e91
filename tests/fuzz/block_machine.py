"""The block-engine state machine: random resets and steps of a batch of Walk blocks (tests/fuzz/block_env.py).

Configurations: DummyVecEnv (one block) and SubprocVecEnv (a block per worker), autoreset
``same_step`` and ``disabled`` (the modes a block serves); each example also asks for a
mode a block refuses (``next_step``, ``one_episode``, ``fast``) and checks the
``ValueError`` that names it and the allowed ones. Rules: ``reset(seed, env_ids)``, full and
partial (partial reseeds: a seed for some envs only), ids as a list, tuple, array, int or
boolean mask; ``step`` (under ``disabled``, a step while an env is finished raises
``EnvFinishedError`` naming the first such env, and no env is stepped); a pool round,
``send``/``recv`` of every env (sent in a drawn order, in one or two calls: a block waits
for all its envs), rows checked in the order ``recv`` returns them (``disabled``: a
finished env is refused with ``PoolNotReadyError``). After each call every row equals a plain :class:`Walk`
per env with the same seeds and actions: obs, rewards, flags, ``done``, ``final_obs`` and
the episode summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import marl_vec as mv
from marl_vec.core.errors import PoolNotReadyError
from marl_vec.core.group import EnvFinishedError
from tests.fuzz.block_env import A, N_ACTIONS, Walk, walk
from tests.fuzz.machine import FORMS, ids_in, tracked
from tests.helpers import backends


@dataclass(frozen=True)
class BlockConfig:
    backend: str
    num_envs: int
    autoreset: str = "same_step"
    env_seed: int = 3


BLOCK_CONFIGS = [BlockConfig("dummy", 3), BlockConfig("dummy", 4, "disabled"), BlockConfig("subproc", 5),
                 BlockConfig("subproc", 4, "disabled")]


class BlockCache:
    def __init__(self) -> None:
        self.venvs: dict[BlockConfig, mv.VecEnv] = {}

    def get(self, cfg: BlockConfig) -> mv.VecEnv:
        if cfg not in self.venvs:
            kwargs = {} if cfg.backend == "dummy" else {"timeout": 60}
            self.venvs[cfg] = backends.make(cfg.backend, [walk] * cfg.num_envs, num_workers=2, env_seed=cfg.env_seed,
                                            autoreset=cfg.autoreset, **kwargs)
        return self.venvs[cfg]

    def drop(self, cfg: BlockConfig) -> None:
        venv = self.venvs.pop(cfg, None)
        if venv is not None:
            venv.close()

    def close_all(self) -> None:
        for venv in self.venvs.values():
            venv.close()
        self.venvs = {}


class WalkOracle:
    """One env's row, from a plain Walk."""

    def __init__(self, index: int, env_seed: int, same_step: bool):
        self.env, self.index, self.same_step = Walk(), index, same_step
        self.env_seed, self.seeded = env_seed, False
        self.finished = False  # disabled: ended, waiting for reset()
        self.summary: dict[str, Any] | None = None

    def reset(self, seed: int | None) -> None:
        s = seed + self.index if seed is not None else (None if self.seeded else self.env_seed + self.index)
        self.seeded = True
        self.obs = self.env.reset(s)
        self.reward = np.zeros(A, np.float32)
        self.terminated, self.truncated = np.zeros(A, bool), np.zeros(A, bool)
        self.done, self.finished, self.summary = False, False, None
        self.returns, self.length = np.zeros(A), 0

    def step(self, actions: np.ndarray) -> None:
        obs, self.reward, term, trunc = self.env.step(actions)
        self.terminated, self.truncated = np.full(A, term), np.full(A, trunc)
        self.returns += self.reward
        self.length += 1
        self.done, self.summary, self.final_obs = term or trunc, None, None
        self.obs = obs
        if self.done:
            self.summary = {"agent_returns": self.returns.copy(), "length": self.length}
            self.final_obs = obs
            if self.same_step:
                self.obs = self.env.reset(None)
                self.returns, self.length = np.zeros(A), 0
            else:
                self.finished = True


def _eq(got: Any, want: Any, what: str) -> None:
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=what)


class BlockMachine(RuleBasedStateMachine):
    cache: BlockCache

    def __init__(self) -> None:
        super().__init__()
        self.venv: Any = None
        self.ok = True
        self.owed = False  # the pool's envs were returned by recv() and not sent yet
        self.dropped = False  # a refused step() dropped the pool's round (disabled: an env finished)

    @initialize(data=st.data(), refused=st.sampled_from(["next_step", "one_episode", "fast"]))
    @tracked
    def start(self, data: st.DataObject, refused: str) -> None:
        with pytest.raises(ValueError) as err:
            mv.DummyVecEnv([walk] * 2, autoreset=refused)
        text = str(err.value)
        if refused == "fast":  # refused before the stepper is asked: the adapter keeps no snapshots
            assert "autoreset='fast' needs an adapter that can snapshot" in text, text
        else:
            assert f"autoreset={refused!r} is not supported by the Walk family" in text and \
                "allowed: same_step, disabled" in text, text
        cfg = self.cfg = data.draw(st.sampled_from(BLOCK_CONFIGS), label="config")
        self.venv = self.cache.get(cfg)
        self.n = cfg.num_envs
        self.oracles = [WalkOracle(i, cfg.env_seed, cfg.autoreset == "same_step") for i in range(self.n)]
        self._reset(data.draw(st.integers(0, 10_000), label="first seed"), None, list(range(self.n)))

    def teardown(self) -> None:
        if self.venv is not None and not self.ok:
            self.cache.drop(self.cfg)

    def _check(self, r: Any, what: str, stepped: bool, ids: Any = None) -> None:
        """Every row of ``r`` against its env's oracle (row k is env ``ids[k]``; None: env k)."""
        envs = range(self.n) if ids is None else [int(i) for i in ids]
        for k, i in enumerate(envs):
            o, at = self.oracles[i], f"{what}: env {i} (row {k})"
            _eq(r.obs[k], o.obs, f"{at} obs")
            _eq(r.reward[k], o.reward, f"{at} reward")
            _eq(r.terminated[k], o.terminated, f"{at} terminated")
            _eq(r.truncated[k], o.truncated, f"{at} truncated")
            assert bool(r.done[k]) == o.done, f"{at} done {bool(r.done[k])} != {o.done}"
            if o.done and o.same_step:
                _eq(r.final_obs[k], o.final_obs, f"{at} final_obs")
            summary = r.infos[k].get("episode")
            if stepped and o.summary is not None:
                assert summary is not None, f"{at}: no summary {r.infos[k]}"
                _eq(summary["agent_returns"], o.summary["agent_returns"], f"{at} agent_returns")
                assert summary["length"] == o.summary["length"], f"{at} summary {summary} != {o.summary}"
            else:
                assert summary is None, f"{at}: a summary {summary} where no episode ended"

    def _reset(self, seed: int | None, env_ids: Any, targets: list[int]) -> None:
        self.owed = self.dropped = False  # the pool starts a new round: every env ready, in env order
        r = self.venv.reset(seed=seed, env_ids=env_ids)
        for i in targets:
            self.oracles[i].reset(seed)
        for o in self.oracles:
            o.summary = None
        self._check(r, f"reset(seed={seed}, env_ids={env_ids!r})", False)

    @rule(data=st.data())
    @tracked
    def reset(self, data: st.DataObject) -> None:
        if data.draw(st.booleans(), label="all"):
            targets, env_ids = list(range(self.n)), None
        else:
            targets = sorted(data.draw(st.sets(st.integers(0, self.n - 1), min_size=1), label="env ids"))
            form = data.draw(st.sampled_from(FORMS), label="form")
            env_ids = targets[0] if len(targets) == 1 and form == "list" else ids_in(form, targets, self.n)
        self._reset(data.draw(st.none() | st.integers(0, 10_000), label="seed"), env_ids, targets)

    @rule(data=st.data())
    @tracked
    def step(self, data: st.DataObject) -> None:
        actions = data.draw(arrays(np.int64, (self.n, A), elements=st.integers(0, N_ACTIONS - 1)), label="actions")
        finished = [i for i, o in enumerate(self.oracles) if o.finished]
        if finished:  # disabled: refused before any env is stepped, naming the first finished env
            with pytest.raises(EnvFinishedError) as err:
                self.venv.step(actions)
            assert str(err.value).startswith(f"env {finished[0]} finished its episode and autoreset='disabled'"), \
                str(err.value)
            for o in self.oracles:
                o.summary = None
            self.owed, self.dropped = False, True  # step() dropped the pool's round before it was refused
            return
        self.owed = self.dropped = False
        r = self.venv.step(actions)
        for i, o in enumerate(self.oracles):
            o.step(actions[i])
        self._check(r, f"step({actions.tolist()})", True)

    @rule(data=st.data())
    @tracked
    def pool_round(self, data: st.DataObject) -> None:
        """send()/recv() of every env (the batch: DummyVecEnv's one block, or a worker's block
        each): the envs sent in a drawn order, in one send() or two (the first ones wait for
        the rest of their block), then recv()'s rows, in the order they finished."""
        venv = self.venv
        if self.dropped:  # nothing is ready or stepping until a reset() or step() starts a round
            with pytest.raises(PoolNotReadyError, match=r"no envs are stepping or ready"):
                venv.recv()
            return
        if not self.owed:  # a new round: recv() returns every env's current rows, in env order
            r = venv.recv()
            assert r.env_ids.tolist() == list(range(self.n)), r.env_ids
            for o in self.oracles:
                o.summary = None
            self._check(r, "recv() of a new round", False, r.env_ids)
            self.owed = True
        order = [int(i) for i in data.draw(st.permutations(range(self.n)), label="send order")]
        actions = data.draw(arrays(np.int64, (self.n, A), elements=st.integers(0, N_ACTIONS - 1)), label="actions")
        finished = [i for i in order if self.oracles[i].finished]
        if finished:  # disabled: a finished env is refused, nothing sent
            with pytest.raises(PoolNotReadyError, match=r"finished their episode and autoreset='disabled'"):
                venv.send(actions[order], order)
            return
        cut = data.draw(st.integers(0, self.n - 1), label="first send") if self.n > 1 else 0
        for part in (order[:cut], order[cut:]):
            if part:
                venv.send(actions[part], part)
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == list(range(self.n)), r.env_ids
        for i, o in enumerate(self.oracles):
            o.step(actions[i])
        self._check(r, f"send({actions[order].tolist()}, {order}) then recv()", True, r.env_ids)


def block_test(cache: BlockCache, max_examples: int | None = None) -> type:
    machine = type("Blocks", (BlockMachine,), {"cache": cache})
    case = machine.TestCase
    case.settings = settings(stateful_step_count=25, **({} if max_examples is None else {"max_examples": max_examples}))
    return case

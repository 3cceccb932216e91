"""What each call must do: the pool's bookkeeping, the errors each backend documents, and
the comparison of a returned result with the oracle's rows.

:class:`PoolModel` follows README's async pool rules: ``reset()``/``step()`` make every
env ready in env order; ``recv()`` hands out ``batch_size`` envs, ready ones first in
their order, then envs in flight (each worker finishes its envs in the order sent);
``send()`` takes only envs received and not sent since; a worker that steps only its
whole block (Ray calls) holds sent envs until its block is complete; an env whose
step raised is named by the ``recv()`` that meets it and stays out of the pool until
``reset()``; ``reset()`` and ``step()`` first wait for the envs in flight and drop their
results; ``call``/``get_attr``/``set_attr``/``render`` wait for them and keep the pool
(the errors read are raised by the next ``recv()`` calls, one each, before any batch).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np

from marl_vec.core.errors import WorkerError
from tests.fuzz.oracle import EnvOracle, Row


def env_error_types(backend: str) -> tuple[type[BaseException], ...]:
    """What an env's exception in a step reaches the caller as (README "Errors")."""
    if backend == "dummy":
        return (Exception,)  # the env's own exception, with a note naming the env
    if backend in ("subproc", "subproc-main"):
        return (WorkerError,)
    from marl_vec.vec.ray.vec_env import RayWorkerError

    return (RayWorkerError,)


def error_env(backend: str, exc: BaseException) -> int | None:
    """The env index an env error names."""
    if backend == "dummy":
        return getattr(exc, "marl_vec_env_index", None)
    return getattr(exc, "env_index", None)


class PoolModel:
    """The async pool of one batch, as README states it (see the module docstring)."""

    def __init__(self, blocks: list[tuple[int, int]], whole: list[bool], batch_size: int):
        self.blocks, self.whole, self.batch_size = blocks, whole, batch_size
        self.owner = {i: w for w, (start, stop) in enumerate(blocks) for i in range(start, stop)}
        self.ready: list[int] = []  # ready envs whose order is known, at the head of the pool's queue
        self.flying: list[deque[int]] = [deque() for _ in blocks]  # per worker, in the order it steps them
        self.held: list[list[int]] = [[] for _ in blocks]  # whole-block workers: sent, waiting for the block
        self.owed: set[int] = set()  # received, not sent since
        self.failing: set[int] = set()  # in flight, and their step raises
        self.failed: set[int] = set()  # raised: out of the pool until reset()
        self.queued: set[int] = set()  # failing envs whose errors were read: recv() raises them first

    @property
    def in_flight(self) -> set[int]:
        return {i for f in self.flying for i in f}

    def restart(self, envs: Sequence[int], reset_ids: Sequence[int] | None, never: set[int] = frozenset()) -> None:
        """After reset(env_ids=reset_ids) (None: all) or a synchronous step (reset_ids = all):
        every env is ready in env order, but one that raised and was not reset since, and
        one ``never`` reset (README: they stay out of the pool until reset)."""
        if reset_ids is None:
            self.failed.clear()
        else:
            self.failed -= set(reset_ids)
        self.ready = [i for i in envs if i not in self.failed and i not in never]
        self.owed.clear()
        self.queued.clear()
        for f in self.flying:
            f.clear()
        for h in self.held:
            h.clear()

    def drain(self, oracles: list[EnvOracle]) -> None:
        """Another call waits for the envs in flight and drops their results (and errors);
        envs held for their block were never sent to the worker: dropped unstepped."""
        for i in self.in_flight:
            oracles[i].delivered()
        self.failed |= self.failing
        self.failing.clear()
        self.queued.clear()
        self.ready.clear()
        self.owed.clear()
        for f in self.flying:
            f.clear()
        for h in self.held:
            h.clear()

    def finish_flight(self) -> None:
        """call/get_attr/set_attr/render wait for the envs in flight and keep the pool: the
        healthy ones' results stay candidates (each worker's in the order it stepped them);
        the errors read are raised by the next recv() calls, before any batch."""
        self.queued |= self.failing

    def launch(self, ids: list[int]) -> list[tuple[int, list[int]]]:
        """send(ids): returns per worker the envs it starts stepping now, in its order."""
        self.owed -= set(ids)
        per_worker: dict[int, list[int]] = {}
        for i in ids:
            per_worker.setdefault(self.owner[i], []).append(i)
        started = []
        for w, envs in per_worker.items():
            if self.whole[w]:
                self.held[w].extend(envs)
                start, stop = self.blocks[w]
                # README: an env that raised is out of the pool; its block goes on without it.
                block = [i for i in range(start, stop) if i not in self.failed]
                if len(self.held[w]) < len(block):
                    continue
                self.held[w].clear()
                envs = block
            self.flying[w].extend(envs)
            started.append((w, envs))
        return started

    def recv_outcomes(self) -> tuple[bool, bool, bool]:
        """(may return a batch, may raise an env's error, may raise PoolNotReadyError)."""
        if self.queued:
            return False, True, False
        n_ready, flying = len(self.ready), len(self.in_flight)
        if n_ready + flying < self.batch_size:
            return False, False, True
        healthy = flying - len(self.failing)
        can_batch = n_ready + healthy >= self.batch_size
        may_raise = bool(self.failing) and n_ready < self.batch_size
        return can_batch, may_raise, False

    def check_batch(self, ids: list[int]) -> None:
        """The env_ids of a recv(): known ready envs first, then envs of each worker in the
        order it steps them, none after an env whose error is not raised yet."""
        assert len(ids) == self.batch_size and len(set(ids)) == len(ids), ids
        head = self.ready[: len(ids)]
        assert ids[: len(head)] == head, f"recv() env_ids {ids}: the ready envs {self.ready} come first"
        rest = ids[len(head):]
        for w, f in enumerate(self.flying):
            mine = [i for i in rest if self.owner[i] == w]
            ok = []
            for i in f:
                if i in self.failing:
                    break
                ok.append(i)
            assert mine == ok[: len(mine)], f"recv() env_ids {ids}: worker {w} steps {list(f)} in this order"
        del self.ready[: len(head)]
        for i in rest:
            self.flying[self.owner[i]].remove(i)
        self.owed |= set(ids)

    def fail(self, env: int) -> None:
        """recv() raised env's error: the env leaves the pool; the other envs in flight stay
        candidates of the next recv() (those answered already wait in the ready queue, each
        worker's in the order it stepped them)."""
        assert env in self.failing, f"recv() named env {env}, whose step did not raise; raising: {self.failing}"
        self.failing.discard(env)
        self.queued.discard(env)
        self.failed.add(env)
        self.flying[self.owner[env]].remove(env)


def _rows(tree: Any, k: int) -> Any:
    if isinstance(tree, dict):
        return {key: value[k] for key, value in tree.items()}
    return tree[k]


def _eq(got: Any, want: Any, what: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{what}: keys {list(got)} != {list(want)}"
        for key in want:
            _eq(got[key], want[key], f"{what}[{key!r}]")
        return
    got = np.asarray(got)
    assert got.dtype == np.asarray(want).dtype, f"{what}: dtype {got.dtype} != {np.asarray(want).dtype}"
    np.testing.assert_array_equal(got, want, err_msg=what)


def _zeros(tree: Any, what: str) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            _zeros(value, f"{what}[{key!r}]")
        return
    assert not np.any(tree), f"{what}: not zeros where done is False: {tree}"


def _state_of(obs: Any) -> Any:
    """state='auto' of an env without a state: the agents' (padded) observations concatenated."""
    if isinstance(obs, dict):
        return {key: value.reshape(-1) for key, value in obs.items()}
    return obs.reshape(-1)


def check_row(result: Any, k: int, env: int, row: Row, copy: bool, what: str) -> None:
    """Row k of ``result`` is env ``env``'s row as the oracle says."""
    at = f"{what}: env {env} (row {k})"
    _eq(_rows(result.obs, k), row.obs, f"{at} obs")
    _eq(_rows(result.state, k), _state_of(row.obs), f"{at} state")
    _eq(result.avail_actions[k], row.avail, f"{at} avail_actions")
    _eq(result.agent_mask[k], row.mask, f"{at} agent_mask")
    _eq(result.reward[k], row.reward, f"{at} reward")
    _eq(result.terminated[k], row.terminated, f"{at} terminated")
    _eq(result.truncated[k], row.truncated, f"{at} truncated")
    assert bool(result.done[k]) == row.done, f"{at} done {bool(result.done[k])} != {row.done}"
    info = result.infos[k]
    want = row.info.get("episode")
    if want is None:
        assert info == {}, f"{at} infos {info} != {{}}"
    else:
        assert set(info) == {"episode"}, f"{at} infos {info}: want only the episode summary"
        got = info["episode"]
        assert (got["return"], got["length"]) == (want["return"], want["length"]), f"{at} episode {got} != {want}"
        _eq(got["agent_returns"], want["agent_returns"], f"{at} episode agent_returns")
    if row.done:
        _eq(_rows(result.final_obs, k), row.final_obs, f"{at} final_obs")
        _eq(_rows(result.final_state, k), _state_of(row.final_obs), f"{at} final_state")
        _eq(result.final_avail_actions[k], row.final_avail, f"{at} final_avail_actions")
    elif copy:
        _zeros(_rows(result.final_obs, k), f"{at} final_obs")
        _zeros(_rows(result.final_state, k), f"{at} final_state")
        _zeros(result.final_avail_actions[k], f"{at} final_avail_actions")

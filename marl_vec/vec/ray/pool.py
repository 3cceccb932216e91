"""RayVecEnv's hooks for the async pool (`marl_vec.vec.pool`): send, recv, fault handling.

The pool decides which envs step; these hooks move them. A linked actor (same
machine, shared memory) steps any subset of its block and answers each env over
its socket; an actor answering Ray calls always steps its whole block. A linked
actor lost mid-flight is replaced and linked again; its envs in flight are sent
again, and each restarts at its next step.

Examples:
    >>> venv = mv.RayVecEnv(fns, num_workers=2, batch_size=2)
    >>> venv.reset(); r = venv.recv()
    >>> venv.send(actions_for(r.env_ids), r.env_ids)

`RayPool` is a mixin of [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv], above the
transports (`marl_vec.vec.ray.transport`) and the fault handling
(`marl_vec.vec.ray.faults`) it uses.
"""

from __future__ import annotations

import time
from multiprocessing.connection import wait as _wait_any
from typing import Any

from marl_vec.vec.pool import _EnvFailed
from marl_vec.vec.ray.actor import FailedStep
from marl_vec.vec.ray.faults import RayWorkerError, _Lost
from marl_vec.vec.ray.session import ray_module


class RayPool:
    """The async pool's per-backend hooks, for [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv]."""

    blocks: list[range]
    timeout: float
    _links: list[Any]
    _refs: dict[int, Any]
    _act: list[Any]
    _dead: dict[int, RayWorkerError]

    def _pool_check_usable(self) -> None:
        self._check_alive(range(len(self.actors)))

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        self._check_alive([w])
        link = self._links[w]
        if link is None:  # a Ray call: the whole block (but envs that raised: _pool_steps_part)
            self._send(w, "pool_step", (self._act[w], local_ids))
            return
        try:  # the worker protocol's pool step; its answers are read by _pool_answer, not the Link
            link.conn.send_bytes(self._pool_step_command(w, local_ids))
        except OSError:  # the actor is gone: its link reads end of file
            pass

    def _pool_steps_part(self, w: int) -> bool:
        return self._links[w] is None  # GroupHost.pool_step steps the envs named

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        links, refs = self._links, self._refs
        # A link whose send failed (ref None) has its answer: its death, read by _receive.
        failed = [w for w in flying if links[w] is not None and w in refs and refs[w] is None]
        if failed:
            return failed
        linked = {links[w].conn: w for w in flying if links[w] is not None}
        remote = {refs[w].hex(): w for w in flying if links[w] is None}
        ray = ray_module()
        deadline = None if timeout is None else time.monotonic() + timeout
        # One kind of actor: wait on it alone; both kinds: poll each in short slices.
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = remaining if not (linked and remote) else min(0.005, remaining if remaining is not None else 0.005)
            answered = []
            if linked:
                answered += [linked[c] for c in _wait_any(list(linked), wait if not remote else 0.0)]
            if remote:
                pending = [refs[w] for w in remote.values()]
                ready, _ = ray.wait(pending, num_returns=1, timeout=wait)
                if ready:
                    ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
                answered += [remote[r.hex()] for r in ready]
            if answered or (remaining is not None and remaining <= 0):
                return answered

    def _pool_answer(self, w: int) -> None:
        link = self._links[w]
        if link is not None:
            where = self._where(w)
            if self._pool_read(w, link.conn.fileno(),
                               lambda env, what, text: self._raised(w, "step", env, text)):
                self._pool_lost(w, f"{where} died during step: its process closed the shared-memory link")
            return
        try:
            result = self._receive([w], "step", replace=True)[w]  # a pool_step answers as a step
            infos = self._replace_lost(w, result.error) if isinstance(result, _Lost) else result
        except RayWorkerError as exc:  # not one env's error (the actor's): its block leaves the pool until reset()
            for _ in range(len(self._pool_flying[w])):
                self._pool_fail(w)
            raise _EnvFailed(exc) from None
        start = self.blocks[w].start
        error: RayWorkerError | None = None
        for i in list(self._pool_flying[w]):  # the block, in order; an env that raised leaves the pool
            info = infos.get(i - start)
            if isinstance(info, FailedStep):
                self._pool_fail(w)
                error = error or self._raised(w, "step", info.env_index, info.text)
            else:
                self._pool_complete(w, info)
        if error is not None:
            raise _EnvFailed(error)

    def _pool_lost(self, w: int, what: str) -> None:
        """Linked actor w died with envs in flight: a new actor takes its block (linked
        again); each of its envs restarts at its next step (those in flight are sent again)."""
        err = RayWorkerError(what, w, self.blocks[w])
        self._dead[w] = err
        if not self._may_replace(w, err):
            raise err
        block = self._new_actor_for_lost(w)
        self._pool_partial[w] = b""
        link = self._link(w) if self._local_actors([w]) else None
        if link is None:
            self._dead[w] = RayWorkerError(f"{what}; its replacement could not link to this machine's shared "
                                           "memory, which the async pool needs for it", w, block)
            raise self._dead[w]
        self._links[w] = link
        details = {"error": str(err), "actor_restarts": self.actor_restarts[w]}
        for i in block:
            self._pool_restarted[i] = details
        flight = self._pool_flying[w]
        if flight:
            self._pool_go(w, [i - block.start for i in flight])

    def _pool_settle(self, envs: list[int]) -> None:
        by_actor = self._owner(envs)
        for w, pairs in by_actor.items():
            self._send(w, "reset", (None, [j for _, j in pairs]))
        self._receive(sorted(by_actor), "reset")

    def _pool_timed_out(self, flying: list[int]) -> None:
        err = RayWorkerError(f"{self._where(flying[0])} did not answer step within {self.timeout:g} s; "
                             "raise `timeout` if its envs are slow", flying[0], self.blocks[flying[0]])
        for w in flying:  # a late answer would be read as the next command's
            self._dead[w] = err
        raise err

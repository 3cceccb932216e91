"""The async pool's rules of the fuzzer: ``recv``, ``send`` and the sends README refuses.

Added to :class:`~tests.fuzz.machine.FuzzMachine` for the backends that have the pool
(SubprocVecEnv, RayVecEnv over both transports); the pool's rules themselves are
modelled in :class:`~tests.fuzz.model.PoolModel`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import event, strategies as st
from hypothesis.stateful import precondition, rule

from marl_vec.core.errors import PoolNotReadyError
from tests.fuzz.envs import N_ACTIONS
from tests.fuzz.machine import FuzzMachine, ids_in, tracked
from tests.fuzz.model import env_error_types, error_env


class PoolFuzzMachine(FuzzMachine):
    def _pool_ok(self) -> bool:
        return self.pool is not None and self.live and self.has_reset and self.pending is None

    @precondition(lambda self: self._pool_ok())
    @rule()
    @tracked
    def recv(self) -> None:
        pool = self.pool
        assert pool is not None
        can_batch, may_raise, short = pool.recv_outcomes()
        try:
            result = self.venv.recv()
        except PoolNotReadyError as exc:
            assert short, f"recv() raised {exc!r}: {len(pool.ready)} ready, {sorted(pool.in_flight)} in flight"
            event("recv: PoolNotReadyError")
            return
        except env_error_types(self.backend) as exc:
            if not may_raise:
                raise
            pool.fail(error_env(self.backend, exc))
            event("recv: env error")
            return
        assert can_batch, f"recv() returned a batch; expected an error (failing {sorted(pool.failing)})"
        ids = result.env_ids.tolist()
        event(f"recv: batch ({'some done' if np.any(result.done) else 'none done'})")
        pool.check_batch(ids)
        self._check_rows(result, ids, f"recv() -> env_ids {ids}")

    @precondition(lambda self: self._pool_ok() and self.pool.owed)
    @rule(data=st.data())
    @tracked
    def send(self, data: st.DataObject) -> None:
        pool = self.pool
        assert pool is not None
        order = data.draw(st.permutations(sorted(pool.owed)), label="send order")
        ids = order[: data.draw(st.integers(1, len(order)), label="how many")]
        form = data.draw(st.sampled_from(["list", "array", "mask"]), label="env_ids form")
        if form == "mask":
            ids = sorted(ids)
        actions = self._actions(data, len(ids))
        self.venv.send(actions, ids_in(form, ids, self.n))
        event("send")
        for i, a in zip(ids, actions):
            self.sent[i] = a
        for _, envs in pool.launch(ids):
            for i in envs:
                try:
                    self.oracles[i].step(self.sent[i])
                except Exception:  # noqa: BLE001 - armed (RuntimeError) or never reset (ResetNeeded)
                    pool.failing.add(i)  # raised before changing anything: recv() will name it
                    event("send: an env that raises")
                else:
                    self.episodes += self.oracles[i].row.done

    @precondition(lambda self: self._pool_ok())
    @rule(data=st.data(), bad=st.sampled_from(["not owed", "twice", "none", "out of range", "action", "float"]))
    @tracked
    def refused_send(self, data: st.DataObject, bad: str) -> None:
        """README: send() of an env not received (or sent, raised, twice) raises
        PoolNotReadyError; bad actions ValueError; and nothing is sent."""
        pool = self.pool
        assert pool is not None
        owed = sorted(pool.owed)
        others = sorted(set(range(self.n)) - pool.owed)
        error: type[BaseException] = PoolNotReadyError
        if bad == "not owed" and others:
            ids = [data.draw(st.sampled_from(others), label="env")]
        elif bad == "twice" and owed:
            ids = [owed[0], owed[0]]
        elif bad == "out of range":  # the shared index check: IndexError
            ids, error = [self.n], IndexError
        elif bad == "action" and owed:
            ids, error = owed, ValueError
        elif bad == "float" and owed:
            ids, error = [float(i) + 0.5 for i in owed], TypeError
        else:
            ids = []
        actions = self._actions(data, max(1, len(ids)))
        if error is ValueError:
            actions[0, np.flatnonzero(self.oracles[ids[0]].row.mask)[0]] = N_ACTIONS
        try:
            self.venv.send(actions, ids)
        except error:
            pass
        else:
            raise AssertionError(f"send(env_ids={ids}) ({bad}) did not raise {error.__name__}")

    @precondition(lambda self: self._pool_ok())
    @rule(data=st.data())
    @tracked
    def pool_round(self, data: st.DataObject) -> None:
        """A trainer's loop: recv() a batch, then send() what it returned (or part of it)."""
        self.recv()
        if self.pool is not None and self.pool.owed:
            self.send(data)

    @precondition(lambda self: self._pool_ok())
    @rule(data=st.data(), env=st.integers(0, 5))
    @tracked
    def arm_then_step(self, data: st.DataObject, env: int) -> None:
        """Arm an env to raise at its second step from now, then step(): its next pool step raises."""
        i = env % self.n
        self.venv.set_attr("fail_in", 2, indices=[i])
        self._finish_flight()
        self.oracles[i].env.fail_in = 2
        self.step(data, False)

"""The Hypothesis state machine: random sequences of every VecEnv call, each checked against the oracle.

Rules: ``reset(seed, env_ids)`` (full or partial, env_ids as a list, tuple, array
or boolean mask), ``step``, ``step_async``/``step_wait`` (and every call refused
while a step is pending), ``send``/``recv`` (process and Ray backends),
``call``/``get_attr``/``set_attr`` (one of them arms an env to raise in a coming
step), bad indices and bad actions, and ``close`` (on a batch built for the example).
After each rule, every row returned equals the oracle's (tests/fuzz/oracle.py), an
error is the documented one, naming the env, and a result returned earlier
(``copy=True``) is unchanged. A synchronous step in which an env raises is modelled as
docs/backends/subproc.md states it (marl_vec/core/group_errors.py): in each block of envs
(a worker's, a Ray actor's, the whole batch in DummyVecEnv) the envs before the first
one that raises keep their step (an episode that ended is autoreset), that env and the
ones after it are not stepped, and the other blocks step whole; the episodes that ended
in it are not counted by ``episode_statistics()`` (their summaries never reached the
caller), and the pool is empty until the next ``reset()`` or ``step()``.

Example:
    >>> TestFuzzDummy = machine_for("dummy").TestCase   # doctest: +SKIP
"""

from __future__ import annotations

import copy as copy_module
import functools
from dataclasses import fields
from typing import Any, Callable

import numpy as np
from hypothesis import event, settings, strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from marl_vec.core.errors import AlreadyPendingCallError
from marl_vec.vec.base import ClosedEnvError
from tests.fuzz.envs import AGENTS, N_ACTIONS
from tests.fuzz.harness import (CONFIGS, POOL_BACKENDS, VenvCache, assert_left_nothing, blocks_of, footprint,
                                whole_blocks)
from tests.fuzz.model import PoolModel, check_row, env_error_types, error_env
from tests.fuzz.oracle import EnvOracle

A = len(AGENTS)
FORMS = ("list", "tuple", "array", "mask")


def ids_in(form: str, ids: list[int], num_envs: int) -> Any:
    """``ids`` written as ``form``: a list, tuple, int64 array, or boolean mask (sorted order)."""
    if form == "mask":
        mask = np.zeros(num_envs, bool)
        mask[ids] = True
        return mask
    return {"list": list, "tuple": tuple, "array": lambda x: np.array(x, np.int64)}[form](ids)


def tracked(method: Callable) -> Callable:
    """Marks the example as failed unless the rule ends normally (teardown then drops the batch)."""

    @functools.wraps(method)
    def wrapper(self: "FuzzMachine", *args: Any, **kwargs: Any) -> Any:
        self.ok = False
        out = method(self, *args, **kwargs)
        self.ok = True
        return out

    return wrapper


class FuzzMachine(RuleBasedStateMachine):
    backend = "dummy"
    cache: VenvCache

    def __init__(self) -> None:
        super().__init__()
        self.venv: Any = None
        self.ok = True
        self.live = False
        self.pending: tuple[np.ndarray, set[int]] | None = None  # step_async's actions and the envs that raise
        self.kept: tuple[Any, Any] | None = None  # the last result and a deep copy of it (copy=True)

    # -- start and end ---------------------------------------------------------------

    @initialize(data=st.data())
    @tracked
    def start(self, data: st.DataObject) -> None:
        cfg = self.cfg = data.draw(st.sampled_from(CONFIGS[self.backend]), label="config")
        self.venv = venv = self.cache.get(cfg)
        self.live = True
        self.n = n = cfg.num_envs
        self.oracles = [EnvOracle(cfg.env_fn, i, cfg.env_seed) for i in range(n)]
        self.labels: list[Any] = [None] * n
        self.never = set(range(n))  # never reset
        self.has_reset = False
        self.episodes = 0
        self.sent: dict[int, np.ndarray] = {}  # env -> the actions it was sent with (whole blocks wait)
        self.pool = (PoolModel(blocks_of(venv), whole_blocks(venv), venv.batch_size)
                     if self.backend in POOL_BACKENDS else None)
        if cfg.fresh:
            self.footprint = footprint(venv)
        else:  # a kept batch: set_attr also waits for what the last example left in flight
            venv.set_attr("label", None)
            venv.set_attr("resets", 0)
        self.base_episodes = venv.episode_statistics()["episodes"]
        if cfg.fresh:  # a new batch: often a partial first reset, leaving envs never reset
            first = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n - 1), label="first reset"))
            if first:
                self._reset(None, first, first)
            return
        seed = data.draw(st.integers(0, 10_000), label="first seed")
        self._reset(seed, None, list(range(n)))

    def teardown(self) -> None:
        venv = self.venv
        if venv is None:
            return
        if not self.ok:  # failed: the batch is in a state nobody knows
            if self.cfg.fresh:
                venv.close()
            else:
                self.cache.drop(self.cfg)
            return
        if self.cfg.fresh:
            if self.live:
                venv.close()
                venv.close()
                assert_left_nothing(*self.footprint)
            return
        if self.pending is not None:
            try:
                venv.step_wait()
            except env_error_types(self.backend):
                pass

    # -- helpers ---------------------------------------------------------------------

    def _drain(self) -> None:
        """reset()/step(): the envs in flight finish, their results (and errors) are dropped."""
        if self.pool is not None:
            self.pool.drain(self.oracles)

    def _finish_flight(self) -> None:
        """call/get_attr/set_attr/render: the envs in flight finish, the pool keeps their results."""
        if self.pool is not None:
            self.pool.finish_flight()

    def _keep(self, result: Any) -> None:
        if self.cfg.copy:
            self.kept = (result, copy_module.deepcopy(result))

    def _check_rows(self, result: Any, envs: list[int], what: str) -> None:
        for k, i in enumerate(envs):
            if i in self.never:
                continue
            check_row(result, k, i, self.oracles[i].row, self.cfg.copy, what)
            self.oracles[i].delivered()
        self._keep(result)

    def _check_stats(self) -> None:
        got = self.venv.episode_statistics()["episodes"] - self.base_episodes
        assert got == self.episodes, f"episode_statistics()['episodes'] counts {got} episodes, not {self.episodes}"

    def _actions(self, data: st.DataObject, rows: int) -> np.ndarray:
        return data.draw(arrays(np.int64, (rows, A), elements=st.integers(0, N_ACTIONS - 1)), label="actions")

    def _ids(self, data: st.DataObject, label: str) -> tuple[list[int], Any]:
        """Env indices to name (None: all) and how they are written."""
        if data.draw(st.booleans(), label=f"{label}: all"):
            return list(range(self.n)), None
        ids = sorted(data.draw(st.sets(st.integers(0, self.n - 1)), label=label))
        form = data.draw(st.sampled_from(FORMS), label=f"{label} form")
        if form == "list" and len(ids) == 1 and data.draw(st.booleans(), label=f"{label} as int"):
            return ids, ids[0]
        return ids, ids_in(form, ids, self.n)

    def _will_fail(self) -> set[int]:
        """Envs whose next step raises: never reset (ResetNeeded), or armed for it."""
        return {i for i, o in enumerate(self.oracles) if i in self.never or o.env.fail_in == 1}

    def _reset(self, seed: int | None, env_ids: Any, targets: list[int]) -> None:
        if self.pool is not None and self.pool.in_flight:
            event("reset: drops envs in flight")
        self._drain()
        result = self.venv.reset(seed=seed, env_ids=env_ids)
        for i in targets:
            self.oracles[i].reset(seed)
            self.never.discard(i)
        self.has_reset = True
        for o in self.oracles:
            o.delivered()  # a reset's infos are {} for every env
        if self.pool is not None:
            self.pool.restart(range(self.n), None if env_ids is None else targets, self.never)
        self._check_rows(result, list(range(self.n)), f"reset(seed={seed}, env_ids={env_ids!r})")
        self._check_stats()

    def _first_failing(self, failing: set[int]) -> list[int]:
        """Per block of envs that one EnvGroup steps in order, the first env that raises."""
        return [min(f) for f in ([i for i in range(start, stop) if i in failing] for start, stop in blocks_of(self.venv))
                if f]

    def _expect_env_error(self, exc: BaseException, failing: set[int], what: str) -> None:
        assert isinstance(exc, env_error_types(self.backend)), f"{what} raised {exc!r}"
        why = "never reset" if error_env(self.backend, exc) in self.never else "armed"
        event(f"{what.split('(')[0]}: env error ({why})")
        env = error_env(self.backend, exc)
        first = self._first_failing(failing)
        assert env in first, (f"{what} named env {env}; the first env that raises in each block: {first} "
                              f"(envs that raise: {sorted(failing)})\n{exc}")
        if env in self.never:  # README: a never-reset env fails as gymnasium's envs do
            assert "ResetNeeded" in repr(exc) or "reset" in str(exc), f"{what}: {exc!r}"

    def _stepped(self, actions: np.ndarray, result: Any, what: str) -> None:
        for i, o in enumerate(self.oracles):
            o.step(actions[i])
            self.episodes += o.row.done
        if self.pool is not None:  # every env ready again, but one that raised: it waits for reset()
            self.pool.restart(range(self.n), [], self.never)
        self._check_rows(result, list(range(self.n)), what)
        self._check_stats()

    def _failed_step(self, actions: np.ndarray, failing: set[int]) -> None:
        """A synchronous step raised (module docstring): in each block, the envs before its
        first failing env stepped, with their bookkeeping; that env raised before changing
        anything (its armed failure is spent) and the envs after it were not stepped."""
        first = self._first_failing(failing)
        for start, stop in blocks_of(self.venv):
            end = next((f for f in first if start <= f < stop), None)
            for i in range(start, stop if end is None else end):
                self.oracles[i].step(actions[i])  # its episode, if it ended, is not counted
            if end is not None:
                try:
                    self.oracles[end].step(actions[end])
                except Exception:  # noqa: BLE001 - armed (RuntimeError) or never reset (ResetNeeded)
                    pass
                else:
                    raise AssertionError(f"the model expected env {end} to raise")
        for o in self.oracles:
            o.delivered()  # the step's infos never reached the caller
        if self.pool is not None:  # the pool was drained before the step and stays empty until reset()/step()
            self.pool.restart([], [])
        self._check_stats()

    # -- reset and synchronous steps -----------------------------------------------------

    @precondition(lambda self: self.live and self.pending is None)
    @rule(data=st.data())
    @tracked
    def reset(self, data: st.DataObject) -> None:
        targets, env_ids = self._ids(data, "reset env_ids")
        seed = data.draw(st.none() | st.integers(0, 10_000), label="seed")
        self._reset(seed, env_ids, targets)

    @precondition(lambda self: self.live and self.has_reset and self.pending is None)
    @rule(data=st.data(), split=st.booleans())
    @tracked
    def step(self, data: st.DataObject, split: bool) -> None:
        actions = self._actions(data, self.n)
        failing = self._will_fail()
        self._drain()
        what = "step_async()+step_wait()" if split else "step()"
        try:
            if split:
                self.venv.step_async(actions)
                result = self.venv.step_wait()
            else:
                result = self.venv.step(actions)
        except Exception as exc:  # noqa: BLE001 - checked against the documented errors
            if not failing:
                raise
            self._expect_env_error(exc, failing, what)
            self._failed_step(actions, failing)
            return
        assert not failing, f"{what} stepped envs {sorted(failing)}, which must raise"
        event(f"step: {'some done' if np.any(result.done) else 'none done'}")
        self._stepped(actions, result, what)

    @precondition(lambda self: self.live and self.has_reset and self.pending is None)
    @rule(data=st.data())
    @tracked
    def step_async(self, data: st.DataObject) -> None:
        actions = self._actions(data, self.n)
        failing = self._will_fail()
        self._drain()
        try:
            self.venv.step_async(actions)
        except Exception as exc:  # noqa: BLE001 - DummyVecEnv steps inside step_async
            if not failing or self.backend != "dummy":
                raise
            self._expect_env_error(exc, failing, "step_async()")
            self._failed_step(actions, failing)
            return
        self.pending = (actions, failing)

    @precondition(lambda self: self.live and self.pending is not None)
    @rule()
    @tracked
    def step_wait(self) -> None:
        assert self.pending is not None
        (actions, failing), self.pending = self.pending, None
        try:
            result = self.venv.step_wait()
        except Exception as exc:  # noqa: BLE001 - checked against the documented errors
            if not failing:
                raise
            self._expect_env_error(exc, failing, "step_wait()")
            self._failed_step(actions, failing)
            return
        assert not failing, f"step_wait() stepped envs {sorted(failing)}, which must raise"
        self._stepped(actions, result, "step_wait()")

    @precondition(lambda self: self.live and self.pending is not None)
    @rule(call=st.sampled_from(["reset", "step_async", "call", "get_attr", "set_attr", "render", "send", "recv"]))
    @tracked
    def refused_while_pending(self, call: str) -> None:
        """README: between step_async and step_wait every other call is refused; the step stays collectable."""
        venv = self.venv
        calls = {"reset": lambda: venv.reset(), "step_async": lambda: venv.step_async(np.zeros((self.n, A), int)),
                 "call": lambda: venv.call("peek"), "get_attr": lambda: venv.get_attr("label"),
                 "set_attr": lambda: venv.set_attr("label", 1), "render": lambda: venv.render()}
        if call in ("send", "recv"):
            if self.pool is None:
                return
            calls = {"send": lambda: venv.send(np.zeros((1, A), int), [0]), "recv": lambda: venv.recv()}
            error: type[BaseException] = RuntimeError
        else:
            error = AlreadyPendingCallError
        try:
            calls[call]()
        except error as exc:
            assert "step_wait" in str(exc), f"{call}() while a step is pending: {exc}"
        else:
            raise AssertionError(f"{call}() while a step is pending did not raise {error.__name__}")
        assert venv.env_info()["n_agents"] == A  # always allowed
        venv.episode_statistics()

    @precondition(lambda self: self.live and len(self.never) < self.n and self.pending is None)
    @rule(data=st.data(), bad=st.sampled_from(["range", "negative", "shape", "float"]))
    @tracked
    def refused_actions(self, data: st.DataObject, bad: str) -> None:
        """README: an action out of range for a live agent, of the wrong shape, or not an
        integer raises ValueError before any env is stepped."""
        actions: Any = self._actions(data, self.n)
        known = sorted(set(range(self.n)) - self.never)
        i = data.draw(st.sampled_from(known), label="env")
        k = data.draw(st.sampled_from(np.flatnonzero(self.oracles[i].row.mask).tolist()), label="agent")
        if bad in ("range", "negative"):
            actions[i, k] = N_ACTIONS if bad == "range" else -1
        elif bad == "shape":
            actions = actions[:, :-1]
        else:
            actions = actions.astype(np.float64)
        self._drain()
        try:
            self.venv.step(actions)
        except ValueError as exc:
            if bad in ("range", "negative"):
                assert f"env {i}" in str(exc) and repr(AGENTS[k]) in str(exc), f"{exc}"
        else:
            raise AssertionError(f"step() took bad actions ({bad})")

    # -- call, get_attr, set_attr ----------------------------------------------------------

    @precondition(lambda self: self.live and self.pending is None)
    @rule(data=st.data(), what=st.sampled_from(["get_attr", "set_attr", "call", "arm"]))
    @tracked
    def attrs(self, data: st.DataObject, what: str) -> None:
        venv = self.venv
        self._finish_flight()
        if what == "arm":  # the env raises at its n-th step from now
            i = data.draw(st.integers(0, self.n - 1), label="env")
            steps = data.draw(st.integers(1, 4), label="fail_in")
            venv.set_attr("fail_in", steps, indices=[i])
            self.oracles[i].env.fail_in = steps
            return
        ids, indices = self._ids(data, f"{what} indices")
        if what == "get_attr":
            assert venv.get_attr("label", indices=indices) == [self.labels[i] for i in ids]
        elif what == "set_attr":
            if data.draw(st.booleans(), label="one value per env"):
                values: Any = [data.draw(st.integers(-5, 5), label="label") for _ in ids]
            else:
                values = data.draw(st.text(max_size=3), label="label")
            venv.set_attr("label", values, indices=indices)
            for j, i in enumerate(ids):
                self.labels[i] = values[j] if isinstance(values, list) else values
        else:
            got = venv.call("peek", indices=indices)
            assert len(got) == len(ids)
            for (resets, t, label), i in zip(got, ids):
                o = self.oracles[i]
                assert label == self.labels[i], f"call('peek') env {i}: label {label!r} != {self.labels[i]!r}"
                assert t == o.env.t, f"call('peek') env {i}: t {t} != {o.env.t}"
                assert resets == o.env.resets, f"call('peek') env {i}: resets {resets} != {o.env.resets}"
        self._check_stats()

    @precondition(lambda self: self.live and self.pending is None)
    @rule(call=st.sampled_from(["reset", "call", "get_attr", "set_attr"]),
          bad=st.sampled_from(["float", "out of range", "mask shape", "twice", "2-d"]))
    @tracked
    def refused_indices(self, call: str, bad: str) -> None:
        """README: env_ids/indices of floats raise TypeError, a mask of another shape
        ValueError, an index outside [0, E) IndexError; reset refuses an env named twice."""
        venv, n = self.venv, self.n
        given: Any = {"float": [0.5], "out of range": [n], "mask shape": np.ones(n + 1, bool),
                      "twice": [0, 0], "2-d": np.zeros((1, 2), np.int64)}[bad]
        error = {"float": TypeError, "out of range": IndexError}.get(bad, ValueError)
        if bad == "twice" and call != "reset":
            return  # named twice is fine for call/get_attr/set_attr
        if call == "reset":
            self._drain()
        else:
            self._finish_flight()
        fns = {"reset": lambda: venv.reset(env_ids=given), "call": lambda: venv.call("peek", indices=given),
               "get_attr": lambda: venv.get_attr("label", indices=given),
               "set_attr": lambda: venv.set_attr("label", 0, indices=given)}
        try:
            fns[call]()
        except error:
            pass
        else:
            raise AssertionError(f"{call} with {bad} indices {given!r} did not raise {error.__name__}")

    # -- close ----------------------------------------------------------------------------

    @precondition(lambda self: self.live and self.cfg.fresh)
    @rule()
    @tracked
    def close(self) -> None:
        """README: close() is always allowed (a step pending or in flight too), twice is fine,
        and it leaves no process or /dev/shm segment behind."""
        self.venv.close()
        self.venv.close()
        self.live = False
        assert_left_nothing(*self.footprint)
        try:
            self.venv.reset()
        except ClosedEnvError:
            pass
        else:
            raise AssertionError("reset() after close() did not raise ClosedEnvError")

    @precondition(lambda self: not self.live)
    @rule(call=st.sampled_from(["reset", "step", "get_attr", "recv"]))
    @tracked
    def after_close(self, call: str) -> None:
        """A closed batch refuses every call with ClosedEnvError; closing again is fine."""
        venv = self.venv
        fns = {"reset": venv.reset, "step": lambda: venv.step(np.zeros((self.n, A), np.int64)),
               "get_attr": lambda: venv.get_attr("label"), "recv": getattr(venv, "recv", venv.reset)}
        try:
            fns[call]()
        except ClosedEnvError:
            pass
        else:
            raise AssertionError(f"{call}() after close() did not raise ClosedEnvError")
        venv.close()

    # -- after every rule ---------------------------------------------------------------------

    @invariant()
    def earlier_result_unchanged(self) -> None:
        """Invariant 3: with copy=True a returned array is never changed by a later call."""
        if self.kept is None:
            return
        result, snapshot = self.kept
        for f in fields(result):
            got, want = getattr(result, f.name), getattr(snapshot, f.name)
            if f.name == "infos" or want is None:
                continue
            if isinstance(want, dict):
                for key in want:
                    np.testing.assert_array_equal(got[key], want[key], err_msg=f"kept result {f.name}[{key}]")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"kept result {f.name} changed")


def fuzz_test(backend: str, cache: VenvCache, max_examples: int | None = None) -> type:
    """The unittest TestCase that runs the machine over ``backend`` (examples: the profile's,
    or ``max_examples``), keeping its batches in ``cache``."""
    case = machine_for(backend, cache).TestCase
    case.settings = settings(stateful_step_count=30, **({} if max_examples is None else {"max_examples": max_examples}))
    return case


def machine_for(backend: str, cache: VenvCache) -> type[FuzzMachine]:
    """The machine over ``backend``'s configurations, keeping its batches in ``cache``
    (with the async pool's rules where the backend has the pool)."""
    from tests.fuzz.pool_rules import PoolFuzzMachine

    base = PoolFuzzMachine if backend in POOL_BACKENDS else FuzzMachine
    return type(f"Fuzz_{backend.replace('-', '_')}", (base,), {"backend": backend, "cache": cache})

"""The async pool of SubprocVecEnv and RayVecEnv (both transports): ``send(actions, env_ids)`` / ``recv()``, first-ready batches.

Like EnvPool, the pool holds ``num_envs`` envs and hands them out ``batch_size`` at a
time, in the order their results arrive, so a slow env does not hold the others back.
The unit is one env: a SubprocVecEnv worker (or a Ray actor linked to the driver's
shared memory) steps the envs it was sent one by one and signals each as soon as its
rows are in shared memory, so ``recv()`` returns the first ``batch_size`` finished envs,
whichever workers they live on; any ``batch_size`` in ``[1, num_envs]`` works. Where a
worker can only step its whole block (a Ray actor answering Ray calls, a native engine
such as the ``ale_vector`` Atari engine), its envs finish together, sent envs wait
until the rest of their block is sent, and ``batch_size`` must be ``num_envs`` or a
multiple of the (equal) block size.

Contract:

- ``reset()`` makes every env ready: the following ``recv()`` calls return the reset
  rows in env order. Envs never reset (after a partial first reset) and envs that
  raised stay out of the pool until a ``reset()`` names them.
- ``recv()`` blocks (at most ``timeout`` s) until ``batch_size`` envs have results it
  has not returned yet and returns those rows as copies, in a [`PoolStepResult`][marl_vec.vec.pool.PoolStepResult]
  whose ``env_ids`` are in the order the envs finished. Envs that finished beyond the
  batch stay ready for the next ``recv()``.
- ``send(actions, env_ids)`` steps envs that ``recv()`` returned and that were not sent
  since (any of them, any order; usually the last ``recv()``'s ``env_ids``);
  ``actions`` takes every form ``step()`` takes (arrays, object values, Dict/Tuple
  trees) with a row per sent env, ``(len(env_ids), n_agents, ...)``, row k for env
  ``env_ids[k]``, validated against those envs' own rows as ``step()`` validates; ``env_ids``
  as ``reset()`` takes them (ints, or a boolean mask of length ``num_envs``). Any other env raises
  [`PoolNotReadyError`][marl_vec.core.errors.PoolNotReadyError] and nothing is sent: no env is stepped
  twice without a ``recv()`` in between.
- Autoreset, episode statistics and fault handling are those of the synchronous path
  (``same_step`` or ``fast``: ``final_*`` of the finished rows ride in the result; or
  ``disabled``: a finished env's row holds its last observation, and ``send()`` refuses
  it until a ``reset()`` names it, which starts a new round as below).
  An env that raises is named by the ``recv()`` that meets its result, and is out of
  the pool until ``reset()``. When one ``recv()`` meets several (answers read in one
  wait), it raises the first and keeps the others: each following ``recv()`` raises
  the next one, before any batch, so no env's error is lost. A worker that dies is replaced (``restart_on_error``): its
  envs in flight, and each of its other envs at its next step, end their episode as
  truncated with ``info["restarted"]``.
- ``reset()``, ``step()`` and ``step_async()`` first wait for the envs in flight and
  drop their results, an env's error included (recorded episodes stay in the
  statistics); after ``step()`` every env is ready again, as after ``reset()``.
- ``call()``, ``get_attr()``, ``set_attr()`` and ``render()`` (`KEEP_POOL`) wait
  for the envs in flight and keep the pool as it is: the results and errors read stay
  for the next ``recv()`` calls, envs received stay owed, and the call reaches each env
  after its step in flight (a ``set_attr`` applies from the env's next step).
- ``final_*`` rows of envs not done are blanks (zeros; None in object leaves), as
  ``step()``'s with ``copy=True``.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> with mv.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2, batch_size=3) as venv:
    ...     _ = venv.reset()
    ...     r = venv.recv(); r.env_ids.tolist()
    ...     venv.send(np.zeros((3, 1), dtype=np.int64), r.env_ids)
    ...     r = venv.recv(); 3 in r.env_ids, r.obs.shape
    [0, 1, 2]
    (True, (3, 1, 4))
"""

from __future__ import annotations

import copy as copy_module
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import PoolNotReadyError
from marl_vec.vec.base import StepResult
from marl_vec.vec.copies import blank_rows
from marl_vec.vec.pool_wire import _SIGNALS, PoolAnswers, _EnvFailed, _sigmask  # noqa: F401  # the backends' names
from marl_vec.vec.worker import ObjectReply, encode_pool_step

# The calls that reach the envs without starting a new round: they keep the pool (the module docstring).
KEEP_POOL = frozenset({"call", "get_attr", "set_attr", "render"})

__all__ = ["AsyncPool", "PoolStepResult", "PoolNotReadyError"]


@dataclass
class PoolStepResult(StepResult):
    """A [`StepResult`][marl_vec.vec.results.StepResult] over the rows of ``env_ids`` only (row k is env ``env_ids[k]``)."""

    env_ids: np.ndarray | None = None


class AsyncPool(PoolAnswers):
    """Mixin for the backends: the pool's state and its two calls.

    A backend gives each worker's ``(start, stop)`` block to `_init_pool`,
    ``timeout``, and implements the ``_pool_*`` hooks at the end of this class. Per
    worker the pool keeps the envs in flight in the order the worker finishes them;
    the backend reports each finished env with `_pool_complete` (or
    `_pool_fail`), in that order.
    """

    _pool_blocks: list[tuple[int, int]]

    def _init_pool(self, batch_size: int | None, num_envs: int, blocks: list[tuple[int, int]],
                   whole_blocks: str | None = None) -> None:
        """``whole_blocks``: why every worker steps only its whole block (None: they step single envs)."""
        self._pool_blocks = blocks
        if batch_size is None:
            batch_size = num_envs
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= num_envs:
            raise ValueError(f"batch_size must be an integer in [1, num_envs={num_envs}], got {batch_size!r}")
        self.batch_size = batch_size
        self._num_pool_envs = num_envs
        self._pool_owner = [w for w, (start, stop) in enumerate(blocks) for _ in range(start, stop)]
        self._pool_whole = [False] * len(blocks)
        self._pool_ready: deque[int] = deque()  # envs whose rows recv() has not returned, in finishing order
        self._pool_fresh = False  # every env ready in env order (after reset/step), not yet put in _pool_ready
        self._pool_infos: dict[int, dict] = {}  # env -> its last result's info, when not empty
        self._pool_flying: list[deque[int]] = [deque() for _ in blocks]  # per worker, in finishing order
        self._pool_in_flight = 0
        self._pool_owed: set[int] = set()  # returned by recv(), not sent since
        self._pool_held: list[list[int]] = [[] for _ in blocks]  # whole-block workers: sent, waiting for the rest
        self._pool_failed: set[int] = set()  # envs that raised: out of the pool until reset()
        self._pool_errors: deque[BaseException] = deque()  # read, not raised yet: the next recv() calls raise them
        self._pool_unstarted: set[int] = set(range(num_envs))  # never reset: out of the pool until reset()
        self._pool_restarted: dict[int, dict] = {}  # env -> details its next result's info carries (worker replaced)
        self._pool_partial = [b""] * len(blocks)  # per worker: the start of an answer not read whole
        if whole_blocks is not None:
            self._pool_set_whole(list(range(len(blocks))), whole_blocks)

    def _pool_set_whole(self, workers: list[int], why: str) -> None:
        """Workers ``workers`` step only their whole blocks (``why``); check batch_size for them."""
        for w in workers:
            self._pool_whole[w] = True
        if not workers:
            return
        sizes = {stop - start for start, stop in self._pool_blocks}
        n, b = self._num_pool_envs, self.batch_size
        if b != n and (len(sizes) != 1 or b % next(iter(sizes))):
            raise ValueError(
                f"batch_size must be num_envs={n} or a multiple of the block size num_envs // num_workers "
                f"= {n}/{len(self._pool_blocks)}, with num_envs divisible by num_workers, because {why}; "
                f"got batch_size={b}"
            )

    def _pool_restart(self, reset_ids: Sequence[int] | None = None, step: bool = False) -> None:
        """After reset() of ``reset_ids`` (None: all) or a synchronous step (``step``): every
        env is ready, nothing in flight; but envs that raised, or were never reset, stay
        out of the pool until a reset() names them."""
        self._pool_fresh = True
        self._pool_ready.clear()
        self._pool_infos = {}
        self._pool_owed.clear()
        self._pool_errors.clear()
        if not step:
            for out in (self._pool_failed, self._pool_unstarted):
                if reset_ids is None:
                    out.clear()
                elif out:
                    out.difference_update(reset_ids)
        for held in self._pool_held:
            held.clear()

    def _pool_drain(self) -> None:
        """Wait for the envs in flight; their results are dropped (episodes recorded)."""
        if self._pool_in_flight:  # an env's error is a result too: dropped (the env stays out of the pool)
            self._pool_wait(self._num_pool_envs + 1, drop_errors=True)
        self._pool_errors.clear()  # errors read, not raised yet: dropped with the results
        if self._pool_restarted:
            restarted, self._pool_restarted = self._pool_restarted, {}
            self._pool_settle(sorted(restarted))
        if self._pool_fresh or self._pool_ready or self._pool_owed or self._pool_infos:
            self._pool_fresh = False
            self._pool_ready.clear()
            self._pool_infos = {}
            self._pool_owed.clear()
            for held in self._pool_held:
                held.clear()

    def _check_idle(self, call: str) -> None:
        """Before a synchronous call (`VecEnv._check_idle`): pool steps in flight
        finish first. ``reset()`` and ``step()`` drop their results (they start a new
        round); the calls of `KEEP_POOL` keep them, and the pool goes on."""
        self._check_open()
        if call in KEEP_POOL:
            self._pool_finish_flight()
        else:
            self._pool_drain()
        super()._check_idle(call)  # type: ignore[misc]  # VecEnv's, after this mixin

    def _pool_finish_flight(self) -> None:
        """Wait for the envs in flight and keep their results, and their errors for the next
        recv() calls (one each): the pool is as if recv() had read them, nothing returned."""
        if self._pool_in_flight:
            self._pool_wait(self._num_pool_envs + 1, drop_errors=True)  # errors stay in _pool_errors

    def _pool_check(self, call: str) -> None:
        self._check_open()
        self._pool_check_usable()
        if not self._keeps_final and self.autoreset is not AutoresetMode.DISABLED:
            raise ValueError(
                f"{call}(): the async pool needs autoreset='same_step' or 'fast' (final_* ride in each batch) "
                f"or 'disabled' (a finished env waits for its reset), this {type(self).__name__} uses "
                f"{self.autoreset.value!r}"
            )
        if self._waiting or self._interrupted:
            raise RuntimeError(f"{call}() called while a synchronous step is pending; call step_wait() first")
        if not self._has_reset:
            raise PoolNotReadyError(f"call reset() before {call}()")
        if self._pool_fresh:  # every env ready, in env order (but those out of the pool)
            self._pool_fresh = False
            out = self._pool_failed | self._pool_unstarted
            self._pool_ready.extend(i for i in range(self._num_pool_envs) if i not in out)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Step the envs ``env_ids`` (returned by `recv`, not sent since) with ``actions``.

        ``env_ids`` as ``reset()`` and ``call()`` take them: ints, or a boolean mask of
        length ``num_envs`` (rows of ``actions`` then in env order).
        """
        self._pool_check("send")
        ids = self._check_indices(env_ids)
        owed = self._pool_owed
        if not ids or len(set(ids)) != len(ids) or not owed.issuperset(ids):
            raise PoolNotReadyError(self._pool_refusal(ids))
        if self.autoreset is AutoresetMode.DISABLED:
            finished = [i for i in ids if self.buffers.done[i]]
            if finished:
                raise PoolNotReadyError(
                    f"send() got env_ids {ids}: envs {finished} finished their episode and autoreset='disabled': "
                    f"call reset(env_ids={finished}) first")
        self._write_action_rows(actions, ids)
        owed.difference_update(ids)
        owner, blocks = self._pool_owner, self._pool_blocks
        per_worker: dict[int, list[int]] = {}
        for i in ids:
            per_worker.setdefault(owner[i], []).append(i)
        for w, envs in per_worker.items():
            if self._pool_whole[w]:
                held = self._pool_held[w]
                held.extend(envs)
                start, stop = blocks[w]
                # Envs that raised are out of the pool: where the worker can step part of its
                # block (_pool_steps_part), the block goes without them.
                out = self._pool_failed if self._pool_failed and self._pool_steps_part(w) else ()
                block = [i for i in range(start, stop) if i not in out]
                if len(held) < len(block):
                    continue
                held.clear()
                envs = block
            self._pool_flying[w].extend(envs)
            self._pool_in_flight += len(envs)
            start = blocks[w][0]
            self._pool_go(w, [i - start for i in envs])

    def _pool_step_command(self, w: int, local_ids: list[int]) -> bytes:
        """The worker protocol's pool step of worker w's envs ``local_ids``, with their
        object actions when the action space has object leaves (never in shared memory)."""
        names = self.buffers.object_actions
        if not names:
            return encode_pool_step(local_ids)
        start = self._pool_blocks[w][0]
        return encode_pool_step(local_ids, self.buffers.object_rows_of([start + j for j in local_ids], names))

    def _pool_refusal(self, ids: list[int]) -> str:
        """Why send() refuses ``ids``: the first env it may not step, and the ones it may."""
        owed = self._pool_owed
        allowed = sorted(owed)
        shown = f"{allowed[:32]}{' ...' if len(allowed) > 32 else ''}"
        if not ids:
            return f"send() got no env_ids; it steps envs returned by recv() and not sent yet: {shown}"
        seen: set[int] = set()
        for i in ids:
            if i in seen:
                return f"send() got env {i} twice in env_ids {ids}; an env is stepped once per recv()"
            seen.add(i)
            if i in owed:
                continue
            if not 0 <= i < self._num_pool_envs:
                why = f"there is no such env (num_envs={self._num_pool_envs})"
            elif any(i in f for f in self._pool_flying) or any(i in h for h in self._pool_held):
                why = "it was sent already and recv() has not returned it since"
            elif i in self._pool_failed:
                why = "it raised (see the error recv() gave); call reset() first"
            elif i in self._pool_unstarted:
                why = f"it was never reset; call reset(env_ids=[{i}]) first"
            else:
                why = "recv() has not returned it yet (its result waits in the pool)"
            return (f"send() got env_ids {ids}: env {i} cannot be stepped, {why}; send() steps only envs "
                    f"returned by recv() and not sent since (an env is stepped once per recv()): {shown}")
        raise AssertionError("unreachable: every id was owed")

    def recv(self, timeout: float | None = None) -> PoolStepResult:
        """The next ``batch_size`` envs with results not yet returned (blocks until they are).

        ``timeout``: wait at most that many seconds for ``batch_size`` envs, then return
        those ready (at least one: with none ready yet, those ready at the end of the first
        further ``timeout`` s in which one is), as Tianshou's ``wait_num`` with ``timeout``; fewer envs than ``batch_size`` stepping or
        ready are then no error. The VecEnv's own ``timeout`` still bounds every wait (a hung env).
        """
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"recv(timeout=...) must be a positive number of seconds (or None), got {timeout!r}")
        self._pool_check("recv")
        if self._pool_errors:  # an error an earlier recv() read along with the one it raised
            raise self._pool_errors.popleft()
        need = self.batch_size
        ready = self._pool_ready
        # With a timeout, fewer than batch_size envs are a batch too (none would never come).
        if len(ready) + self._pool_in_flight < (need if timeout is None else 1):
            raise PoolNotReadyError(self._pool_shortage())
        if len(ready) < need:
            self._pool_wait(need, soft=timeout)
        ids_list = [ready.popleft() for _ in range(min(need, len(ready)))]
        self._pool_owed.update(ids_list)
        ids = np.array(ids_list, dtype=np.int64)
        pop = self._pool_infos.pop
        infos: list[dict[str, Any]] = [pop(i, None) or {} for i in ids_list] if self._pool_infos else [{} for _ in ids_list]
        return self._pool_rows(ids, infos)

    def _pool_rows(self, ids: np.ndarray, infos: list[dict[str, Any]]) -> PoolStepResult:
        """The rows of envs ``ids`` as `recv` returns them: copies of the host buffers' rows
        (a backend whose results live elsewhere, DummyVecEnv's torch/JAX batch, serves its own)."""
        buf = self.buffers
        avail, final_avail = buf.avail_actions, buf.final_avail_actions
        if self._obs_is_tree or self._objects_out:  # trees leaf by leaf; object values copied deeply
            def take(array: np.ndarray) -> np.ndarray:
                rows = array[ids]
                return copy_module.deepcopy(rows) if rows.dtype.hasobject and self.copy else rows

            def rows_of(tree: Any) -> Any:
                return None if tree is None else spaces.tree_map(take, tree)
        else:
            def rows_of(tree: Any) -> Any:
                return None if tree is None else tree[ids]
        done = buf.done[ids]
        # final_* rows of envs not done: blanks, as step() gives them (the rows taken are copies).
        blank = None if np.count_nonzero(done) == done.size else ~done

        def finals_of(tree: Any) -> Any:  # (autoreset='disabled': None, as step() gives them)
            return None if tree is None or not self._keeps_final else spaces.tree_map(lambda rows: blank_rows(rows, blank), rows_of(tree))
        return PoolStepResult(
            rows_of(buf.obs), rows_of(buf.state), None if avail is None else avail[ids], buf.agent_mask[ids],
            buf.reward[ids], buf.terminated[ids], buf.truncated[ids], done, infos,
            finals_of(buf.final_obs), finals_of(buf.final_state), finals_of(final_avail),
            acting=buf.movers()[ids], final_acting=finals_of(buf.final_acting), env_ids=ids,
        )

    def _pool_shortage(self) -> str:
        ready, flying, owed = len(self._pool_ready), self._pool_in_flight, len(self._pool_owed)
        held = sum(len(h) for h in self._pool_held)
        unstarted = sorted(self._pool_unstarted)
        never = (f"envs {unstarted} were never reset (a step would raise gymnasium's ResetNeeded): "
                 f"call reset(env_ids={unstarted}) to bring them in") if unstarted else ""
        if not (ready or flying or owed or held or self._pool_failed):
            return f"recv(): no envs are stepping or ready; {never or 'call reset() first'}"
        parts = [f"recv() needs batch_size={self.batch_size} envs, but only {ready} are ready and {flying} stepping"]
        if owed:
            parts.append(f"{owed} were returned by recv() and not sent yet: send() them first")
        if held:
            parts.append(f"{held} were sent and wait for the rest of their worker's block")
        if self._pool_failed:
            parts.append(f"envs {sorted(self._pool_failed)} raised and wait for reset()")
        if never:
            parts.append(never)
        return "; ".join(parts)

    def _pool_wait(self, need: int, drop_errors: bool = False, soft: float | None = None) -> None:
        """Read the workers' answers until ``need`` envs are ready, or nothing is in flight
        (bounded by timeout); ``soft``: or at the end of the first window of ``soft`` seconds
        in which an env is ready (Tianshou's ``wait`` with a timeout, called again while none is).
        An env's error is raised once the answers read are recorded
        (``drop_errors``: not raised; the env is out of the pool all the same). Errors read
        in one wait are all kept in ``_pool_errors``: the first is raised here, the next
        recv() calls raise the others, one each."""
        now = time.monotonic()
        deadline = None if self.timeout is None else now + self.timeout
        enough_at = None if soft is None else now + soft
        flying = self._pool_flying
        while len(self._pool_ready) < need and self._pool_in_flight:
            workers = [w for w, envs in enumerate(flying) if envs]
            now = time.monotonic()
            if enough_at is not None and now >= enough_at:
                if self._pool_ready:
                    return  # the soft deadline passed with envs ready: recv() returns those
                enough_at = now + soft  # type: ignore[operator]  # none yet: another window, as Tianshou waits
            remaining = None if deadline is None else max(0.0, deadline - now)
            windowed = enough_at is not None and (remaining is None or enough_at - now < remaining)
            answered = self._pool_answered(workers, enough_at - now if windowed else remaining)  # type: ignore[operator]
            if not answered and windowed:
                continue
            if not answered:
                self._pool_timed_out(workers)
            errors = self._pool_errors
            for w in answered:
                try:
                    self._pool_answer(w)
                except _EnvFailed as failed:  # env errors: the other answers are recorded first
                    errors.extend(failed.errors)
            if errors and not drop_errors:
                raise errors.popleft()

    def _pool_complete(self, w: int, info: dict | ObjectReply | None) -> None:
        """Worker w finished the next env of its flight (its rows are in the buffers, but
        for object leaves, which come in an `ObjectReply` with its info)."""
        env = self._pool_flying[w].popleft()
        self._pool_in_flight -= 1
        if isinstance(info, ObjectReply):  # the env's rows of the object leaves (never in shared memory)
            self._pool_write_objects(env, info.rows)
            info = info.payload
        if self._pool_restarted and env in self._pool_restarted:
            info = {**(info or {}), **self._pool_restarted.pop(env)}
        if info:
            self._pool_infos[env] = info
            if "episode" in info and self.buffers.done[env]:
                self.statistics.add((info["episode"],))
        self._pool_ready.append(env)

    def _pool_write_objects(self, env: int, rows: list[np.ndarray]) -> None:
        """Put env's rows of the object leaves, from its answer, into the buffers.

        An env whose process replaced a dead one restarts, and the episode it ends has as
        ``final_*`` the rows the caller last saw; for object leaves only this process holds
        those (the new process never had them), so they are kept from here.
        """
        buf = self.buffers
        names = buf.object_fields
        seen: list[np.ndarray] | None = None
        if env in self._pool_restarted:
            current = [name for name in names if "final_" + name in names]
            seen = buf.object_rows_of([env], current)
        buf.write_object_rows(env, names, rows)
        if seen is not None:
            buf.write_object_rows(env, ["final_" + name for name in current], seen)

    def _pool_fail(self, w: int) -> None:
        """The next env of worker w's flight raised: it leaves the pool until reset() (the
        backend raises its error, as `_EnvFailed`, once it has read its answers)."""
        env = self._pool_flying[w].popleft()
        self._pool_in_flight -= 1
        self._pool_failed.add(env)

    # -- what a backend implements -----------------------------------------------

    def _pool_check_usable(self) -> None:
        """Raise if the backend is broken (a hung or lost worker)."""

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        """Start worker w stepping its envs ``local_ids`` (in this order) with the actions in
        their rows of the buffers (a whole-block worker is given its whole block)."""
        raise NotImplementedError

    def _pool_steps_part(self, w: int) -> bool:
        """Whether whole-block worker w may step its block without the envs that raised."""
        return False

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        """Those of ``flying`` with answers (or a death) to read, waiting up to ``timeout`` s for one."""
        raise NotImplementedError

    def _pool_answer(self, w: int) -> None:
        """Read worker w's answers: `_pool_complete` per finished env (or `_pool_fail`,
        then raise `_EnvFailed`). A lost worker is replaced here, or raises."""
        raise NotImplementedError

    def _pool_timed_out(self, flying: list[int]) -> None:
        """No answer within ``timeout``: break the batch and raise."""
        raise NotImplementedError

    def _pool_settle(self, envs: list[int]) -> None:
        """Leaving the pool (a synchronous call): reset ``envs``, whose worker was replaced
        and which were not stepped since (their first step would have restarted them)."""

"""The async pool of SubprocVecEnv and RayVecEnv (both transports): ``send(actions, env_ids)`` / ``recv()``, first-ready batches.

Like EnvPool, the pool holds ``num_envs`` envs and hands them out ``batch_size`` at a
time, in the order their results arrive, so a slow env does not hold the others back.
The unit of stepping is a worker's (or Ray actor's) block of envs (one
:class:`~marl_vec.group.EnvGroup` steps its whole block), so ``batch_size`` must be ``num_envs`` (the
default: synchronous batches) or a multiple of the block size ``num_envs // num_workers``
with ``num_envs`` divisible by ``num_workers``.

Contract:

- ``reset()`` makes every env ready: the following ``recv()`` calls return the reset
  rows, block by block in worker order.
- ``recv()`` blocks (at most ``timeout`` s) until ``batch_size`` envs have results it
  has not returned yet and returns those rows as copies, in a :class:`PoolStepResult`
  whose ``env_ids`` are in the order the blocks arrived.
- ``send(actions, env_ids)`` steps envs that ``recv()`` returned and that were not sent
  since, usually exactly the last ``recv()``'s ``env_ids`` (several ``recv()`` may come
  before their ``send()``, each covering one or more whole batches' worker blocks);
  ``actions`` has shape ``(len(env_ids), n_agents, ...)``, row k for env ``env_ids[k]``,
  validated against those envs' own rows. Sending for any other env raises: no env is
  stepped twice without a ``recv()`` in between.
- Autoreset, episode statistics and fault handling are those of the synchronous path
  (``same_step`` or ``fast`` only: ``final_*`` of the finished rows ride in the result).
- ``reset()``, ``step()``, ``step_async()`` and the other calls that reach the envs
  first wait for the blocks in flight and drop their results (recorded episodes stay
  in the statistics); after ``step()`` every env is ready again, as after ``reset()``.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> with mv.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2, batch_size=2) as venv:
    ...     _ = venv.reset()
    ...     r = venv.recv()
    ...     venv.send(np.zeros((2, 1), dtype=np.int64), r.env_ids)
    ...     r = venv.recv(); sorted(r.env_ids.tolist()) in ([0, 1], [2, 3]), r.obs.shape
    (True, (2, 1, 4))
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marl_vec.vec.base import StepResult


@dataclass
class PoolStepResult(StepResult):
    """A :class:`StepResult` over the rows of ``env_ids`` only (row k is env ``env_ids[k]``)."""

    env_ids: np.ndarray | None = None


class PoolNotReadyError(RuntimeError):
    """``send``/``recv`` used out of order (see the module doc)."""


class AsyncPool:
    """Mixin for the process backends: the pool's state and its two calls.

    A backend gives ``_pool_blocks`` (each worker's ``(start, stop)``), ``timeout``, and
    implements the four ``_pool_*`` hooks at the end of this class.
    """

    _pool_blocks: list[tuple[int, int]]

    def _init_pool(self, batch_size: int | None, num_envs: int, blocks: list[tuple[int, int]]) -> None:
        num_workers = len(blocks)
        self._pool_blocks = blocks
        if batch_size is None:
            batch_size = num_envs
        block = num_envs // num_workers
        whole = batch_size == num_envs  # any blocks: every worker per batch
        if (isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= num_envs
                or (not whole and (len({stop - start for start, stop in blocks}) != 1 or batch_size % block))):
            raise ValueError(
                f"batch_size must be a multiple of the block size num_envs // num_workers = {num_envs}/{num_workers} "
                f"in [1, num_envs={num_envs}], with num_envs divisible by num_workers (the pool steps whole worker "
                f"blocks), got batch_size={batch_size!r}"
            )
        self.batch_size = batch_size
        self._pool_need = num_workers if whole else batch_size // block  # blocks per batch
        self._pool_ready: deque[int] = deque()  # workers whose rows recv() has not returned
        self._pool_infos: dict[int, dict[int, dict]] = {}  # worker -> its last step's non-empty infos
        self._pool_flying: set[int] = set()  # workers stepping pool actions
        self._pool_owed: list[int] = []  # workers of the last recv(), waiting for send()

    def _pool_restart(self) -> None:
        """After reset() or a synchronous step: every env is ready, nothing in flight."""
        self._pool_ready = deque(range(len(self._pool_blocks)))
        self._pool_infos = {}
        self._pool_owed = []

    def _pool_drain(self) -> None:
        """Wait for the blocks in flight; their results are dropped (episodes recorded)."""
        if self._pool_flying:
            self._pool_wait(len(self._pool_flying) + len(self._pool_ready))
        self._pool_ready.clear()
        self._pool_infos = {}
        self._pool_owed = []

    def _pool_check(self, call: str) -> None:
        self._check_open()
        self._pool_check_usable()
        if not self._keeps_final:
            raise ValueError(
                f"{call}(): the async pool needs autoreset='same_step' or 'fast' (final_* ride in each batch), "
                f"this {type(self).__name__} uses {self.autoreset.value!r}"
            )
        if self._waiting or self._interrupted:
            raise RuntimeError(f"{call}() called while a synchronous step is pending; call step_wait() first")
        if not self._has_reset:
            raise PoolNotReadyError(f"call reset() before {call}()")

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Step the envs ``env_ids`` (received by :meth:`recv`, not sent since; whole batches) with ``actions``."""
        self._pool_check("send")
        ids = [int(i) for i in np.asarray(env_ids).reshape(-1).tolist()]
        owed = [w for w in self._pool_owed if self._pool_blocks[w][0] in ids]
        expected = sorted(i for w in owed for i in range(*self._pool_blocks[w]))
        if not ids or sorted(ids) != expected:
            received = [i for w in self._pool_owed for i in range(*self._pool_blocks[w])]
            raise PoolNotReadyError(
                f"send() got env_ids {ids}, but may step only envs received by recv() and not sent yet, "
                f"in whole recv() batches: {received} (an env is stepped once per recv())"
            )
        actions = np.asarray(actions)
        self._pool_validate(actions, ids)
        self.buffers.actions[ids] = actions
        self._pool_owed = [w for w in self._pool_owed if w not in owed]
        for w in owed:
            self._pool_go(w)
            self._pool_flying.add(w)

    def recv(self) -> PoolStepResult:
        """The next ``batch_size`` envs with results not yet returned (blocks until they are)."""
        self._pool_check("recv")
        need = self._pool_need
        if len(self._pool_ready) + len(self._pool_flying) < need:
            raise PoolNotReadyError("recv(): no envs are stepping or ready; call reset() first")
        self._pool_wait(need)
        workers = [self._pool_ready.popleft() for _ in range(need)]
        self._pool_owed.extend(workers)
        ids = np.array([i for w in workers for i in range(*self._pool_blocks[w])], dtype=np.int64)
        infos: list[dict[str, Any]] = []
        for w in workers:
            nonempty = self._pool_infos.pop(w, None) or {}
            infos.extend(nonempty.get(j, {}) for j in range(self._pool_blocks[w][1] - self._pool_blocks[w][0]))
        buf = self.buffers
        done = buf.done[ids]
        final: tuple[Any, Any, Any] = (None, None, None)
        if self._keeps_final:
            final = (buf.final_obs[ids], buf.final_state[ids],
                     None if buf.final_avail_actions is None else buf.final_avail_actions[ids])
        avail = buf.avail_actions
        return PoolStepResult(
            buf.obs[ids], buf.state[ids], None if avail is None else avail[ids], buf.agent_mask[ids],
            buf.reward[ids], buf.terminated[ids], buf.truncated[ids], done, infos, *final, env_ids=ids,
        )

    def _pool_wait(self, need: int) -> None:
        """Read answers of flying workers until ``need`` workers are ready (bounded by timeout)."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while len(self._pool_ready) < need:
            flying = sorted(self._pool_flying)
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            answered = self._pool_answered(flying, remaining)
            if not answered:
                self._pool_timed_out(flying)
            for w in answered:
                self._pool_flying.discard(w)
                self._pool_infos[w] = self._pool_answer(w) or {}
                self._pool_ready.append(w)
                self._pool_record(w)

    def _pool_record(self, w: int) -> None:
        """Worker w's finished episodes go to the statistics, as in a synchronous step."""
        start, stop = self._pool_blocks[w]
        infos = self._pool_infos[w]
        done = self.buffers.done[start:stop]
        if np.count_nonzero(done):
            self.statistics.add(infos[j]["episode"] for j in np.flatnonzero(done).tolist()
                                if "episode" in infos.get(j, {}))

    def _pool_validate(self, actions: np.ndarray, ids: list[int]) -> None:
        """As the synchronous validation, over the rows of ``ids`` only (the others may be
        written by their workers at this moment)."""
        spec = self.spec
        shape = (len(ids), spec.n_agents, *spec.action_shape)
        if actions.shape != shape:
            raise ValueError(
                f"send() actions must have shape {shape} (len(env_ids)={len(ids)}, n_agents={spec.n_agents}, "
                f"action shape {spec.action_shape}), got {actions.shape}"
            )
        if not self.validate:
            return
        mask = self.buffers.agent_mask[ids]
        if spec.discrete:
            if actions.dtype.kind not in "iu":
                raise ValueError(f"discrete actions must be integers, got dtype {actions.dtype}")
            n = self._n_actions
            bad = ((actions < 0) | (actions >= n)) & mask
            if bad.any():
                k, a = (int(x) for x in np.argwhere(bad)[0])
                raise ValueError(f"action {actions[k, a]} for env {ids[k]}, agent {self._agent_ids[a]!r} is out of "
                                 f"range; allowed: 0..{n - 1}")
            avail = self.buffers.avail_actions[ids]
            chosen = np.take_along_axis(avail, np.clip(actions, 0, n - 1)[..., None], axis=2)[..., 0]
            bad = ~chosen & mask
            if bad.any():
                k, a = (int(x) for x in np.argwhere(bad)[0])
                raise ValueError(f"action {actions[k, a]} for env {ids[k]}, agent {self._agent_ids[a]!r} is not "
                                 f"available; available now: {np.flatnonzero(avail[k, a]).tolist()}")
        else:
            if actions.dtype.kind not in "fiu":
                raise ValueError(f"continuous actions must be numbers, got dtype {actions.dtype}")
            axes = tuple(range(2, actions.ndim))
            outside = (actions < self._low) | (actions > self._high) | ~np.isfinite(actions)
            bad = (outside.any(axis=axes) if axes else outside) & mask
            if bad.any():
                k, a = (int(x) for x in np.argwhere(bad)[0])
                raise ValueError(f"action {actions[k, a].tolist()} for env {ids[k]}, agent {self._agent_ids[a]!r} "
                                 f"is outside the action space [{self._low.tolist()}, {self._high.tolist()}]")

    # -- what a backend implements -----------------------------------------------

    def _pool_check_usable(self) -> None:
        """Raise if the backend is broken (a hung or lost worker)."""

    def _pool_go(self, w: int) -> None:
        """Start a step of worker w's block with the actions in its rows of the buffers."""
        raise NotImplementedError

    def _pool_answered(self, flying: list[int], timeout: float | None) -> list[int]:
        """Those of ``flying`` whose answer (or death) is in, waiting up to ``timeout`` s for one."""
        raise NotImplementedError

    def _pool_answer(self, w: int) -> dict[int, dict] | None:
        """Read worker w's step answer (its rows are in the buffers); its non-empty infos by
        local index. A lost worker is replaced here (its envs truncated), or raises."""
        raise NotImplementedError

    def _pool_timed_out(self, flying: list[int]) -> None:
        """No answer within ``timeout``: break the batch and raise."""
        raise NotImplementedError

"""RayVecEnv's error handling: errors that name the actor and env, and replacing a lost actor.

An actor fails in one of three ways: an env of its block raises (its EnvGroup
names the env on the exception, which survives pickling), its process dies, or
it does not answer within ``timeout``. Each becomes a `RayWorkerError`
naming the actor, its block of envs and, when known, the env. A dead actor is
remembered (``_dead``) so that every later call says so at once, unless
``restart_on_error`` lets a new actor take its block (same_step and fast modes).

Examples:
    >>> err = RayWorkerError("Ray actor 1 (envs 2..3) died during step", 1, range(2, 4))
    >>> err.worker, list(err.env_ids), err.env_index
    (1, [2, 3], None)

`RayFaults` is a mixin of [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv]; it uses the
actors, blocks and links the driver keeps (see `marl_vec.vec.ray.vec_env`).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from marl_vec.core.episode import AutoresetMode
from marl_vec.core.group import rebuild_seed
from marl_vec.vec.ray.session import ray_module

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its remote tracebacks


class RayWorkerError(RuntimeError):
    """An actor failed: its env raised, it died, or it did not answer in time.

    Attributes:
        worker: index of the actor.
        env_ids: the global env indices it hosts.
        env_index: the global index of the env that raised, when known.
    """

    def __init__(self, message: str, worker: int, env_ids: range, env_index: int | None = None):
        super().__init__(message)
        self.worker = worker
        self.env_ids = env_ids
        self.env_index = env_index


class _Lost:
    """The result of a step whose actor died and may be replaced."""

    def __init__(self, error: RayWorkerError):
        self.error = error


class RayFaults:
    """Naming failures and replacing lost actors, for [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv]."""

    actors: list[Any]
    blocks: list[range]
    actor_restarts: list[int]
    restart_on_error: int
    _links: list[Any]
    _dead: dict[int, RayWorkerError]
    _mode: AutoresetMode
    _env_seed: int | None

    def _where(self, w: int) -> str:
        block = self.blocks[w]
        return f"Ray actor {w} (envs {block.start}..{block.stop - 1})"

    def _raised(self, w: int, what: str, env_index: int | None, text: str) -> RayWorkerError:
        """An env (or the group) of actor w raised; ``text`` carries the original traceback."""
        env = f", env {env_index}," if env_index is not None else ""
        return RayWorkerError(f"{self._where(w)}{env} raised during {what}:\n{text}", w, self.blocks[w], env_index)

    def _worker_error(self, w: int, what: str, exc: BaseException) -> RayWorkerError:
        ray = ray_module()
        block = self.blocks[w]
        where = self._where(w)
        if isinstance(exc, ray.exceptions.RayActorError):
            # At start, this is usually an env_fn that raised: Ray's text carries its traceback.
            err = RayWorkerError(f"{where} died during {what}: {_ANSI.sub('', str(exc))}", w, block)
            self._dead[w] = err
            return err
        if isinstance(exc, ray.exceptions.RayTaskError):
            # EnvGroup names the env on the original exception; it survives pickling.
            cause = getattr(exc, "cause", None)
            return self._raised(w, what, getattr(cause, "marl_vec_env_index", None), _ANSI.sub("", str(exc)))
        return RayWorkerError(f"{where} failed during {what}: {type(exc).__name__}: {exc}", w, block)

    def _check_alive(self, workers: Sequence[int]) -> None:
        for w in workers:
            if w in self._dead:
                raise RayWorkerError(f"{self._dead[w]}\n(the actor is gone; close() this RayVecEnv and make a new one)",
                                     w, self.blocks[w])

    def _may_replace(self, w: int, err: RayWorkerError) -> bool:
        """Whether lost actor w may be replaced; else say why on ``err``."""
        if not self.restart_on_error:
            return False
        if not self._mode.keeps_final:
            err.args = (f"{err.args[0]}\n(a lost actor is replaced only in the same_step and fast autoreset "
                        f"modes, not in {self._mode.value!r})",)
            return False
        if self.actor_restarts[w] >= self.restart_on_error:
            err.args = (f"{err.args[0]}\n(after {self.actor_restarts[w]} replacement(s) of this actor, "
                        f"its whole restart_on_error budget)",)
            return False
        return True

    def _new_actor_for_lost(self, w: int) -> range:
        """Kill lost actor w, drop its link and start a new, unlinked one over its block
        (seeded anew: `rebuild_seed`); returns the block."""
        self.actor_restarts[w] += 1
        try:
            ray_module().kill(self.actors[w])
        except Exception:  # already gone
            pass
        if self._links[w] is not None:
            self._links[w].close()
            self._links[w] = None
        block = self.blocks[w]
        self.actors[w] = self._new_actor(w, rebuild_seed(self._env_seed, block.start, self.actor_restarts[w]))
        del self._dead[w]
        return block

    def _replace_lost(self, w: int, err: RayWorkerError) -> dict[int, dict[str, Any]]:
        """Actor w died in a step: start a new one (linked again if it is on this machine);
        its envs end their episodes as truncated (`VecEnv._restart_block`)."""
        block = self._new_actor_for_lost(w)
        if self.buffers.shm_name is not None and self._local_actors([w]):
            self._links[w] = self._link(w)

        def reset() -> dict[int, dict[str, Any]]:
            self._send(w, "reset", (None, None))
            return self._receive([w], "restart")[w]

        return self._restart_block(block, reset, {"error": str(err), "actor_restarts": self.actor_restarts[w]})

"""RayVecEnv: EnvGroups in Ray actors, for batches larger than one machine.

Each actor hosts one :class:`~marl_vec.group.EnvGroup` over plain buffers that
hold only its block of envs. ``step_async`` sends every actor its slice of the
actions; ``step_wait`` gathers the blocks' arrays (plus the final rows of envs
that finished, and only the non-empty infos) and copies them into this
process's buffers. Stepping, autoreset, seeding and episode bookkeeping are the
EnvGroup's, so results are bitwise equal to :class:`DummyVecEnv`'s.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> fns = [lambda: gym.make("CartPole-v1")] * 4
    >>> with mv.RayVecEnv(fns, env_seed=0, num_workers=2) as venv:  # doctest: +SKIP
    ...     r = venv.reset()
    ...     r = venv.step(np.zeros((4, 1), dtype=np.int64))
    ...     r.obs.shape
    (4, 1, 4)

Cluster: with ``address=None`` and no Ray session in this process, a local
cluster is started (and shut down by the last ``close()``); ``address="auto"``
or ``"ray://host:10001"`` connects to a running one; a session the caller
already opened with ``ray.init`` is used as is and left open
(:mod:`marl_vec.vec.ray_session`).

This module is the driver side: options, placing the actors
(:mod:`marl_vec.vec.ray_actor`), the two transports (the same-node shared-memory
link of :mod:`marl_vec.vec.ray_link`, and Ray calls), and fault handling (errors
naming the actor and env, timeouts, replacing a lost actor). It imports those
three modules, the buffers, :class:`VecEnv` and the worker protocol; nothing
imports it but the backend factory.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import shutil
import time
from multiprocessing.connection import wait as _wait_any
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from marl_vec import spaces
from marl_vec.buffers import BatchBuffers
from marl_vec.episode import AutoresetMode
from marl_vec.group import rebuild_seed
from marl_vec.spec import SpecMismatchError
from marl_vec.state import with_state
from marl_vec.vec.base import VecEnv, parse_reward_dtype
from marl_vec.vec.pool import AsyncPool, _EnvFailed
from marl_vec.vec.ray_actor import FINAL_FIELDS, STEP_FIELDS, GroupHost
from marl_vec.vec.ray_session import acquire_session, driver_node, ray_module, release_session
from marl_vec.vec.worker import STEP, ObjectReply

_CLOSE = pickle.dumps(("close",))
TRANSPORTS = ("auto", "ray")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its remote tracebacks
_RAY_OPTIONS = ("address", "num_workers", "envs_per_worker", "num_cpus_per_worker", "resources_per_worker",
                "temp_dir", "timeout", "transport")


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


class RayVecEnv(AsyncPool, VecEnv):
    """Runs ``len(env_fns)`` envs in Ray actors, a contiguous block per actor.

    Args:
        env_fns: picklable zero-argument callables (``marl_vec.envs.make_env_fn``);
            they run on the actors' machines, where marl_vec and the env must be installed.
        env_seed: env i is first reset with ``env_seed + i`` (None: unseeded).
        autoreset: ``same_step`` (default), ``next_step``, ``disabled``, ``one_episode``, ``fast``.
        copy: return copies of the buffers (False: views that the next call overwrites).
        validate: check actions' shape, range and availability (in this process).
        restart_on_error: how many times each env may be rebuilt after it raised
            (by its actor's EnvGroup), and how many times a block's actor may be
            replaced after it died in a step (same_step and fast modes); 0 reports
            the first error.
        address: None starts a local cluster (unless this process already has a
            Ray session); ``"auto"`` or ``"ray://host:port"`` connects to one.
        num_workers: actors (default: one per CPU of the cluster, at most one per env).
        envs_per_worker: envs per actor, instead of ``num_workers``.
        num_cpus_per_worker: CPUs each actor reserves (Ray's logical resources).
        resources_per_worker: custom Ray resources each actor reserves, e.g. ``{"sc2": 1}``.
        temp_dir: where a local cluster keeps its files (default: Ray's, /tmp/ray).
        timeout: seconds to wait for an actor's answer before reporting it as hung.
        transport: ``"auto"`` (default): actors on this machine step in a shared-memory
            block and take their signals over a unix socket, the others answer Ray
            calls; ``"ray"``: every actor answers Ray calls (what crosses machines).
        ray_config: the same options as a mapping (the config file's ``vec.ray``);
            an option may be given here or as a keyword, not both.
        reward_dtype: ``"float32"`` or ``"float64"`` for the reward array; None
            (default): the family's (float64 for gymnasium envs, else float32).
        batch_size: envs per :meth:`recv` of the async pool (default ``num_envs``): any
            number in ``[1, num_envs]`` when every actor is linked (transport ``auto``, all
            on this machine), else a multiple of the actors' block size, since an actor
            answering Ray calls steps its whole block (see :mod:`marl_vec.vec.pool`).
        state: what the state holds: ``auto`` (default), ``env``, ``concat`` or ``none``
            (see :mod:`marl_vec.state`), applied where the actors build their envs.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        env_seed: int | None = 0,
        autoreset: AutoresetMode | str = AutoresetMode.SAME_STEP,
        copy: bool = True,
        validate: bool = True,
        stats_window: int = 100,
        restart_on_error: int = 0,
        *,
        address: str | None = None,
        num_workers: int | None = None,
        envs_per_worker: int | None = None,
        num_cpus_per_worker: float = 1.0,
        resources_per_worker: Mapping[str, float] | None = None,
        temp_dir: str | None = None,
        timeout: float = 600.0,
        transport: str = "auto",
        ray_config: Mapping[str, Any] | None = None,
        reward_dtype: str | None = None,
        batch_size: int | None = None,
        state: str = "auto",
    ):
        if not env_fns:
            raise ValueError("RayVecEnv needs at least one env_fn")
        env_fns = with_state(env_fns, state)  # an unknown mode fails before a cluster starts
        explicit = dict(address=address, num_workers=num_workers, envs_per_worker=envs_per_worker,
                        num_cpus_per_worker=num_cpus_per_worker, resources_per_worker=resources_per_worker,
                        temp_dir=temp_dir, timeout=timeout, transport=transport)
        opts = _merge_options(explicit, ray_config)
        if restart_on_error < 0:
            raise ValueError(f"restart_on_error must be >= 0, got {restart_on_error}")
        if opts["timeout"] is None or opts["timeout"] <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {opts['timeout']}")
        if opts["num_cpus_per_worker"] < 0:
            raise ValueError(f"num_cpus_per_worker must be >= 0, got {opts['num_cpus_per_worker']}")
        if opts["transport"] not in TRANSPORTS:
            raise ValueError(
                f"unknown transport {opts['transport']!r}; allowed: 'auto' (shared memory for actors on this "
                f"machine, Ray calls for the others) or 'ray' (Ray calls for every actor)"
            )
        self._mode = mode = AutoresetMode.parse(autoreset)
        self._reward_dtype = reward_dtype
        parse_reward_dtype(reward_dtype)  # fails before a cluster starts
        ray = ray_module()
        num_envs = len(env_fns)
        self.timeout = float(opts["timeout"])
        self.transport = opts["transport"]
        self.actors: list[Any] = []
        self._links: list[Any] = []  # per actor: its same-node Link, or None (Ray calls)
        self._socket_dir: str | None = None
        self._owns_session = False
        self._refs: dict[int, Any] = {}
        self._step_answers: dict[int, Any] = {}  # the current step's answers read so far
        self._dead: dict[int, RayWorkerError] = {}

        if opts["address"] is None and not ray.is_initialized():
            cpus = os.cpu_count() or 1
            workers = _block_count(num_envs, opts["num_workers"], opts["envs_per_worker"], cpus)
            # Ray's CPUs are logical: reserve enough that every actor can be placed.
            need = math.ceil(workers * opts["num_cpus_per_worker"])
            self._owns_session = acquire_session(None, max(cpus, need), opts["temp_dir"])
        else:
            self._owns_session = acquire_session(opts["address"], 0, opts["temp_dir"])
        try:
            cluster_cpus = int(ray.cluster_resources().get("CPU", 1))
            per = opts["num_cpus_per_worker"]
            default_workers = max(1, int(cluster_cpus // per)) if per > 0 else cluster_cpus
            workers = _block_count(num_envs, opts["num_workers"], opts["envs_per_worker"], default_workers)
            bounds = np.linspace(0, num_envs, workers + 1).astype(int).tolist() if opts["envs_per_worker"] is None \
                else [min(i * opts["envs_per_worker"], num_envs) for i in range(workers + 1)]
            self.blocks = [range(bounds[w], bounds[w + 1]) for w in range(workers)]
            self._init_pool(batch_size, num_envs, [(b.start, b.stop) for b in self.blocks])
            group_kwargs = {"restart_on_error": restart_on_error} if restart_on_error else {}
            self._actor_cls = ray.remote(GroupHost).options(
                num_cpus=per,
                resources=dict(opts["resources_per_worker"] or {}),
                max_restarts=0,
                scheduling_strategy="SPREAD",  # one actor per machine before two on one
            )
            self._env_fns, self._env_seed, self._group_kwargs = list(env_fns), env_seed, group_kwargs
            self.restart_on_error = restart_on_error
            self.actor_restarts = [0] * workers  # lost actors replaced, per block
            self._links = [None] * workers
            self.actors = [self._new_actor(w, env_seed) for w in range(workers)]
            self._asks = f"{per} CPU and resources {dict(opts['resources_per_worker'] or {})}"
            specs = self._gather([a.spec.remote() for a in self.actors], "start")
            for other in specs:  # envs of one actor's block that differ (GroupHost.spec)
                if isinstance(other, SpecMismatchError):
                    raise other
            spec = specs[0]
            for block, other in zip(self.blocks[1:], specs[1:]):
                spec.check_same(other, block.start)
            super().__init__(spec, num_envs, mode, copy, validate, stats_window, reward_dtype)
            self._here = driver_node(ray) if self.transport == "auto" else None
            local = self._local_actors(range(workers))
            # The batch lives in shared memory when some actor can map it.
            self.buffers = BatchBuffers(self.spec, num_envs, shared=bool(local))
            for w in local:
                self._links[w] = self._link(w)
            # Linked actors signal each env over their socket; the others answer one Ray call per block.
            self._pool_set_whole([w for w in range(workers) if self._links[w] is None],
                                 "a Ray actor answering Ray calls (transport='ray', or not on this machine) "
                                 "steps its whole block in one call")
        except BaseException:
            self._close()
            raise
        buf = self.buffers
        present = [a for name in STEP_FIELDS for a in buf.leaves(name)]
        # Per actor, the destination views of its block, built once (leaf by leaf, as the actor sends).
        self._dst = [tuple(a[b.start:b.stop] for a in present) for b in self.blocks]
        self._final_dst = tuple(a for name in FINAL_FIELDS for a in buf.leaves(name))
        self._act = [spaces.tree_map(lambda a, b=b: a[b.start:b.stop], buf.actions) for b in self.blocks]

    @property
    def linked(self) -> list[bool]:
        """Per actor: True where it steps over the same-node shared-memory link."""
        return [link is not None for link in self._links]

    def _new_actor(self, w: int, env_seed: int | None) -> Any:
        block = self.blocks[w]
        return self._actor_cls.remote([self._env_fns[i] for i in block], block.start, self._mode.value,
                                      env_seed, self._group_kwargs, self._reward_dtype)

    # -- the same-node link ----------------------------------------------------------

    def _local_actors(self, workers: Sequence[int]) -> list[int]:
        """Those of ``workers`` whose actor runs on this process's machine."""
        if self._here is None:
            return []
        nodes = self._gather([self.actors[w].node_id.remote() for w in workers], "start", workers)
        return [w for w, node in zip(workers, nodes) if node == self._here]

    def _link(self, w: int) -> Any:
        """Link actor w to the shared block; None if it cannot map it (it keeps using Ray calls)."""
        from marl_vec.vec.ray_link import Link, socket_dir

        if self._socket_dir is None:
            self._socket_dir = socket_dir()
        path = os.path.join(self._socket_dir, f"actor{w}.{self.actor_restarts[w]}.sock")
        authkey = os.urandom(16)
        ref = self.actors[w].link.remote(self.buffers.shm_name, self.num_envs, path, authkey)
        address = self._gather([ref], "start", [w])[0]
        return None if address is None else Link.connect(address, authkey)

    # -- talking to actors ------------------------------------------------------------

    def _send(self, w: int, command: str, args: tuple = ()) -> None:
        """Start ``command`` on actor w: over its link, or as a Ray call (collect with :meth:`_receive`)."""
        link = self._links[w]
        if link is None:
            self._refs[w] = getattr(self.actors[w], command).remote(*args)
            return
        # Over the link, a step's actions are in shared memory already: one byte says "go"
        # (object actions, never in shared memory, go with it).
        if command == "step" and self.buffers.object_actions:
            block = self.blocks[w]
            args = (self.buffers.object_rows(block.start, block.stop, self.buffers.object_actions),)
        elif command == "step":
            args = ()
        data = STEP if command == "step" and not args else pickle.dumps((command, *args),
                                                                           protocol=pickle.HIGHEST_PROTOCOL)
        try:
            link.send(data, self.timeout)
        except (OSError, EOFError):  # the actor is gone; _receive reports it
            self._refs[w] = None
        except TimeoutError:
            err = RayWorkerError(f"{self._where(w)} did not answer an interrupted {command} within "
                                 f"{self.timeout:g} s", w, self.blocks[w])
            self._dead[w] = err
            raise err from None

    def _receive(self, workers: Sequence[int], command: str, replace: bool = False,
                 into: dict[int, Any] | None = None) -> dict[int, Any]:
        """Wait for actor w's answer, for every w in ``workers``; the first error is raised
        after every link has answered, so no answer is left behind to be read out of turn.

        Step and reset answers come back as their infos by local index, the arrays
        already in ``self.buffers``. ``into``: where answers go as they arrive (an
        error as its RayWorkerError), so that a wait cut short by an interrupt can be
        resumed: actors already in it are not waited for again.
        """
        results: dict[int, Any] = {} if into is None else into
        links = self._links
        linked = [w for w in workers if links[w] is not None and w not in results]
        remote = [w for w in workers if links[w] is None and w not in results]
        if linked:
            self._receive_links(linked, command, replace, results)
        if remote:
            # A ref is dropped only once its answer is in: an interrupted wait leaves it owed.
            refs = [self._refs[w] for w in remote]
            try:
                answers = self._gather(refs, command, remote, replace)
            except RayWorkerError as exc:
                for w in remote:
                    self._refs.pop(w, None)
                    results.setdefault(w, exc)
            else:
                for w, answer in zip(remote, answers):
                    if command in ("step", "reset", "restart") and not isinstance(answer, _Lost):
                        answer = self._copy_in(w, answer)
                    results[w] = answer
                    del self._refs[w]
        for answer in results.values():
            if isinstance(answer, RayWorkerError):
                raise answer
        return results

    def _receive_links(self, workers: Sequence[int], command: str, replace: bool, results: dict[int, Any]) -> None:
        waiting = {}
        for w in workers:
            if w in self._refs and self._refs[w] is None:  # sending failed: it died
                del self._refs[w]
                self._lost(w, command, replace, results)
            else:
                waiting[self._links[w].conn] = w
        deadline = time.monotonic() + self.timeout
        while waiting:
            ready = _wait_any(list(waiting), max(0.0, deadline - time.monotonic()))
            if not ready:
                late = sorted(waiting.values())
                err = RayWorkerError(
                    f"{self._where(late[0])} did not answer {command} within {self.timeout:g} s; "
                    "raise `timeout` if its envs are slow",
                    late[0], self.blocks[late[0]],
                )
                for w in late:  # a late answer would be read as the next command's
                    self._dead[w] = err
                raise err
            for conn in ready:
                w = waiting.pop(conn)
                try:
                    status, payload = self._links[w].receive()
                except (EOFError, OSError):
                    self._lost(w, command, replace, results)
                    continue
                if status == "error":
                    env_index, _what, text = payload
                    results[w] = self._raised(w, command, env_index, text)
                else:
                    if isinstance(payload, ObjectReply):  # object leaves of its block (not shared)
                        self.buffers.write_object_rows(self.blocks[w].start, self.buffers.object_fields,
                                                       payload.rows)
                        payload = payload.payload
                    results[w] = (payload or {}) if command in ("step", "reset", "restart") else payload

    def _lost(self, w: int, command: str, replace: bool, results: dict[int, Any]) -> None:
        """Linked actor w died: its result is a :class:`_Lost` if it may be replaced, else the error."""
        err = RayWorkerError(f"{self._where(w)} died during {command}: its process closed the shared-memory link",
                             w, self.blocks[w])
        self._dead[w] = err
        results[w] = _Lost(err) if replace and self._may_replace(w, err) else err

    def _owes_answers(self) -> bool:
        """Some live actor still owes an answer (a call was cut short by an interrupt)."""
        dead = self._dead
        if any(w not in dead for w in self._refs):
            return True
        return any(link is not None and link.owed and w not in dead for w, link in enumerate(self._links))

    def _drain(self) -> None:
        """Read and drop the answers owed to an interrupted call other than a step."""
        dead = self._dead
        owed = [w for w in range(len(self.actors)) if w not in dead and
                (w in self._refs or (self._links[w] is not None and self._links[w].owed))]
        try:
            self._receive(owed, "drain")
        except RayWorkerError:  # the dropped call's own error: nobody waits for it any more
            pass

    def _where(self, w: int) -> str:
        block = self.blocks[w]
        return f"Ray actor {w} (envs {block.start}..{block.stop - 1})"

    def _gather(self, refs: list[Any], what: str, workers: Sequence[int] | None = None,
                replace: bool = False) -> list[Any]:
        """``ray.get`` with a bounded wait; any failure becomes a RayWorkerError naming the actor.

        ``replace``: an actor found dead is replaced when ``restart_on_error`` allows;
        its result is then a :class:`_Lost` for the caller to report.
        """
        ray = ray_module()
        workers = list(range(len(refs))) if workers is None else list(workers)
        try:
            return ray.get(refs, timeout=self.timeout)
        except Exception:  # find out which actor failed and why; re-raised below
            pass
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        hint = ""
        if what == "start":  # an actor that cannot be placed waits forever: say what it asked for
            hint = f"cluster resources: {ray.cluster_resources()}; each actor asks for {self._asks}"
        ready_ids = {r.hex() for r in ready}
        results: list[Any] = [None] * len(refs)
        for k, (w, ref) in enumerate(zip(workers, refs)):
            if ref.hex() not in ready_ids:
                continue
            try:
                results[k] = ray.get(ref, timeout=0)
            except Exception as exc:  # the actor's own error, with its remote traceback
                err = self._worker_error(w, what, exc)
                if not (replace and w in self._dead and self._may_replace(w, err)):
                    raise err from exc
                results[k] = _Lost(err)
        for w, ref in zip(workers, refs):
            if ref.hex() not in ready_ids:
                extra = f" ({hint})" if hint else ""
                raise RayWorkerError(
                    f"{self._where(w)} did not answer {what} within {self.timeout:g} s{extra}; "
                    "raise `timeout` if its envs are slow",
                    w, self.blocks[w],
                )
        return results

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
        (seeded anew: :func:`rebuild_seed`); returns the block."""
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
        its envs end their episodes as truncated (:meth:`VecEnv._restart_block`)."""
        block = self._new_actor_for_lost(w)
        if self.buffers.shm_name is not None and self._local_actors([w]):
            self._links[w] = self._link(w)

        def reset() -> dict[int, dict[str, Any]]:
            self._send(w, "reset", (None, None))
            return self._receive([w], "restart")[w]

        return self._restart_block(block, reset, {"error": str(err), "actor_restarts": self.actor_restarts[w]})

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

    def _raised(self, w: int, what: str, env_index: int | None, text: str) -> RayWorkerError:
        """An env (or the group) of actor w raised; ``text`` carries the original traceback."""
        env = f", env {env_index}," if env_index is not None else ""
        return RayWorkerError(f"{self._where(w)}{env} raised during {what}:\n{text}", w, self.blocks[w], env_index)

    def _check_alive(self, workers: Sequence[int]) -> None:
        for w in workers:
            if w in self._dead:
                raise RayWorkerError(f"{self._dead[w]}\n(the actor is gone; close() this RayVecEnv and make a new one)",
                                     w, self.blocks[w])

    def _copy_in(self, w: int, result: tuple) -> dict[int, dict[str, Any]]:
        """Copy a Ray-called actor's arrays into its rows of this process's buffers; return its infos.

        The arrays Ray deserialised are the only per-step allocation, and they are
        not kept: the buffers, allocated once, are what the VecEnv returns.
        """
        out, finals, infos = result
        for dst, src in zip(self._dst[w], out):
            np.copyto(dst, src)
        if finals is not None:
            rows, arrays = finals
            rows = rows + self.blocks[w].start
            for dst, src in zip(self._final_dst, arrays):
                dst[rows] = src
        return infos

    def _owner(self, indices: list[int]) -> dict[int, list[tuple[int, int]]]:
        """Actor -> [(position in ``indices``, local env index)], in actor order."""
        starts = [b.start for b in self.blocks]
        by_actor: dict[int, list[tuple[int, int]]] = {}
        for pos, i in enumerate(indices):
            w = int(np.searchsorted(starts, i, side="right")) - 1
            by_actor.setdefault(w, []).append((pos, i - starts[w]))
        return by_actor

    # -- VecEnv -----------------------------------------------------------------------

    def _reset(self, seed: int | None, env_ids: list[int] | None) -> list[dict[str, Any]]:
        if env_ids is None:
            workers = list(range(len(self.actors)))
            locals_: list[list[int] | None] = [None] * len(workers)
        else:
            by_actor = self._owner(env_ids)
            workers = sorted(by_actor)
            locals_ = [[j for _, j in by_actor[w]] for w in workers]
        self._check_alive(workers)
        for w, ids in zip(workers, locals_):
            self._send(w, "reset", (seed, ids))
        results = self._receive(workers, "reset")
        self._pool_restart()
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for w in workers:
            start = self.blocks[w].start
            for j, info in results[w].items():
                infos[start + j] = info
        return infos

    def _step_async(self) -> None:
        self._check_alive(range(len(self.actors)))
        for w, act in enumerate(self._act):
            self._send(w, "step", (act,))

    def _step_wait(self) -> list[dict[str, Any]]:
        # Answers read before an interrupt stay in self._step_answers; a later call
        # waits only for the rest.
        results = self._step_answers
        try:
            self._receive(range(len(self.actors)), "step", replace=True, into=results)
        finally:
            if not self._owes_answers():
                self._step_answers = {}
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for w, result in sorted(results.items()):
            start = self.blocks[w].start
            block_infos = self._replace_lost(w, result.error) if isinstance(result, _Lost) else result
            for j, info in block_infos.items():
                infos[start + j] = info
        self._pool_restart()
        return infos

    def _check_idle(self, call: str) -> None:
        self._check_open()
        self._pool_drain()  # pool steps in flight finish first; their results are dropped
        super()._check_idle(call)

    # -- the async pool (marl_vec.vec.pool) -----------------------------------------

    def _pool_check_usable(self) -> None:
        self._check_alive(range(len(self.actors)))

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        self._check_alive([w])
        link = self._links[w]
        if link is None:  # a Ray call: always the whole block
            self._send(w, "step", (self._act[w],))
            return
        try:  # the worker protocol's pool step; its answers are read by _pool_answer, not the Link
            link.conn.send_bytes(self._pool_step_command(w, local_ids))
        except OSError:  # the actor is gone: its link reads end of file
            pass

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
            result = self._receive([w], "step", replace=True)[w]
            infos = self._replace_lost(w, result.error) if isinstance(result, _Lost) else result
        except RayWorkerError as exc:  # its block's envs leave the pool until reset()
            for _ in range(len(self._pool_flying[w])):
                self._pool_fail(w)
            raise _EnvFailed(exc) from None
        start = self.blocks[w].start
        for i in list(self._pool_flying[w]):  # the block, in order
            self._pool_complete(w, infos.get(i - start))

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

    def _per_actor(self, method: str, indices: list[int], *args: Any, values: list[Any] | None = None) -> list[Any]:
        by_actor = self._owner(indices)
        workers = sorted(by_actor)
        self._check_alive(workers)
        for w in workers:
            local = [j for _, j in by_actor[w]]
            if values is None:
                self._send(w, method, (*args, local))
            else:
                self._send(w, method, (*args, [values[pos] for pos, _ in by_actor[w]], local))
        results = self._receive(workers, method)
        out: list[Any] = [None] * len(indices)
        for w in workers:
            if results[w] is None:
                continue
            for (pos, _), value in zip(by_actor[w], results[w]):
                out[pos] = value
        return out

    def _call(self, name: str, args: tuple, kwargs: dict, indices: list[int]) -> list[Any]:
        return self._per_actor("call", indices, name, args, kwargs)

    def _get_attr(self, name: str, indices: list[int]) -> list[Any]:
        return self._per_actor("get_attr", indices, name)

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self._per_actor("set_attr", indices, name, values=values)

    def _render(self) -> list[Any]:
        workers = range(len(self.actors))
        self._check_alive(workers)
        for w in workers:
            self._send(w, "render")
        results = self._receive(workers, "render")
        return [frame for w in workers for frame in results[w]]

    def _close(self) -> None:
        actors, self.actors = getattr(self, "actors", []), []
        links, self._links = getattr(self, "_links", []), []
        if actors:
            ray = ray_module()
            dead = getattr(self, "_dead", {})
            # Let live actors close their envs (engines, game processes), briefly, then end them.
            refs, conns = [], []
            for w, actor in enumerate(actors):
                if w in dead:
                    continue
                link = links[w] if w < len(links) else None
                if link is None:
                    refs.append(actor.close.remote())
                    continue
                try:
                    link.send(_CLOSE, timeout=1.0)
                    conns.append(link.conn)
                except (OSError, EOFError, TimeoutError):  # gone or stuck: it is killed below
                    pass
            patience = min(getattr(self, "timeout", 30.0), 30.0)
            deadline = time.monotonic() + patience
            try:
                while conns and time.monotonic() < deadline:
                    for conn in _wait_any(conns, max(0.0, deadline - time.monotonic())):
                        conns.remove(conn)
                ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # a dead actor must not stop the others from being killed
                pass
            for actor in actors:
                try:
                    ray.kill(actor)
                except Exception:  # already gone
                    pass
        for link in links:
            if link is not None:
                link.close()
        buffers = getattr(self, "buffers", None)
        if buffers is not None:
            buffers.close()  # a shared block is unlinked here
        socket_dir, self._socket_dir = getattr(self, "_socket_dir", None), None
        if socket_dir is not None:
            shutil.rmtree(socket_dir, ignore_errors=True)
        if getattr(self, "_owns_session", False):
            self._owns_session = False
            release_session()


def _merge_options(explicit: dict[str, Any], ray_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword options, overridden by ``ray_config`` where a keyword was left at its default."""
    if not ray_config:
        return explicit
    unknown = sorted(set(ray_config) - set(_RAY_OPTIONS))
    if unknown:
        raise ValueError(f"unknown ray_config keys {unknown}; allowed: {', '.join(_RAY_OPTIONS)}")
    defaults = {"address": None, "num_workers": None, "envs_per_worker": None, "num_cpus_per_worker": 1.0,
                "resources_per_worker": None, "temp_dir": None, "timeout": 600.0, "transport": "auto"}
    merged = dict(explicit)
    for key, value in ray_config.items():
        if explicit[key] != defaults[key] and value != defaults[key] and value != explicit[key]:
            raise ValueError(f"ray option {key!r} given both as a keyword ({explicit[key]!r}) and in ray_config ({value!r})")
        if value is not None and explicit[key] == defaults[key]:
            merged[key] = value
    return merged


def _block_count(num_envs: int, num_workers: int | None, envs_per_worker: int | None, default: int) -> int:
    """How many actors: from envs_per_worker, num_workers, or the default; never more than envs."""
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if envs_per_worker is not None:
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        workers = math.ceil(num_envs / envs_per_worker)
        if num_workers is not None and num_workers != workers:
            raise ValueError(
                f"num_workers={num_workers} and envs_per_worker={envs_per_worker} disagree for {num_envs} envs "
                f"(that would be {workers} workers); give one of them"
            )
        return workers
    if num_workers is not None:
        if num_workers > num_envs:
            raise ValueError(f"num_workers={num_workers} is more than num_envs={num_envs}; allowed: 1..{num_envs}")
        return num_workers
    return max(1, min(num_envs, default))

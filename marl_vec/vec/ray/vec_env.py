"""RayVecEnv: EnvGroups in Ray actors, for batches larger than one machine.

Each actor hosts one `EnvGroup` over plain buffers that
hold only its block of envs. ``step_async`` sends every actor its slice of the
actions; ``step_wait`` gathers the blocks' arrays (plus the final rows of envs
that finished, and only the non-empty infos) and copies them into this
process's buffers. Stepping, autoreset, seeding and episode bookkeeping are the
EnvGroup's, so results are bitwise equal to [`DummyVecEnv`][marl_vec.vec.dummy.DummyVecEnv]'s.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> fns = [lambda: gym.make("CartPole-v1")] * 4
    >>> with mv.RayVecEnv(fns, env_seed=0, num_workers=2) as venv:
    ...     r = venv.reset()
    ...     r = venv.step(np.zeros((4, 1), dtype=np.int64))
    ...     r.obs.shape
    (4, 1, 4)

Cluster: with ``address=None`` and no Ray session in this process, a local
cluster is started (and shut down by the last ``close()``); ``address="auto"``
or ``"ray://host:10001"`` connects to a running one; a session the caller
already opened with ``ray.init`` is used as is and left open
(`marl_vec.vec.ray.session`).

This module is the driver side's lifecycle: checking the options, placing the
actors (`marl_vec.vec.ray.actor`), the VecEnv calls, and closing. The rest
of the driver is in modules of its own, one idea each:

- `marl_vec.vec.ray.options`: keyword options and ``ray_config``, how many actors;
- `marl_vec.vec.ray.transport`: the two transports (the same-node shared-memory
  link of `marl_vec.vec.ray.link`, and Ray calls);
- `marl_vec.vec.ray.faults`: errors naming the actor and env, timeouts, replacing a lost actor;
- `marl_vec.vec.ray.pool`: the async pool's hooks (`marl_vec.vec.pool`);
- `marl_vec.vec.ray.session`: starting, joining and ending the Ray session.

Nothing imports this module but the backend factory.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import time
from multiprocessing.connection import wait as _wait_any
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from marl_vec.vec.device_arrays import HostOnlyError, refuse_env_device
from marl_vec.core import spaces
from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import SameEnvError, SetupError
from marl_vec.core.spec import SpecMismatchError
from marl_vec.vec.base import VecEnv, check_backend_args
from marl_vec.vec.pool import AsyncPool
from marl_vec.vec.ray.actor import FINAL_FIELDS, STEP_FIELDS, FailedStep, GroupHost
from marl_vec.vec.ray.faults import RayFaults, RayWorkerError, _Lost
from marl_vec.vec.ray.options import TRANSPORTS, _block_count, _merge_options
from marl_vec.vec.ray.pool import RayPool
from marl_vec.vec.ray.session import acquire_session, driver_node, ray_module, release_session
from marl_vec.vec.ray.transport import RayTransport

__all__ = ["RayVecEnv", "RayWorkerError", "TRANSPORTS"]

_CLOSE = pickle.dumps(("close",))


class RayVecEnv(RayPool, RayTransport, RayFaults, AsyncPool, VecEnv):
    """Runs ``len(env_fns)`` envs in Ray actors, a contiguous block per actor.

    Args:
        env_fns: picklable zero-argument callables (``marl_vec.envs.make_env_fn``);
            they run on the actors' machines, where marl_vec and the env must be installed.
        env_seed: env i is first reset with ``env_seed + i`` (None: unseeded).
        autoreset: ``same_step`` (default), ``next_step``, ``disabled``, ``one_episode``, ``fast``.
        copy: return copies of the buffers (False: views that the next call overwrites).
        validate: check actions' shape, range and availability (in this process).
        stats_window: how many of the last finished episodes ``episode_statistics()`` averages over.
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
        batch_size: envs per `recv` of the async pool (default ``num_envs``): any
            number in ``[1, num_envs]`` when every actor is linked (transport ``auto``, all
            on this machine), else a multiple of the actors' block size, since an actor
            answering Ray calls steps its whole block (see `marl_vec.vec.pool`).
        state: what the state holds: ``auto`` (default), ``env``, ``concat`` or ``none``
            (see `marl_vec.core.state`), applied where the actors build their envs.
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
        env_fns, mode = check_backend_args("RayVecEnv", env_fns, state, autoreset, restart_on_error, reward_dtype)
        explicit = dict(address=address, num_workers=num_workers, envs_per_worker=envs_per_worker,
                        num_cpus_per_worker=num_cpus_per_worker, resources_per_worker=resources_per_worker,
                        temp_dir=temp_dir, timeout=timeout, transport=transport)
        opts = _merge_options(explicit, ray_config)
        if opts["timeout"] is None or opts["timeout"] <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {opts['timeout']}")
        if opts["num_cpus_per_worker"] < 0:
            raise ValueError(f"num_cpus_per_worker must be >= 0, got {opts['num_cpus_per_worker']}")
        if opts["transport"] not in TRANSPORTS:
            raise ValueError(
                f"unknown transport {opts['transport']!r}; allowed: 'auto' (shared memory for actors on this "
                f"machine, Ray calls for the others) or 'ray' (Ray calls for every actor)"
            )
        self._mode = mode
        self._reward_dtype = reward_dtype
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
            for other in specs:  # envs of one actor's block that differ, are one object, or could not be made
                if isinstance(other, (SpecMismatchError, SameEnvError, SetupError, HostOnlyError)):
                    raise other
            spec = specs[0]
            for block, other in zip(self.blocks[1:], specs[1:]):
                spec.check_same(other, block.start)
            refuse_env_device("RayVecEnv", spec)
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
        self._pool_restart(env_ids)
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
        failed: RayWorkerError | None = None
        for w, result in sorted(results.items()):
            start = self.blocks[w].start
            block_infos = self._replace_lost(w, result.error) if isinstance(result, _Lost) else result
            for j, info in block_infos.items():
                if isinstance(info, FailedStep):  # its block's rows are in the buffers: raised below
                    failed = failed or self._raised(w, "step", info.env_index, info.text)
                else:
                    infos[start + j] = info
        if failed is not None:  # as SubprocVecEnv: the pool stays empty until reset() or step()
            raise failed
        self._pool_restart(step=True)
        return infos

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

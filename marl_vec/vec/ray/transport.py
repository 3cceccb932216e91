"""RayVecEnv's transports: how the driver talks to its actors.

Two ways, chosen per actor (``transport="auto"``):

- the same-node **link** (`marl_vec.vec.ray.link`): an actor on this
  machine maps the batch's shared-memory block and takes its commands over a
  unix socket; a step sends one byte and gets back only the non-empty infos;
- **Ray calls**: every other actor (or all, with ``transport="ray"``) answers a
  remote call with its block's arrays, which `RayTransport._copy_in`
  copies into this process's buffers.

Every wait is bounded by ``timeout``; an answer cut short by an interrupt is
kept (``into``) or read and dropped later (`RayTransport._drain`), so no
answer is ever read as the next command's.

Example (the driver sends, then receives, whatever the transport):

    ```pycon
    >>> venv._send(0, "reset", (None, None))
    >>> venv._receive([0], "reset")
    {0: {}}
    ```

`RayTransport` is a mixin of [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv]; errors are
named by `RayFaults`.
"""

from __future__ import annotations

import os
import pickle
import time
from multiprocessing.connection import wait as _wait_any
from typing import Any, Sequence

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.vec.ray.actor import COMMANDS
from marl_vec.vec.ray.faults import RayWorkerError, _Lost
from marl_vec.vec.ray.session import ray_module
from marl_vec.vec.worker import STEP, ObjectReply


class RayTransport:
    """Sending commands to actors and gathering their answers, for [`RayVecEnv`][marl_vec.vec.ray.vec_env.RayVecEnv]."""

    actors: list[Any]
    blocks: list[range]
    buffers: BatchBuffers
    num_envs: int
    timeout: float
    actor_restarts: list[int]
    _links: list[Any]  # per actor: its same-node Link, or None (Ray calls)
    _refs: dict[int, Any]  # per actor: the Ray call (ref) whose answer is owed; None: a link's send failed
    _dead: dict[int, RayWorkerError]
    _here: Any
    _socket_dir: str | None
    _asks: str
    _dst: list[tuple]
    _final_dst: tuple

    def _local_actors(self, workers: Sequence[int]) -> list[int]:
        """Those of ``workers`` whose actor runs on this process's machine."""
        if self._here is None:
            return []
        nodes = self._gather([self.actors[w].node_id.remote() for w in workers], "start", workers)
        return [w for w, node in zip(workers, nodes) if node == self._here]

    def _link(self, w: int) -> Any:
        """Link actor w to the shared block; None if it cannot map it (it keeps using Ray calls)."""
        from marl_vec.vec.ray.link import Link, socket_dir

        if self._socket_dir is None:
            self._socket_dir = socket_dir()
        path = os.path.join(self._socket_dir, f"actor{w}.{self.actor_restarts[w]}.sock")
        authkey = os.urandom(16)
        ref = self.actors[w].link.remote(self.buffers.shm_name, self.num_envs, path, authkey)
        address = self._gather([ref], "start", [w])[0]
        return None if address is None else Link.connect(address, authkey)

    def _send(self, w: int, command: str, args: tuple = ()) -> None:
        """Start ``command`` on actor w: over its link, or as a Ray call (collect with `_receive`)."""
        link = self._links[w]
        if link is None:
            actor = self.actors[w]
            self._refs[w] = actor.command.remote(command, args) if command in COMMANDS \
                else getattr(actor, command).remote(*args)
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
                # An actor's own error comes back in its place: the other actors' answers
                # (a step's rows) still reach the buffers, then the first error is raised.
                answers = self._gather(refs, command, remote, replace, errors_in_place=True)
            except RayWorkerError as exc:
                for w in remote:
                    self._refs.pop(w, None)
                    results.setdefault(w, exc)
            else:
                for w, answer in zip(remote, answers):
                    if command in ("step", "reset", "restart") and not isinstance(answer, (_Lost, RayWorkerError)):
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
        """Linked actor w died: its result is a `_Lost` if it may be replaced, else the error."""
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

    def _gather(self, refs: list[Any], what: str, workers: Sequence[int] | None = None,
                replace: bool = False, errors_in_place: bool = False) -> list[Any]:
        """``ray.get`` with a bounded wait; any failure becomes a RayWorkerError naming the actor.

        ``replace``: an actor found dead is replaced when ``restart_on_error`` allows;
        its result is then a `_Lost` for the caller to report.
        ``errors_in_place``: an actor's error is its result (the caller raises it), not raised
        here, so that the other actors' answers are read; a timeout is raised all the same.
        """
        ray = ray_module()
        workers = list(range(len(refs))) if workers is None else list(workers)
        deadline = time.monotonic() + self.timeout
        try:
            return ray.get(refs, timeout=self.timeout)
        except Exception:  # find out which actor failed and why; re-raised below
            pass
        # ray.get raises at the first failed ref, while the other actors may still be working:
        # wait for them up to the same deadline, so that a dead actor is not reported as a
        # healthy one's timeout.
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
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
                if replace and w in self._dead and self._may_replace(w, err):
                    results[k] = _Lost(err)
                elif errors_in_place:
                    err.__cause__ = exc
                    results[k] = err
                else:
                    raise err from exc
        for w, ref in zip(workers, refs):
            if ref.hex() not in ready_ids:
                extra = f" ({hint})" if hint else ""
                raise RayWorkerError(
                    f"{self._where(w)} did not answer {what} within {self.timeout:g} s{extra}; "
                    "raise `timeout` if its envs are slow",
                    w, self.blocks[w],
                )
        return results

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

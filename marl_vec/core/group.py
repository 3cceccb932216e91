"""EnvGroup: the one stepping loop, shared by every backend.

A group owns k adapters and steps them in turn over a contiguous row range of
the batch buffers. Autoreset, seeding and episode bookkeeping happen here and
nowhere else, so DummyVecEnv, SubprocVecEnv workers and Ray actors behave
bit-for-bit alike.

The hot path (``step`` when no env is waiting on its autoreset) hands the
whole group to the adapters' `GroupStepper` (by
default one adapter call per env) and then makes a handful of whole-group numpy
operations with preallocated outputs.
"""

from __future__ import annotations

import copy as _copy
import traceback
from typing import Any, Callable, Sequence, cast

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.adapter import GroupStepper, MultiAgentEnv, check_distinct_envs, require_adapter
from marl_vec.core.episode import AutoresetMode, EpisodeTracker
from marl_vec.core.errors import MissingAttribute
from marl_vec.core.group_errors import failed_index, rebuild_seed, settle_stepped

EnvFn = Callable[[], Any]

# At an episode end ``info["episode"]`` is marl_vec's summary; an env that reports its
# own ``"episode"`` there (gymnasium's RecordEpisodeStatistics) finds it under this key.
ENV_EPISODE_KEY = "env_episode"


class EnvFinishedError(RuntimeError):
    """Stepping an env that finished its episode under ``autoreset='disabled'``."""

    @classmethod
    def for_env(cls, index: int) -> "EnvFinishedError":
        return cls(
            f"env {index} finished its episode and autoreset='disabled'; "
            f"call reset(env_ids=[{index}]) before stepping it again"
        )


class EnvGroup:
    """Steps ``len(env_fns)`` envs over rows ``[start, start + k)`` of ``buffers``.

    Args:
        env_fns: adapter factories: zero-argument callables, each returning a new adapter
            (a backend wraps users' env_fns with ``marl_vec.envs.registry.adapter_fns``).
        buffers: the batch buffers (in a worker: attached to the shared block).
        start: global index of this group's first env (for seeds and messages).
        autoreset: an [`AutoresetMode`][marl_vec.core.episode.AutoresetMode].
        env_seed: env ``start + j`` is first reset with ``env_seed + start + j``
            (None: unseeded), however that first reset is reached.
        row_offset: global index of row 0 of ``buffers`` (0: the buffers hold the
            whole batch; a Ray actor's buffers hold only its own block).
        adapters: adapters already built from ``env_fns`` (else they are built here).
        restart_on_error: per-env retry budget. When an env's ``step`` or ``reset``
            raises and the env has restarted fewer than this many times, it is closed,
            rebuilt from its env_fn, bound to the same row and reset (with a seed
            derived from ``env_seed``, its index and its restart count); a failed step
            ends the episode as truncated for every agent with ``infos[j]["restarted"]``
            True, and the summary of the episode in which it restarted counts them
            (``restarts``). Otherwise the original
            exception propagates, with ``marl_vec_env_index`` set and a note naming the env.

    Examples:
        >>> import gymnasium as gym
        >>> from marl_vec.envs.registry import adapter_fns
        >>> fns = adapter_fns([lambda: gym.make("CartPole-v1")] * 2)
        >>> buf = BatchBuffers(fns[0]().spec, 2)
        >>> group = EnvGroup(fns, buf, restart_on_error=1)
        >>> infos = group.reset(); infos = group.step(); buf.obs.shape
        (2, 1, 4)
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        buffers: BatchBuffers,
        start: int = 0,
        autoreset: AutoresetMode | str = AutoresetMode.SAME_STEP,
        env_seed: int | None = 0,
        adapters: Sequence[MultiAgentEnv] | None = None,
        row_offset: int = 0,
        restart_on_error: int = 0,
    ):
        if int(restart_on_error) < 0:
            raise ValueError(f"restart_on_error must be a number of restarts >= 0, got {restart_on_error}")
        self.restart_on_error = int(restart_on_error)
        self.mode = AutoresetMode.parse(autoreset)
        self._keeps_final = self.mode.keeps_final  # read at every episode end
        self._fast = self.mode is AutoresetMode.FAST
        self.start = start
        self.env_seed = env_seed
        self.buffers = buffers
        self.env_fns = list(env_fns)
        self.adapters: list[MultiAgentEnv] = (
            list(adapters) if adapters is not None else [require_adapter(fn()) for fn in self.env_fns]
        )
        check_distinct_envs(self.adapters, start)
        k = len(self.adapters)
        stop = start + k
        self._row_offset = row_offset
        spec = buffers.spec
        self._state_is_obs = spec.state_is_obs
        for j, adapter in enumerate(self.adapters):
            spec.check_same(adapter.spec, start + j)
        if self.mode is AutoresetMode.FAST and not spec.snapshots:
            raise ValueError(
                f"autoreset='fast' needs an adapter that can snapshot and restore its state; "
                f"{type(self.adapters[0]).__name__} cannot. Use 'same_step' instead."
            )
        first, last = start - row_offset, stop - row_offset
        self._first, self._last = first, last
        self._rows = buffers.rows(first, last)
        for adapter, row in zip(self.adapters, self._rows):
            adapter.bind(adapter.own_row(row))
        # Group-wide views: one numpy call covers all k envs.
        self._block = buffers.block(first, last)
        self.actions = self._block.actions
        self.reward = self._block.reward
        self.terminated = self._block.terminated
        self.truncated = self._block.truncated
        self.done = buffers.done[first:last]
        self._ended = np.zeros_like(self.terminated)
        self._ended_rows = list(self._ended)  # step_env's per-env views, made once
        # One agent: done is its flags or-ed, written through a (k, 1) view of done.
        self._done_column = self.done[:, None] if spec.n_agents == 1 else None
        # same_step, fast: each env's (final_*, current) row pairs of the fields kept at
        # an episode's end (final_state is final_obs's memory where the state is the
        # observations). A masked copy over the whole group would cost more.
        # Dict/Tuple observations: a pair per leaf; no state pair without a state.
        names = ["obs", *([] if self._state_is_obs or buffers.state is None else ["state"]), "avail_actions"]
        pairs = [(final, current) for name in names
                 for final, current in zip(buffers.leaves("final_" + name), buffers.leaves(name))]
        # final_acting: the agent to move (turn-based games) or agent_mask (the others).
        pairs.append((buffers.final_acting, buffers.movers()))
        self._final_rows = [[(final[g, ...], current[g, ...]) for final, current in pairs]
                            for g in range(first, last)]
        self._stepper = self._make_stepper()
        refusal = self._stepper.autoreset_error(self.mode.value)
        if refusal is not None:
            raise ValueError(refusal)
        self.episodes = EpisodeTracker(k, spec.n_agents)
        # Local indices of the envs whose episode ended at the last step.
        self.ended: list[int] = []
        # Local indices of envs not stepped normally next step: waiting on a
        # next_step reset, or repeating a finished one_episode step.
        self._waiting: set[int] = set()
        # disabled mode: finished envs that must be reset before stepping again.
        self.finished: set[int] = set()
        self._snapshots: list[Any] = [None] * k
        # Local indices of the envs never reset yet: their first reset without a
        # seed uses env_seed + their global index, whichever call reaches them.
        self._unseeded: set[int] = set(range(k)) if env_seed is not None else set()
        # Seeds for the first reset of rebuilt envs (restart_on_error).
        self._pending_seed: dict[int, int | None] = {}
        # Local indices of the envs never reset: in a process that replaces a dead
        # one under the async pool, their first step_env() restarts them instead.
        self.unstarted: set[int] = set(range(k))
        # Whether step_env() may step one env alone: not where a native engine steps the
        # whole group in one call.
        self.steps_single_envs = self._stepper.steps_single_envs()
        self._one_infos: list[dict[str, Any]] = [{}] * k  # step_env's infos slot, reused
        self.settled: list[dict[str, Any]] | None = None  # infos of the envs stepped before a step's error

    def __len__(self) -> int:
        return len(self.adapters)

    def _make_stepper(self) -> GroupStepper:
        """The adapters' own group stepper when they are all of one class, else the default."""
        kind = type(self.adapters[0])
        if all(type(adapter) is kind for adapter in self.adapters):
            stepper = kind.group_stepper(self.adapters, self._rows, self._block)
        else:
            stepper = GroupStepper(self.adapters, self._rows, self._block)
        stepper.while_stepping = getattr(self, "_while_stepping", None)  # a rebuilt stepper keeps it
        return stepper

    def take_obs(self) -> np.ndarray | None:
        """Right after `step`, where no env ended: `GroupStepper.take_obs`."""
        return None if self.ended else self._stepper.take_obs()

    def run_while_stepping(self, work: Callable[[], None] | None) -> None:
        """Run ``work`` (the backend's, needing nothing of a step's results) while a native
        engine's threads step: `GroupStepper.while_stepping`. None: nothing."""
        self._while_stepping = self._stepper.while_stepping = work

    # -- reset ----------------------------------------------------------------

    def reset(self, seed: int | None = None, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Reset the local envs ``env_ids`` (all when None); returns their infos.

        With a seed, env ``start + j`` gets ``seed + start + j``. Without one, an
        env's first reset uses ``env_seed + start + j`` (whether the batch or only
        that env is reset, in any order); later ones continue its own random stream.
        """
        local = range(len(self.adapters)) if env_ids is None else env_ids
        unseeded = self._unseeded
        if env_ids is not None and len(set(env_ids)) < len(self.adapters):  # a native engine may refuse
            refusal = self._stepper.reset_error(env_ids, seed is not None or any(j in unseeded for j in env_ids))
            if refusal is not None:
                raise ValueError(refusal)
        infos: list[dict[str, Any]] = []
        for j in local:
            if seed is not None:
                env_seed: int | None = seed + self.start + j
            elif j in unseeded:
                env_seed = cast(int, self.env_seed) + self.start + j
            else:
                env_seed = None
            # The episode starts before its reset: a restart within the reset counts in it.
            self.episodes.begin(j)
            infos.append(self._reset_guarded(j, env_seed))
            unseeded.discard(j)
            self.unstarted.discard(j)
            self._waiting.discard(j)
            self.finished.discard(j)
            self.done[j] = False
        self._stepper.flush_resets()  # an engine may reset its waiting envs in one call
        return infos

    def _reset_env(self, j: int, seed: int | None, clear_step: bool = True) -> dict[str, Any]:
        """Reset env j. ``clear_step`` False keeps the reward and flags of the step
        that ended the episode in the buffer (same_step: they describe that step)."""
        if self._pending_seed:
            pending = self._pending_seed.pop(j, None)
            if seed is None:
                seed = pending
        info = self.adapters[j].reset(seed=seed)
        if self._fast and (seed is not None or self._snapshots[j] is None):
            self._snapshots[j] = (self.adapters[j].snapshot(), _copy.deepcopy(info))
        if clear_step:
            self._clear_step(j)
        return info

    def _autoreset_env(self, j: int, clear_step: bool) -> dict[str, Any]:
        if self._fast and self._snapshots[j] is not None:
            snapshot, info = self._snapshots[j]
            self.adapters[j].restore(snapshot)
            if clear_step:
                self._clear_step(j)
            return _copy.deepcopy(info)
        return self._reset_env(j, None, clear_step)

    def _clear_step(self, j: int) -> None:
        row = self._rows[j]
        row.reward.fill(0.0)
        row.terminated.fill(False)
        row.truncated.fill(False)

    # -- step -----------------------------------------------------------------

    def step(self) -> list[dict[str, Any]]:
        """Step every env with the actions already in the buffer; returns k infos."""
        if self.finished:
            raise EnvFinishedError.for_env(self.start + min(self.finished))
        waiting = self._waiting
        n = len(self.adapters)
        infos: list[dict[str, Any]] = [None] * n  # type: ignore[list-item]
        j = 0
        while j < n:
            # The try costs nothing until an env raises (zero-cost exceptions); then
            # env j is restarted or the error propagates, and the loop goes on at j + 1.
            try:
                if not waiting:
                    self._stepper.step(j, n, infos)
                else:
                    self._step_around_waiting(j, n, infos)
                break
            except Exception as exc:
                # Only the stepper's errors are env j's to restart; a waiting env's
                # reset restarts itself (_reset_guarded) or comes named already.
                j, self._stepper.failed_at = self._stepper.failed_at, -1
                if j < 0 or hasattr(exc, "marl_vec_env_index") or not self._may_restart(j, exc, "step"):
                    # The envs stepped before the failed one keep their step (the batch stays
                    # consistent); the failed env waits for reset(env_ids=[i]).
                    settle_stepped(self, failed_index(self, j, exc), infos, exc)
                    raise
                infos[j] = self._restart_step(j, exc)
                j += 1
        if self._done_column is not None:
            np.logical_or(self.terminated, self.truncated, out=self._done_column)
        else:
            np.logical_or(self.terminated, self.truncated, out=self._ended)
            np.logical_and.reduce(self._ended, axis=1, out=self.done)  # np.all, without its Python wrapper
        self.episodes.add_step(self.reward)
        was_waiting = waiting
        if waiting:
            self._waiting = set()
            for j in was_waiting:
                self.episodes.clear(j)
                if self.mode is AutoresetMode.ONE_EPISODE:
                    self._waiting.add(j)  # stays finished until reset()
        # count_nonzero is the cheapest test of a bool array (ndarray.any costs ~1 us).
        ended = self.done.nonzero()[0].tolist() if np.count_nonzero(self.done) else []
        self.ended = ended
        if ended:
            # Waiting envs repeat an episode end that was summarized already.
            finishing = [j for j in ended if j not in was_waiting] if was_waiting else ended
            if finishing:
                if self._keeps_final:  # nothing waits in these modes: finishing is ended
                    self._keep_finals(finishing)
                for j, summary in zip(finishing, self.episodes.end(finishing)):
                    infos[j] = self._end_episode(j, infos[j], summary)
        return infos

    def step_env(self, j: int) -> dict[str, Any]:
        """Step local env j alone (the async pool): its rows, its episode bookkeeping and
        autoreset come out exactly as `step` makes them for it; returns its info.

        ``same_step``, ``fast`` and ``disabled`` (a finished env waits for reset()). An env never
        reset (``unstarted``: its process replaced a dead one) is not stepped: it
        restarts, ending the episode the caller saw as truncated, with ``final_*`` the
        rows as they were and ``info["restarted"]``.
        """
        if not self._keeps_final and self.mode is not AutoresetMode.DISABLED:
            raise ValueError(f"step_env() needs autoreset same_step, fast or disabled, not {self.mode.value!r}")
        if j in self.finished:
            raise EnvFinishedError.for_env(self.start + j)
        if j in self.unstarted:
            return self._restart_unstarted(j)
        infos = self._one_infos
        try:
            self._stepper.step(j, j + 1, infos)
            info = infos[j]
        except Exception as exc:
            self._stepper.failed_at = -1
            if hasattr(exc, "marl_vec_env_index") or not self._may_restart(j, exc, "step"):
                raise
            info = self._restart_step(j, exc)
        row, ended = self._rows[j], self._ended_rows[j]
        np.logical_or(row.terminated, row.truncated, out=ended)
        done = bool(ended.all())
        self.done[j] = done
        self.episodes.add_env_step(j, row.reward)
        if done:
            if self._keeps_final:
                self._keep_finals([j])
            info = self._end_episode(j, info, self.episodes.end([j])[0])
        return info

    def _restart_unstarted(self, j: int) -> dict[str, Any]:
        """Env j of a process that replaced a dead one: reset it now (its first reset,
        seeded as any first reset) and end the episode its caller saw as truncated."""
        self._keep_finals([j])  # the rows as the caller last saw them (or as the dead process left them)
        reset_info = self.reset(None, [j])[0]
        row = self._rows[j]
        row.truncated.fill(True)
        self.done[j] = True
        info: dict[str, Any] = {"restarted": True}
        if reset_info:
            info["reset_info"] = reset_info
        return info

    def _step_around_waiting(self, j: int, n: int, infos: list[dict[str, Any]]) -> None:
        """Step envs j..n-1: waiting ones by their autoreset rule, runs of the others by the stepper."""
        waiting = self._waiting
        while j < n:
            if j in waiting:
                infos[j] = self._step_waiting(j)
                j += 1
                continue
            stop = j + 1
            while stop < n and stop not in waiting:
                stop += 1
            self._stepper.step(j, stop, infos)
            j = stop

    def _keep_finals(self, envs: list[int]) -> None:
        """Copy the last observation, state and availability of the finished ``envs``
        (all the done ones) to ``final_*``, before they reset."""
        for j in envs:
            for final, current in self._final_rows[j]:
                final[...] = current

    def _step_waiting(self, j: int) -> dict[str, Any]:
        if self.mode is AutoresetMode.NEXT_STEP:
            return self._reset_guarded(j, None, clear_step=True, auto=True)
        # one_episode: repeat the last observation and done flags, with zero reward.
        self._rows[j].reward.fill(0.0)
        return {}

    def _end_episode(self, j: int, info: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
        """Env j finished its episode (``summary`` from the tracker): report it, then autoreset."""
        # A restarted env's adapter is new: it did not play the episode that ended.
        if not info.get("restarted"):
            stats = self.adapters[j].episode_stats(info)
            if stats:
                summary.update(stats)
        info = dict(info)
        if "episode" in info:  # the env's own (e.g. gymnasium's RecordEpisodeStatistics): kept
            info[ENV_EPISODE_KEY] = info["episode"]
        info["episode"] = summary
        if self._keeps_final:  # final_* hold the episode's last step (_keep_finals)
            reset_info = self._reset_guarded(j, None, clear_step=False, auto=True)
            if reset_info:
                info["reset_info"] = reset_info
                if reset_info.get("restarted"):
                    info["restarted"] = True
        elif self.mode is AutoresetMode.DISABLED:
            self.finished.add(j)
        else:  # next_step, one_episode
            self._waiting.add(j)
        return info

    # -- failures and restarts (restart_on_error) --------------------------------

    def _reset_guarded(self, j: int, seed: int | None, clear_step: bool = True, auto: bool = False) -> dict[str, Any]:
        """Reset (or autoreset) env j; restart it if that raises and its budget allows."""
        try:
            return self._autoreset_env(j, clear_step) if auto else self._reset_env(j, seed, clear_step)
        except Exception as exc:
            if hasattr(exc, "marl_vec_env_index") or not self._may_restart(j, exc, "reset"):
                raise
            error = self._rebuild(j, exc)
            # A rebuilt env whose reset fails again uses up the budget too (recursion
            # depth is bounded by restart_on_error).
            info = self._reset_guarded(j, seed, clear_step, auto=False)
            return {**info, "restarted": True, "error": error}

    def _restart_step(self, j: int, exc: BaseException) -> dict[str, Any]:
        """Env j raised in step: rebuild it and end its episode as truncated.

        The row keeps the last observation (final_* in same_step mode); the rebuilt
        env is reset by the usual autoreset path, with the seed `_rebuild` chose.
        """
        error = self._rebuild(j, exc)
        row = self._rows[j]
        row.reward.fill(0.0)
        row.terminated.fill(False)
        row.truncated.fill(True)
        return {"restarted": True, "error": error}

    def _may_restart(self, j: int, exc: BaseException, where: str) -> bool:
        """True if env j may restart; else name the env on ``exc`` for the caller."""
        if self.episodes.restarts[j] < self.restart_on_error:
            return True
        g = self.start + j
        note = f"marl_vec: raised by env {g} in {where}"
        if self.restart_on_error:
            note += f" after {self.restart_on_error} restart(s), its whole restart_on_error budget"
        try:
            exc.marl_vec_env_index = g  # type: ignore[attr-defined]
            exc.marl_vec_where = where  # type: ignore[attr-defined]
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(note)
        except (AttributeError, TypeError):  # exceptions with __slots__ cannot carry them
            pass
        return False

    def _rebuild(self, j: int, exc: BaseException) -> str:
        """Replace env j by a fresh one from its env_fn, bound to the same row.

        Returns the original error's traceback text. Raises (naming the env) when
        building fails and the budget is used up.
        """
        error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        while True:
            self.episodes.count_restart(j)
            try:
                self.adapters[j].close()
            except Exception:  # a crashed env often cannot close cleanly; it is dropped anyway
                pass
            try:
                adapter = require_adapter(self.env_fns[j]())
                self.buffers.spec.check_same(adapter.spec, self.start + j)
                adapter.bind(adapter.own_row(self._rows[j]))
            except Exception as build_exc:
                if not self._may_restart(j, build_exc, "rebuild"):
                    raise
                continue
            self.adapters[j] = adapter
            self._stepper = self._make_stepper()  # steppers may hold the old env's methods
            break
        self._snapshots[j] = None
        self._pending_seed[j] = self._restart_seed(j)
        return error

    def _restart_seed(self, j: int) -> int | None:
        """Seed of a rebuilt env's first reset: reproducible, and new at every restart."""
        return rebuild_seed(self.env_seed, self.start + j, self.episodes.restarts[j])

    # -- object leaves (Text, Graph, ... spaces): not in shared memory -------------

    def object_rows(self, local_ids: Sequence[int] | None = None) -> list[np.ndarray]:
        """This group's rows (those of ``local_ids``: one env's, for the async pool) of the
        batch's object arrays (observations, final observations), for the process that
        holds the caller's side of the batch."""
        buffers = self.buffers
        if local_ids is not None:
            return buffers.object_rows_of([self._first + j for j in local_ids], buffers.object_fields)
        return buffers.object_rows(self._first, self._last, buffers.object_fields)

    def write_object_actions(self, rows: list[np.ndarray], local_ids: Sequence[int] | None = None) -> None:
        """Put this group's rows (those of ``local_ids``) of object actions, sent with a step,
        into its buffers."""
        if local_ids is not None:
            self.buffers.write_object_rows_of([self._first + j for j in local_ids], self.buffers.object_actions, rows)
            return
        self.buffers.write_object_rows(self._first, self.buffers.object_actions, rows)

    # -- the rest -------------------------------------------------------------

    def render(self) -> list[Any]:
        return [adapter.render() for adapter in self.adapters]

    def call(self, name: str, args: tuple = (), kwargs: dict | None = None, env_ids: Sequence[int] | None = None) -> list[Any]:
        local = range(len(self.adapters)) if env_ids is None else env_ids
        out = []
        for j in local:
            attr = self._native_attr(j, name)
            out.append(attr(*args, **(kwargs or {})) if callable(attr) else attr)
        return out

    def get_attr(self, name: str, env_ids: Sequence[int] | None = None) -> list[Any]:
        local = range(len(self.adapters)) if env_ids is None else env_ids
        return [self._native_attr(j, name) for j in local]

    def _native_attr(self, j: int, name: str) -> Any:
        """Env j's attribute, or a `MissingAttribute` that the caller's VecEnv raises as AttributeError
        (an exception from a worker would arrive as the backend's error, whatever its type)."""
        try:
            return self.adapters[j].get_native_attr(name)
        except AttributeError as exc:
            return MissingAttribute(self.start + j, name, str(exc))

    def set_attr(self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        local = range(len(self.adapters)) if env_ids is None else env_ids
        for j, value in zip(local, values):
            self.adapters[j].set_native_attr(name, value)

    def close(self) -> None:
        errors = []
        for adapter in self.adapters:
            try:
                adapter.close()
            except Exception as exc:  # close every env even when one fails
                errors.append(exc)
        self.adapters = []
        if errors:
            raise errors[0]


"""StepResult, and how a VecEnv builds one from its buffers (views, or copies).

With ``copy=True`` every returned array is a fresh copy; ``final_*`` are copied
only on steps where some env finished (rows of envs not done blanked), and are fresh zeros on the others
(`marl_vec.vec.copies.zeros_makers`), which is cheaper for large observations.

Examples:
    >>> import gymnasium as gym, marl_vec as mv
    >>> with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2) as venv:
    ...     r = venv.reset()
    >>> type(r).__name__, r.obs.shape, r.final_obs.shape
    ('StepResult', (2, 1, 4), (2, 1, 4))

`ResultMaker` is a mixin of [`VecEnv`][marl_vec.vec.base.VecEnv].
"""

from __future__ import annotations

import copy as copy_module
from dataclasses import dataclass, fields
from typing import Any, Callable, cast

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import BatchBuffers
from marl_vec.vec.copies import LARGE, blank_rows, copier_for, zeros_makers


@dataclass
class StepResult:
    """One batched step (or reset). See the table in docs/concepts/step_result.md.

    Shapes, for E envs and A agents: ``obs`` (E, A, *obs_shape), ``state``
    (E, *state_shape), ``avail_actions`` (E, A, n_actions) or None,
    ``agent_mask``/``reward``/``terminated``/``truncated`` (E, A), ``done`` (E,).
    For Dict/Tuple observation spaces ``obs``, ``final_obs`` (and a state made of
    the observations) are dicts / tuples of such arrays, one per leaf.
    ``final_*`` are set in the same_step and fast modes only, valid where ``done``
    (elsewhere zeros, and None in object leaves such as Text or Graph; with ``copy=False``
    those rows are the buffers' own and hold an earlier episode's end).

    ``acting`` (E, A) bool: the agent to move in turn-based games (``spec.turn_based``),
    whose action alone is read; for simultaneous-move envs it equals ``agent_mask``.
    ``final_acting``: the same at the last step of an episode that ended.
    """

    obs: Any
    state: Any  # None with state="none"
    avail_actions: np.ndarray | None
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    infos: list[dict[str, Any]]
    final_obs: Any = None
    final_state: Any = None
    final_avail_actions: np.ndarray | None = None
    acting: np.ndarray | None = None
    final_acting: np.ndarray | None = None

    def __iter__(self):
        return (getattr(self, f.name) for f in fields(self))


class ResultMaker:
    """Building the StepResult of the buffers, for [`VecEnv`][marl_vec.vec.base.VecEnv]."""

    buffers: BatchBuffers
    copy: bool
    _keeps_final: bool
    _obs_is_tree: bool
    _objects_out: bool
    _copiers: list[Callable[[np.ndarray], np.ndarray]] | None
    _final_zeros: Callable[[], list[np.ndarray | None]] | None
    _ready_zeros: list[np.ndarray | None] | None = None  # taken by _prepare_result, not yet handed out
    # The backend's array equal to buffers.obs after the last step that nothing else
    # references (EnvGroup.take_obs): the next copy=True result hands it out uncopied.
    _fresh_obs: np.ndarray | None = None

    def _prepare_result(self) -> None:
        """Take the blanks of the next ``copy=True`` result's ``final_*`` ahead of time: a
        backend runs this while a native engine's threads step (``EnvGroup.run_while_stepping``),
        so that it does not delay the next step. Single-array observations only."""
        if self._ready_zeros is None and self._keeps_final and self.copy and not (
                self._obs_is_tree or self._objects_out):
            buf = self.buffers
            if self._final_zeros is None:
                self._final_zeros = zeros_makers([buf.final_obs, buf.final_state, buf.final_avail_actions,
                                                  buf.final_acting])
            self._ready_zeros = self._final_zeros()

    def _result(self, infos: list[dict[str, Any]], any_done: bool | None = None) -> StepResult:
        """The StepResult of the buffers; ``any_done``: whether some env is done (None: look).

        With ``copy`` every returned array is a fresh copy, sharing memory with no
        other (the state too, where the buffers keep it as a view of the observations).
        """
        buf = self.buffers
        avail = buf.avail_actions
        if not self.copy:
            keeps = self._keeps_final
            return StepResult(
                buf.obs, buf.state, avail, buf.agent_mask, buf.reward, buf.terminated, buf.truncated,
                buf.done, infos, *((buf.final_obs, buf.final_state, buf.final_avail_actions)
                                   if keeps else (None, None, None)),
                acting=buf.movers(), final_acting=buf.final_acting if keeps else None,
            )
        if self._obs_is_tree:
            obs = spaces.tree_map(_copy, buf.obs)
            state = None if buf.state is None else spaces.tree_map(_copy, buf.state)
        elif self._objects_out:
            obs = _copy(buf.obs)
            state = None if buf.state is None else _copy(buf.state)
        else:
            copiers = self._copiers
            if copiers is None:
                copiers = self._copiers = [copier_for(a) for a in (buf.obs, buf.state, buf.final_obs, buf.final_state)]
            obs, self._fresh_obs = self._fresh_obs, None
            if obs is None:
                obs = copiers[0](buf.obs)
            state = None if buf.state is None else copiers[1](buf.state)
        final: tuple[Any, Any, Any, Any] = (None, None, None, None)
        if self._keeps_final:
            final = self._final_copies(buf, bool(np.count_nonzero(buf.done)) if any_done is None else any_done)
        return StepResult(
            obs, state, None if avail is None else avail.copy(), buf.agent_mask.copy(), buf.reward.copy(),
            buf.terminated.copy(), buf.truncated.copy(), buf.done.copy(), infos, *final[:3],
            acting=buf.movers().copy(), final_acting=final[3],
        )

    def _final_copies(self, buf: BatchBuffers, any_done: bool) -> tuple[Any, Any, Any, Any]:
        """Copies of ``final_*`` (obs, state, avail_actions, acting) with the rows of envs
        not done blanked (zeros; None in object leaves: `blank_rows`),
        or where no env finished, fresh blanks.

        The buffers' ``final_*`` rows are valid only where an env finished; elsewhere they
        hold an earlier episode's end. On the many steps where none did, zeros are cheaper
        than a copy: large ones are pages the kernel supplies on first touch (see
        `marl_vec.vec.copies.zeros_maker`), which for pixel observations is most of
        the difference.
        """
        avail = buf.final_avail_actions
        every = False
        if any_done:
            done = buf.done
            every = np.count_nonzero(done) == done.size
            if self._obs_is_tree or self._objects_out:  # the others copy rows (_with_rows): no mask needed
                rows = None if every else ~done

                def fresh(array: np.ndarray, copier: Callable[[np.ndarray], np.ndarray] = _copy) -> np.ndarray:
                    return blank_rows(copier(array), rows)
        if self._obs_is_tree:
            if not any_done:
                fresh = _zeros_like
            return (spaces.tree_map(fresh, buf.final_obs),
                    None if buf.final_state is None else spaces.tree_map(fresh, buf.final_state),
                    None if avail is None else fresh(avail), fresh(buf.final_acting))
        sources = (buf.final_obs, buf.final_state, avail, buf.final_acting)
        if any_done:
            if self._objects_out:
                return (fresh(buf.final_obs), None if buf.final_state is None else fresh(buf.final_state),
                        None if avail is None else fresh(avail), fresh(buf.final_acting))
            if every:  # every env finished: whole copies (large ones into dropped memory)
                copiers = cast(list, self._copiers)  # set by _result before
                return (copiers[2](buf.final_obs),
                        None if buf.final_state is None else copiers[3](buf.final_state),
                        None if avail is None else avail.copy(), buf.final_acting.copy())
        outs, self._ready_zeros = self._ready_zeros, None
        if outs is None:
            if self._final_zeros is None:  # shapes and dtypes, read once: this runs on most steps
                self._final_zeros = zeros_makers(list(sources))
            outs = self._final_zeros()
        if any_done:
            copiers = cast(list, self._copiers)
            outs = _with_rows(outs, sources, buf.done, (copiers[2], copiers[3], _copy, _copy))
        obs_zeros, state_zeros, avail_zeros, acting_zeros = outs
        return obs_zeros, state_zeros, avail_zeros, acting_zeros


def _with_rows(outs: list[np.ndarray | None], sources: tuple[Any, ...], done: np.ndarray,
               copiers: tuple[Callable[[np.ndarray], np.ndarray], ...]) -> list[np.ndarray | None]:
    """``outs`` (fresh zeros; None: no such field) with the rows of ``sources`` where ``done``.

    Small fields: the finished envs' rows copied into the zeros, row by row for a few,
    else one masked copy (a whole copy and a masked blanking cost 2-3 times more).
    Large ones: a whole copy (into memory a dropped result used) with the other rows
    zeroed, since writing into fresh zero pages would fault each of them in.
    """
    ids = done.nonzero()[0].tolist()
    few = len(ids) <= 4  # a row costs about a quarter of a masked copy of a small field
    result: list[np.ndarray | None] = []
    for out, src, copier in zip(outs, sources, copiers):
        if out is not None:
            if out.nbytes >= LARGE:
                out = blank_rows(copier(src), ~done)
            elif few:
                for i in ids:
                    out[i] = src[i]
            else:
                np.copyto(out, src, where=done.reshape(done.shape + (1,) * (src.ndim - 1)))
        result.append(out)
    return result


def _copy(array: np.ndarray) -> np.ndarray:
    if array.dtype.hasobject:  # Text, Graph, ... values: the env may change them in place later
        return copy_module.deepcopy(array)
    return array.copy()  # the method: np.copy's Python wrapper costs more than the copy of a small array


def _zeros_like(array: np.ndarray) -> np.ndarray:
    """Blanks like ``array`` (None in object arrays: `blank_rows`);
    ``np.zeros_like`` fills its result, ``np.zeros`` gets calloc'ed (untouched) memory."""
    if array.dtype.hasobject:
        return np.full(array.shape, None, array.dtype)
    return np.zeros(array.shape, array.dtype)

"""VecEnv: the batched API every backend shares.

A backend only moves work to where its :class:`~marl_vec.group.EnvGroup`\\ s run
(this process, worker processes, Ray actors). Validation of actions, the shape
of results, copying, episode statistics and the closed state live here once.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> venv = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=0)
    >>> r = venv.reset()
    >>> r.obs.shape, r.avail_actions.shape
    ((4, 1, 4), (4, 1, 2))
    >>> r = venv.step(np.zeros((4, 1), dtype=np.int64))
    >>> r.reward.shape, r.done.shape
    ((4, 1), (4,))
    >>> venv.close()
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, Callable, Sequence, cast

import numpy as np

from marl_vec.buffers import BatchBuffers
from marl_vec.episode import AutoresetMode, EpisodeStatistics
from marl_vec.group import EnvFinishedError
from marl_vec.spec import DiscreteAction, EnvSpec


@dataclass
class StepResult:
    """One batched step (or reset). See the table in README.md.

    Shapes, for E envs and A agents: ``obs`` (E, A, *obs_shape), ``state``
    (E, *state_shape), ``avail_actions`` (E, A, n_actions) or None,
    ``agent_mask``/``reward``/``terminated``/``truncated`` (E, A), ``done`` (E,).
    ``final_*`` are set in the same_step and fast modes only, valid where ``done``.
    """

    obs: np.ndarray
    state: np.ndarray | None  # None with state="none"
    avail_actions: np.ndarray | None
    agent_mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    done: np.ndarray
    infos: list[dict[str, Any]]
    final_obs: np.ndarray | None = None
    final_state: np.ndarray | None = None
    final_avail_actions: np.ndarray | None = None

    def __iter__(self):
        return (getattr(self, f.name) for f in fields(self))


class ClosedEnvError(RuntimeError):
    """Using a VecEnv after ``close()``."""


class VecEnv(ABC):
    """Base class of every backend.

    Subclasses create ``self.buffers`` (a :class:`BatchBuffers`) and implement the
    underscored methods; everything public is defined here.
    """

    buffers: BatchBuffers

    def __init__(
        self,
        spec: EnvSpec,
        num_envs: int,
        autoreset: AutoresetMode | str = AutoresetMode.SAME_STEP,
        copy: bool = True,
        validate: bool = True,
        stats_window: int = 100,
    ):
        self.spec = spec
        self.num_envs = num_envs
        self.autoreset = AutoresetMode.parse(autoreset)
        self._keeps_final = self.autoreset.keeps_final  # read at every step
        self.copy = copy
        self.validate = validate
        self.statistics = EpisodeStatistics(stats_window)
        self.closed = False
        self._waiting = False
        self._has_reset = False
        self._agent_ids = spec.agents
        action = spec.action
        # Read at every step by the validation.
        self._actions_shape = (num_envs, spec.n_agents, *spec.action_shape)
        self._discrete = spec.discrete
        if isinstance(action, DiscreteAction):
            self._n_actions = action.n_actions
            # Scratch for the allocation-free availability check: flat index of
            # (env, agent, action) = base + action.
            self._flat_base = np.arange(num_envs * spec.n_agents, dtype=np.int64) * action.n_actions
            self._flat_index = np.empty_like(self._flat_base)
            self._chosen = np.empty(num_envs * spec.n_agents, dtype=bool)
            self._in_range = np.empty((num_envs, spec.n_agents), dtype=bool)
            self._unsigned: dict[np.dtype, np.dtype] = {}  # action dtype -> its unsigned twin
        else:
            self._low = np.broadcast_to(np.asarray(action.low, dtype=np.float64), spec.action_shape)
            self._high = np.broadcast_to(np.asarray(action.high, dtype=np.float64), spec.action_shape)
        # Read-only zero final_* arrays for steps where no env finished (see _final_copies).
        self._no_final: tuple[Any, Any, Any] | None = None

    # -- what a backend implements --------------------------------------------

    @abstractmethod
    def _reset(self, seed: int | None, env_ids: list[int] | None) -> list[dict[str, Any]]:
        """Reset envs (all when None) into the buffers; return E infos."""

    @abstractmethod
    def _step_async(self) -> None:
        """Start stepping every env with the actions in ``self.buffers.actions``."""

    @abstractmethod
    def _step_wait(self) -> list[dict[str, Any]]:
        """Wait for the step started by ``_step_async``; return E infos."""

    def _finished_envs(self) -> list[int]:
        """Indices of the envs whose episode ended at the last step (``done``).

        A backend that already knows them as a list overrides this to save numpy
        calls on every step.
        """
        done = self.buffers.done
        return done.nonzero()[0].tolist() if np.count_nonzero(done) else []

    @abstractmethod
    def _call(self, name: str, args: tuple, kwargs: dict, indices: list[int]) -> list[Any]: ...

    @abstractmethod
    def _get_attr(self, name: str, indices: list[int]) -> list[Any]: ...

    @abstractmethod
    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None: ...

    @abstractmethod
    def _render(self) -> list[Any]: ...

    @abstractmethod
    def _close(self) -> None: ...

    # -- public API -------------------------------------------------------------

    def reset(self, seed: int | None = None, env_ids: Sequence[int] | None = None) -> StepResult:
        """Reset all envs, or only ``env_ids``; env i gets ``seed + i`` when seeded.

        The first reset without a seed uses the ``env_seed`` given at construction.
        After a partial reset, the other envs' rows are as their last step left them.
        """
        self._check_open()
        if self._waiting:
            raise RuntimeError("reset() called while a step is in flight; call step_wait() first")
        ids = None if env_ids is None else self._check_indices(env_ids)
        infos = self._reset(seed, ids)
        self._has_reset = True
        return self._result(infos)

    def step_async(self, actions: Any) -> None:
        """Validate ``actions`` and start a step; collect it with :meth:`step_wait`."""
        self._check_open()
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        if self._waiting:
            raise RuntimeError("step_async() called twice without step_wait()")
        if self.autoreset is AutoresetMode.DISABLED:
            self._check_not_finished()
        self._write_actions(actions)
        self._step_async()
        self._waiting = True

    def step_wait(self) -> StepResult:
        self._check_open()
        if not self._waiting:
            raise RuntimeError("step_wait() called without step_async()")
        try:
            infos = self._step_wait()
        finally:
            self._waiting = False
        finished = self._finished_envs()
        if finished:
            self.statistics.add(infos[i]["episode"] for i in finished if "episode" in infos[i])
        return self._result(infos, bool(finished))

    def step(self, actions: Any) -> StepResult:
        """``step_async`` then ``step_wait``."""
        self.step_async(actions)
        return self.step_wait()

    def env_info(self) -> dict[str, Any]:
        """The PyMARL dict: n_agents, obs_shape, state_shape, n_actions, episode_limit."""
        return self.spec.env_info()

    def episode_statistics(self) -> dict[str, float]:
        """Means over the last ``stats_window`` (100) finished episodes, plus their count."""
        return self.statistics.means()

    def render(self) -> list[Any]:
        """One frame per env (None where the env does not render)."""
        self._check_open()
        return self._render()

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Call method ``name`` of each native env (or read it, if not callable)."""
        self._check_open()
        return self._call(name, args, kwargs, self._check_indices(indices))

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        self._check_open()
        return self._get_attr(name, self._check_indices(indices))

    def set_attr(self, name: str, values: Any, indices: Sequence[int] | None = None) -> None:
        """Set ``name`` on each env; a list or tuple gives one value per env."""
        self._check_open()
        ids = self._check_indices(indices)
        if isinstance(values, (list, tuple)):
            if len(values) != len(ids):
                raise ValueError(f"set_attr got {len(values)} values for {len(ids)} envs")
            values = list(values)
        else:
            values = [values] * len(ids)
        self._set_attr(name, values, ids)

    def close(self) -> None:
        """Close every env and release the buffers. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self._close()

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, agents={self.spec.n_agents}, autoreset={self.autoreset.value})"

    # -- helpers ----------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvError(f"{type(self).__name__} is closed")

    def _check_indices(self, indices: Sequence[int] | None) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        ids = [int(i) for i in np.atleast_1d(np.asarray(indices)).tolist()]
        bad = [i for i in ids if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range [0, {self.num_envs})")
        return ids

    def _check_not_finished(self) -> None:
        done = self.buffers.done
        if done.any():
            raise EnvFinishedError.for_env(int(np.flatnonzero(done)[0]))

    def _write_actions(self, actions: Any) -> None:
        buf = self.buffers.actions
        actions = np.asarray(actions)
        if self.validate:
            self._validate(actions)
        elif actions.shape != buf.shape:
            raise ValueError(f"actions must have shape {buf.shape}, got {actions.shape}")
        buf[...] = actions  # casts like np.copyto(casting="unsafe"), for less call overhead

    def _validate(self, actions: np.ndarray) -> None:
        spec = self.spec
        if actions.shape != self._actions_shape:
            E, A = self.num_envs, spec.n_agents
            what = "integer per agent" if spec.discrete else f"array of shape {spec.action_shape} per agent"
            raise ValueError(
                f"actions must have shape {self._actions_shape} (num_envs={E}, n_agents={A}, one {what}), "
                f"got {actions.shape}"
            )
        mask = self.buffers.agent_mask
        if self._discrete:
            if actions.dtype.kind not in "iu":
                raise ValueError(f"discrete actions must be integers, got dtype {actions.dtype}")
            if self._all_available(actions):
                return
            self._explain_discrete(actions, mask)
        else:
            if actions.dtype.kind not in "fiu":
                raise ValueError(f"continuous actions must be numbers, got dtype {actions.dtype}")
            axes = tuple(range(2, actions.ndim))
            outside = (actions < self._low) | (actions > self._high) | ~np.isfinite(actions)
            bad = (outside.any(axis=axes) if axes else outside) & mask
            if bad.any():
                e, a = (int(x) for x in np.argwhere(bad)[0])
                raise ValueError(
                    f"action {actions[e, a].tolist()} for env {e}, agent {self._agent_ids[a]!r} is outside "
                    f"the action space [{self._low.tolist()}, {self._high.tolist()}]"
                )

    def _all_available(self, actions: np.ndarray) -> bool:
        """The common case, checked without allocating: every action in range and available.

        Numpy reductions such as ``min``/``all`` cost about a microsecond each on small
        arrays, ``count_nonzero`` a fifth of that; the checks are built from it.
        """
        # Viewed as unsigned, a negative action is huge: one comparison checks both ends.
        dtype = actions.dtype
        unsigned_dtype = self._unsigned.get(dtype)
        if unsigned_dtype is None:
            unsigned_dtype = self._unsigned[dtype] = np.dtype(dtype.str.replace("i", "u"))
        unsigned = actions.view(unsigned_dtype)
        in_range = self._in_range
        np.less(unsigned, self._n_actions, out=in_range)
        if np.count_nonzero(in_range) != in_range.size:
            return False
        avail = cast(np.ndarray, self.buffers.avail_actions)  # discrete actions: never None
        if np.count_nonzero(avail) == avail.size:  # every action available (e.g. gymnasium envs)
            return True
        np.add(self._flat_base, actions.reshape(-1), out=self._flat_index)
        avail.reshape(-1).take(self._flat_index, out=self._chosen)
        return np.count_nonzero(self._chosen) == self._chosen.size

    def _explain_discrete(self, actions: np.ndarray, mask: np.ndarray) -> None:
        """Raise for the first live agent whose action is out of range or unavailable.

        Returns quietly when only dead agents' actions were off: those are ignored.
        """
        n, avail = self._n_actions, cast(np.ndarray, self.buffers.avail_actions)  # discrete actions: never None
        bad = ((actions < 0) | (actions >= n)) & mask
        if bad.any():
            e, a = (int(x) for x in np.argwhere(bad)[0])
            raise ValueError(
                f"action {actions[e, a]} for env {e}, agent {self._agent_ids[a]!r} is out of range; "
                f"allowed: 0..{n - 1}"
            )
        chosen = np.take_along_axis(avail, np.clip(actions, 0, n - 1)[..., None], axis=2)[..., 0]
        bad = ~chosen & mask
        if bad.any():
            e, a = (int(x) for x in np.argwhere(bad)[0])
            allowed = np.flatnonzero(avail[e, a]).tolist()
            raise ValueError(
                f"action {actions[e, a]} for env {e}, agent {self._agent_ids[a]!r} is not available; "
                f"available now: {allowed}"
            )

    def _restart_block(self, envs: range, reset: Callable[[], dict[int, dict[str, Any]] | None],
                       details: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """Envs ``envs`` lost their process in this step (a worker or actor died) and a
        new one hosts them: end their episodes as truncated, as an env restarted by
        EnvGroup's restart_on_error ends its own.

        ``final_*`` take the rows as the lost process left them; ``reset()`` resets the
        new process's envs (their observations reach the buffers) and returns their
        infos by local index. Every agent is truncated with zero reward, and each env's
        info says ``restarted``, with ``details``. The episodes' returns died with the
        process, so there is no ``"episode"`` summary.
        """
        buf, rows = self.buffers, slice(envs.start, envs.stop)
        assert buf.final_obs is not None  # same_step, fast
        buf.final_obs[rows] = buf.obs[rows]
        if buf.state is not None and buf.final_state is not None:
            buf.final_state[rows] = buf.state[rows]
        if buf.avail_actions is not None and buf.final_avail_actions is not None:
            buf.final_avail_actions[rows] = buf.avail_actions[rows]
        reset_infos = reset() or {}
        buf.reward[rows] = 0.0
        buf.terminated[rows] = False
        buf.truncated[rows] = True
        buf.done[rows] = True
        infos: dict[int, dict[str, Any]] = {}
        for j in range(len(envs)):
            info: dict[str, Any] = {"restarted": True, **details}
            if reset_infos.get(j):
                info["reset_info"] = reset_infos[j]
            infos[j] = info
        return infos

    def _result(self, infos: list[dict[str, Any]], any_done: bool | None = None) -> StepResult:
        """The StepResult of the buffers; ``any_done``: whether some env is done (None: look)."""
        buf, spec = self.buffers, self.spec
        avail = buf.avail_actions
        if not self.copy:
            return StepResult(
                buf.obs, buf.state, avail, buf.agent_mask, buf.reward, buf.terminated, buf.truncated,
                buf.done, infos, *((buf.final_obs, buf.final_state, buf.final_avail_actions)
                                   if self._keeps_final else (None, None, None)),
            )
        obs = buf.obs.copy()
        # Where the state is the observations concatenated, its copy is a view of theirs.
        state = (None if buf.state is None else obs.reshape(buf.state.shape) if spec.state_is_obs
                 else buf.state.copy())
        final: tuple[Any, Any, Any] = (None, None, None)
        if self._keeps_final:
            final = self._final_copies(buf, bool(np.count_nonzero(buf.done)) if any_done is None else any_done)
        return StepResult(
            obs, state, None if avail is None else avail.copy(), buf.agent_mask.copy(), buf.reward.copy(),
            buf.terminated.copy(), buf.truncated.copy(), buf.done.copy(), infos, *final,
        )

    def _final_copies(self, buf: BatchBuffers, any_done: bool) -> tuple[Any, Any, Any]:
        """``final_*`` are valid only where an env finished. On the many steps where
        none did, return read-only zero arrays made once instead of copying
        (for pixel observations these copies would dominate the step)."""
        avail = buf.final_avail_actions
        if not any_done:
            if self._no_final is None:
                zeros = [None if a is None else np.zeros_like(a) for a in (buf.final_obs, buf.final_state, avail)]
                for z in zeros:
                    if z is not None:
                        z.flags.writeable = False
                # (final_obs, final_state or None, final_avail_actions or None).
                self._no_final = cast("tuple[Any, Any, Any]", tuple(zeros))
            return self._no_final
        final_obs = buf.final_obs.copy()
        final_state = (None if buf.final_state is None
                       else final_obs.reshape(buf.final_state.shape) if self.spec.state_is_obs
                       else buf.final_state.copy())
        return final_obs, final_state, None if avail is None else avail.copy()

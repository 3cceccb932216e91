"""VecEnv: the batched API every backend shares.

A backend only moves work to where its `EnvGroup`s run
(this process, worker processes, Ray actors). Validation of actions, the shape
of results, copying, episode statistics and the closed state live here once.

Examples:
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

This module holds the public calls and the order they may come in (pending
steps, interrupts, closing). The rest, one idea a module:
`actions` (checking and writing actions),
`results` ([`StepResult`][marl_vec.vec.results.StepResult], views or copies of the buffers),
`reward_dtype` (the reward array's dtype). `check_backend_args`
is the first thing every backend's constructor does with the arguments they share.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

import numpy as np

from marl_vec.core.buffers import BatchBuffers, obs_leaves
from marl_vec.core.episode import AutoresetMode, EpisodeStatistics
from marl_vec.core.errors import AlreadyPendingCallError, MissingAttribute
from marl_vec.core.group import EnvFinishedError
from marl_vec.core.spec import EnvSpec
from marl_vec.core.state import with_state
from marl_vec.envs.registry import adapter_fns
from marl_vec.vec.actions import ActionWriter, as_object_array
from marl_vec.vec.results import ResultMaker, StepResult
from marl_vec.vec.turns import legal_actions
from marl_vec.vec.reward_dtype import REWARD_DTYPES, parse_reward_dtype, with_reward_dtype

__all__ = ["VecEnv", "StepResult", "ClosedEnvError", "REWARD_DTYPES", "parse_reward_dtype", "with_reward_dtype",
           "as_object_array", "check_backend_args"]


def check_backend_args(
    backend: str, env_fns: Sequence[Callable[[], Any]], state: str, autoreset: AutoresetMode | str,
    restart_on_error: int, reward_dtype: Any,
) -> tuple[list[Callable[[], Any]], AutoresetMode]:
    """Check the arguments every backend takes, before it builds an env, starts a
    worker or joins a Ray cluster (a typo must not cost a cluster's start-up); return
    ``env_fns`` as adapter factories with the ``state`` option applied, and the autoreset mode.

    One check for the three backends, so that the same mistake gets the same message
    on each.

    ```pycon
    >>> fns, mode = check_backend_args("DummyVecEnv", [dict], "auto", "next_step", 0, None)
    >>> len(fns), mode.value
    (1, 'next_step')
    >>> check_backend_args("DummyVecEnv", [], "auto", "same_step", 0, None)
    Traceback (most recent call last):
    ...
    ValueError: DummyVecEnv needs at least one env_fn
    ```
    """
    env_fns = list(env_fns)
    if not env_fns:
        raise ValueError(f"{backend} needs at least one env_fn")
    for i, fn in enumerate(env_fns):
        if not callable(fn):
            raise TypeError(f"env_fns[{i}] is a {type(fn).__name__}, not a zero-argument callable")
    if isinstance(restart_on_error, bool) or not isinstance(restart_on_error, (int, np.integer)) \
            or restart_on_error < 0:
        raise ValueError(f"restart_on_error must be an integer >= 0, got {restart_on_error!r}")
    parse_reward_dtype(reward_dtype)
    return with_state(adapter_fns(env_fns), state), AutoresetMode.parse(autoreset)


class ClosedEnvError(RuntimeError):
    """Using a VecEnv after ``close()``."""


class VecEnv(ActionWriter, ResultMaker, ABC):
    """Base class of every backend.

    Subclasses create ``self.buffers`` (a `BatchBuffers`) and implement the
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
        reward_dtype: Any = None,
    ):
        # Backends allocate their buffers from self.spec, which carries the reward dtype.
        spec = with_reward_dtype(spec, reward_dtype)
        self.spec = spec
        self.num_envs = num_envs
        self.autoreset = AutoresetMode.parse(autoreset)
        self._keeps_final = self.autoreset.keeps_final  # read at every step
        self.copy = copy
        self.validate = validate
        self.statistics = EpisodeStatistics(stats_window)
        self.closed = False
        self._waiting = False  # step_async() done, step_wait() not yet called
        self._interrupted = False  # step_wait() was cut short; the workers still owe the step
        self._has_reset = False
        self._agent_ids = spec.agents
        # One array each (the fast path) or a tree of them (Dict/Tuple observations).
        self._obs_is_tree = spec.obs_is_tree
        self._final_zeros: Callable[[], list[np.ndarray | None]] | None = None  # see _final_copies
        # copy=True: how obs, state, final_obs and final_state are copied, chosen at the
        # first result (see copier_for: large ones reuse memory the caller dropped).
        self._copiers: list[Callable[[np.ndarray], np.ndarray]] | None = None
        # Observation leaves that are object arrays (Text, Graph, ...): copied deeply.
        self._objects_out = any(dtype.hasobject for _, _, dtype in obs_leaves(spec))
        self._init_actions(spec, num_envs)

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

    def _owes_answers(self) -> bool:
        """Whether workers still owe answers to a call that an interrupt cut short.

        Backends whose work runs elsewhere (processes, actors) override this and
        `_drain`; the in-process backend never owes anything.
        """
        return False

    def _drain(self) -> None:
        """Read and drop the answers owed to an interrupted call other than a step."""

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

        ``env_ids``: ints, or a boolean mask of length ``num_envs``. Without a seed,
        each env's first reset uses ``env_seed + i`` (whichever call first reaches it).
        After a partial reset, the other envs' rows are as their last step left them.
        """
        self._check_idle("reset")
        ids = None if env_ids is None else self._check_indices(env_ids, unique=True)
        infos = self._reset(seed, ids)
        self._has_reset = True
        return self._result(infos)

    def step_async(self, actions: Any) -> None:
        """Validate ``actions`` and start a step; collect it with [`step_wait`][marl_vec.vec.base.VecEnv.step_wait]."""
        self._check_idle("step_async")
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        if self.autoreset is AutoresetMode.DISABLED:
            self._check_not_finished()
        self._write_actions(actions)
        try:
            self._step_async()
        except BaseException:
            # Interrupted while sending: the workers that got the step owe it.
            self._interrupted = self._owes_answers()
            raise
        self._waiting = True

    def step_wait(self) -> StepResult:
        """Collect the step started by [`step_async`][marl_vec.vec.base.VecEnv.step_async].

        If an interrupt (KeyboardInterrupt) cut an earlier ``step_wait`` short, this
        collects that step: it ran with its own actions, and its result is whole.
        """
        self._check_open()
        if not (self._waiting or self._interrupted):
            raise RuntimeError("step_wait() called without step_async()")
        infos, any_done = self._collect_step()
        return self._result(infos, any_done)

    def _collect_step(self) -> tuple[list[dict[str, Any]], bool]:
        """Wait for the pending step; record its finished episodes; return its infos
        and whether some env finished."""
        self._waiting = False
        self._interrupted = True  # until its answers are all in
        try:
            infos = self._step_wait()
        except BaseException:
            # An interrupt leaves answers owed: the next call collects them first.
            # A backend error has read them all (or broken the batch): nothing is owed.
            self._interrupted = self._owes_answers()
            raise
        self._interrupted = False
        finished = self._finished_envs()
        if finished:
            self.statistics.add(infos[i]["episode"] for i in finished if "episode" in infos[i])
        return infos, bool(finished)

    def step(self, actions: Any) -> StepResult:
        """``step_async`` then ``step_wait``."""
        self.step_async(actions)
        return self.step_wait()

    def xla(self, single_agent: bool | None = None, host_call: str = "auto") -> Any:
        """EnvPool's XLA interface: ``handle, recv, send, step``, pure functions of a handle
        that step this batch from inside ``jax.jit``/``lax.scan`` (needs ``marl_vec[jax]``);
        ``single_agent``: EnvPool's shapes without the agent axis (default: one agent).
        See `marl_vec.vec.xla`."""
        from marl_vec.vec.xla import make_xla

        return make_xla(self, single_agent, host_call)

    def env_info(self) -> dict[str, Any]:
        """The PyMARL dict: n_agents, obs_shape, state_shape, n_actions, episode_limit."""
        return self.spec.env_info()

    def episode_statistics(self) -> dict[str, float]:
        """Means over the last ``stats_window`` (100) finished episodes, plus the count
        of all finished episodes (``episodes``, an int); the rules are in
        `EpisodeStatistics`."""
        return self.statistics.means()

    def render(self) -> list[Any]:
        """One frame per env (None where the env does not render)."""
        self._check_idle("render")
        return self._render()

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Call method ``name`` of each native env (or read it, if not callable)."""
        self._check_idle("call")
        return MissingAttribute.raise_first(self._call(name, args, kwargs, self._check_indices(indices, negative=True)))

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        """Attribute ``name`` of each native env; ``AttributeError`` where an env lacks it, on every backend."""
        self._check_idle("get_attr")
        return MissingAttribute.raise_first(self._get_attr(name, self._check_indices(indices, negative=True)))

    def set_attr(self, name: str, values: Any, indices: Sequence[int] | None = None) -> None:
        """Set ``name`` on each env; a list or tuple gives one value per env."""
        self._check_idle("set_attr")
        ids = self._check_indices(indices, negative=True)
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

    def _check_idle(self, call: str) -> None:
        """Before any call that reaches the envs: refuse while a step is pending
        ([`AlreadyPendingCallError`][marl_vec.core.errors.AlreadyPendingCallError], the step stays collectable), and finish
        what an interrupt left running, so that no worker reads new actions, and
        no validation reads masks, while the interrupted call still runs.

        An interrupted step is collected (its arrays reach the buffers and its
        finished episodes the statistics) and its result dropped.
        """
        self._check_open()
        if self._waiting:
            raise AlreadyPendingCallError(call)
        if self._interrupted:
            self._collect_step()
        elif self._owes_answers():
            self._drain()

    def _check_indices(self, indices: Any, unique: bool = False, negative: bool = False) -> list[int]:
        """The env indices that ``indices`` names, as a list of ints.

        ``indices`` is None (every env), an int, a sequence or array of ints, or a
        boolean mask of length ``num_envs`` (as gymnasium's ``reset_mask``).
        ``unique``: an env named twice is an error (a reset that ran twice would
        not be the one seeded). ``negative``: ``-1`` is the last env, as Python
        indexes a list (call/get_attr/set_attr, as SB3 takes them).

        ```pycon
        >>> venv._check_indices(np.array([True, False, True, False]))
        [0, 2]
        ```
        """
        if indices is None:
            return list(range(self.num_envs))
        ids = np.asarray(indices)
        allowed = f"an int, a sequence of ints, or a boolean mask of length num_envs={self.num_envs}"
        if ids.dtype == np.bool_:
            if ids.shape != (self.num_envs,):
                raise ValueError(f"a boolean env mask must have shape ({self.num_envs},) (one flag per env), "
                                 f"got shape {ids.shape}")
            return np.flatnonzero(ids).tolist()
        if ids.size == 0:  # np.asarray([]) is float64: no index is no index of any type
            return []
        if ids.dtype.kind not in "iu":
            raise TypeError(f"env indices must be {allowed}; got {indices!r} (dtype {ids.dtype})")
        if ids.ndim > 1:
            raise ValueError(f"env indices must be {allowed}; got an array of shape {ids.shape}")
        out = [int(i) for i in ids.reshape(-1).tolist()]
        low = -self.num_envs if negative else 0
        bad = [i for i in out if not low <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range [{low}, {self.num_envs})")
        if negative:
            out = [i % self.num_envs for i in out]
        if unique and len(set(out)) != len(out):
            twice = sorted({i for i in out if out.count(i) > 1})
            raise ValueError(f"env_ids name envs {twice} more than once; name each env to reset once")
        return out

    def legal_actions(self, i: int, agent: int | str | None = None) -> np.ndarray:
        """The legal moves (action numbers) of env ``i``'s agent to move, as of the last
        result; or of ``agent`` (an index or id; needed for simultaneous-move envs).

        ```pycon
        >>> venv.legal_actions(0)
        array([0, 1, 2, 3, 4, 5, 6])
        ```
        """
        buf = self.buffers
        i = self._check_indices(int(i))[0]
        avail = None if buf.avail_actions is None else buf.avail_actions[i]
        return legal_actions(self.spec, None if buf.acting is None else buf.acting[i], avail, agent)

    def _check_not_finished(self) -> None:
        done = self.buffers.done
        if done.any():
            raise EnvFinishedError.for_env(int(np.flatnonzero(done)[0]))

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
        for name in ("obs", "state", "avail_actions"):
            for final, current in zip(buf.leaves("final_" + name), buf.leaves(name)):
                final[rows] = current[rows]
        buf.final_acting[rows] = buf.movers()[rows]
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

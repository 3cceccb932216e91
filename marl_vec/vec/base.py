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

import copy as copy_module
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Sequence, cast

import numpy as np

from marl_vec import spaces
from marl_vec.buffers import BatchBuffers, obs_leaves
from marl_vec.episode import AutoresetMode, EpisodeStatistics
from marl_vec.errors import AlreadyPendingCallError
from marl_vec.group import EnvFinishedError
from marl_vec.spec import DiscreteAction, EnvSpec, ObjectAction, TreeAction
from marl_vec.vec.action_checks import LeafCheck, leaf_label
from marl_vec.vec.copies import copier_for, zeros_makers

REWARD_DTYPES = ("float32", "float64")


def parse_reward_dtype(value: Any) -> np.dtype | None:
    """``"float32"``/``"float64"`` (or those numpy dtypes) as a dtype; None stays None."""
    if value is None:
        return None
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in REWARD_DTYPES:
        raise ValueError(f"reward_dtype must be one of {', '.join(REWARD_DTYPES)} (or None: the family's), "
                         f"got {value!r}")
    return dtype


def with_reward_dtype(spec: EnvSpec, reward_dtype: Any) -> EnvSpec:
    """``spec`` with its reward dtype overridden (None: as the adapter says)."""
    dtype = parse_reward_dtype(reward_dtype)
    return spec if dtype is None or dtype == spec.reward_dtype else replace(spec, reward_dtype=dtype)


@dataclass
class StepResult:
    """One batched step (or reset). See the table in README.md.

    Shapes, for E envs and A agents: ``obs`` (E, A, *obs_shape), ``state``
    (E, *state_shape), ``avail_actions`` (E, A, n_actions) or None,
    ``agent_mask``/``reward``/``terminated``/``truncated`` (E, A), ``done`` (E,).
    For Dict/Tuple observation spaces ``obs``, ``final_obs`` (and a state made of
    the observations) are dicts / tuples of such arrays, one per leaf.
    ``final_*`` are set in the same_step and fast modes only, valid where ``done``
    (zeros elsewhere).
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
        action = spec.action
        A = spec.n_agents
        # Read at every step by the validation.
        self._actions_shape = (num_envs, A, *spec.action_shape)
        self._discrete = spec.discrete
        self._action = action
        if isinstance(action, DiscreteAction):
            self._n_actions = action.n_actions
            self._start = action.start
            # Scratch for the allocation-free availability check: flat index of
            # (env, agent, action) = base + action - start.
            self._flat_base = np.arange(num_envs * A, dtype=np.int64) * action.n_actions
            self._flat_index = np.empty_like(self._flat_base)
            self._shifted = np.empty((num_envs, A), dtype=np.int64)  # actions - start
            self._chosen = np.empty(num_envs * A, dtype=bool)
            self._in_range = np.empty((num_envs, A), dtype=bool)
            self._unsigned: dict[np.dtype, np.dtype] = {}  # action dtype -> its unsigned twin
        self._objects_in = isinstance(action, ObjectAction)  # actions are values, kept in an object array
        # Observation leaves that are object arrays (Text, Graph, ...): copied deeply.
        self._objects_out = any(dtype.hasobject for _, _, dtype in obs_leaves(spec))
        # (path, check) of the action kind (for Discrete: what explains a failed fast
        # check), or of each leaf of Dict/Tuple actions (see action_checks.py).
        self._leaf_checks: list[tuple[spaces.Path, LeafCheck]] = (
            [(path, LeafCheck(leaf, spec.agents, path)) for path, leaf in action.leaves]
            if isinstance(action, TreeAction) else [((), LeafCheck(action, spec.agents))]
        )

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
        :meth:`_drain`; the in-process backend never owes anything.
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
        """Validate ``actions`` and start a step; collect it with :meth:`step_wait`."""
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
        """Collect the step started by :meth:`step_async`.

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

    def env_info(self) -> dict[str, Any]:
        """The PyMARL dict: n_agents, obs_shape, state_shape, n_actions, episode_limit."""
        return self.spec.env_info()

    def episode_statistics(self) -> dict[str, float]:
        """Means over the last ``stats_window`` (100) finished episodes, plus the count
        of all finished episodes (``episodes``, an int); the rules are in
        :class:`~marl_vec.episode.EpisodeStatistics`."""
        return self.statistics.means()

    def render(self) -> list[Any]:
        """One frame per env (None where the env does not render)."""
        self._check_idle("render")
        return self._render()

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Call method ``name`` of each native env (or read it, if not callable)."""
        self._check_idle("call")
        return self._call(name, args, kwargs, self._check_indices(indices))

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        self._check_idle("get_attr")
        return self._get_attr(name, self._check_indices(indices))

    def set_attr(self, name: str, values: Any, indices: Sequence[int] | None = None) -> None:
        """Set ``name`` on each env; a list or tuple gives one value per env."""
        self._check_idle("set_attr")
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

    def _check_idle(self, call: str) -> None:
        """Before any call that reaches the envs: refuse while a step is pending
        (:class:`AlreadyPendingCallError`, the step stays collectable), and finish
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

    def _check_indices(self, indices: Any, unique: bool = False) -> list[int]:
        """The env indices that ``indices`` names, as a list of ints.

        ``indices`` is None (every env), an int, a sequence or array of ints, or a
        boolean mask of length ``num_envs`` (as gymnasium's ``reset_mask``).
        ``unique``: an env named twice is an error (a reset that ran twice would
        not be the one seeded).

        >>> venv._check_indices(np.array([True, False, True, False]))  # doctest: +SKIP
        [0, 2]
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
        bad = [i for i in out if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range [0, {self.num_envs})")
        if unique and len(set(out)) != len(out):
            twice = sorted({i for i in out if out.count(i) > 1})
            raise ValueError(f"env_ids name envs {twice} more than once; name each env to reset once")
        return out

    def _check_not_finished(self) -> None:
        done = self.buffers.done
        if done.any():
            raise EnvFinishedError.for_env(int(np.flatnonzero(done)[0]))

    def _write_actions(self, actions: Any) -> None:
        if isinstance(self._action, TreeAction):
            self._write_tree_actions(actions)
            return
        buf = self.buffers.actions
        actions = as_object_array(actions, buf.shape) if self._objects_in else np.asarray(actions)
        if self.validate:
            self._validate(actions)
        elif actions.shape != buf.shape:
            raise ValueError(f"actions must have shape {buf.shape}, got {actions.shape}")
        buf[...] = actions  # casts like np.copyto(casting="unsafe"), for less call overhead

    def _validate(self, actions: np.ndarray) -> None:
        if actions.shape != self._actions_shape:
            raise self._shape_error(actions, self._actions_shape, self._leaf_checks[0][1])
        mask = self.buffers.agent_mask
        if self._discrete:
            if actions.dtype.kind not in "iu":
                raise ValueError(f"discrete actions must be integers, got dtype {actions.dtype}")
            if self._all_available(actions):
                return
        # Raises for the first live agent whose action is wrong; quiet when only dead
        # agents' actions were off (those are ignored).
        self._leaf_checks[0][1](actions, mask, self.buffers.avail_actions)

    def _shape_error(self, actions: np.ndarray, shape: tuple[int, ...], check: LeafCheck,
                     call: str = "") -> ValueError:
        """``call``: ``"send() "`` for the async pool, whose actions have a row per sent env."""
        A = self.spec.n_agents
        envs = f"len(env_ids)={shape[0]}" if call else f"num_envs={self.num_envs}"
        return ValueError(
            f"{call}{check.what.replace('action', 'actions', 1)} must have shape {shape} ({envs}, n_agents={A}, "
            f"one {check.describe()} per agent), got {actions.shape}"
        )

    def _write_tree_actions(self, actions: Any) -> None:
        """Dict/Tuple actions: the same tree of (E, A, *leaf_shape) arrays, each leaf checked."""
        mask = self.buffers.agent_mask
        arrays = spaces.tree_leaves(self.buffers.actions)
        for (path, check), buf in zip(self._leaf_checks, arrays):
            value = self._action_leaf(actions, path)
            value = as_object_array(value, buf.shape) if buf.dtype.hasobject else np.asarray(value)
            if value.shape != buf.shape:
                raise self._shape_error(value, buf.shape, check)
            if self.validate:
                check(value, mask)
        for buf, (path, _) in zip(arrays, self._leaf_checks):  # written only once all are valid
            value = actions
            for key in path:
                value = value[key]
            buf[...] = as_object_array(value, buf.shape) if buf.dtype.hasobject else value

    def _action_leaf(self, actions: Any, path: spaces.Path) -> Any:
        """The leaf at ``path`` of a tree of actions (Dict/Tuple action spaces)."""
        value: Any = actions
        for key in path:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                raise ValueError(
                    f"actions must be a tree like the action space {self.spec.action_space}: "
                    f"{leaf_label(path)} is missing"
                ) from None
        return value

    def _write_action_rows(self, actions: Any, env_ids: list[int]) -> None:
        """The async pool's ``send()``: as :meth:`_write_actions`, over the rows of
        ``env_ids`` only (row k of ``actions`` is env ``env_ids[k]``): every action form
        ``step()`` takes (arrays, object values, Dict/Tuple trees), the same checks and
        messages, naming the envs. The other rows are not read: their workers may be
        writing them now. Nothing is written unless every leaf is valid.
        """
        buf = self.buffers
        tree = isinstance(self._action, TreeAction)
        mask = buf.agent_mask[env_ids]
        avail = None if tree or buf.avail_actions is None else buf.avail_actions[env_ids]
        checked: list[tuple[np.ndarray, np.ndarray]] = []
        for (path, check), leaf in zip(self._leaf_checks, spaces.tree_leaves(buf.actions)):
            value = self._action_leaf(actions, path) if tree else actions
            shape = (len(env_ids), *leaf.shape[1:])
            value = as_object_array(value, shape) if leaf.dtype.hasobject else np.asarray(value)
            if value.shape != shape:
                raise self._shape_error(value, shape, check, "send() ")
            if self.validate:
                check(value, mask, avail, env_ids)
            checked.append((leaf, value))
        for leaf, value in checked:
            leaf[env_ids] = value

    def _all_available(self, actions: np.ndarray) -> bool:
        """The common case, checked without allocating: every action in range and available.

        ``actions`` may have any integer dtype. Numpy reductions such as ``min``/``all``
        cost about a microsecond each on small arrays, ``count_nonzero`` a fifth of
        that; the checks are built from it.
        """
        if self._start:
            np.subtract(actions, self._start, out=self._shifted, casting="unsafe")
            actions = self._shifted
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
        if dtype.kind == "i":
            np.add(self._flat_base, actions.reshape(-1), out=self._flat_index)
        else:  # uint64 + int64 has no integer common type; in range here, the cast to int64 is exact
            np.add(self._flat_base, actions.reshape(-1), out=self._flat_index, dtype=np.int64, casting="unsafe")
        avail.reshape(-1).take(self._flat_index, out=self._chosen)
        return np.count_nonzero(self._chosen) == self._chosen.size

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
        """The StepResult of the buffers; ``any_done``: whether some env is done (None: look).

        With ``copy`` every returned array is a fresh copy, sharing memory with no
        other (the state too, where the buffers keep it as a view of the observations).
        """
        buf = self.buffers
        avail = buf.avail_actions
        if not self.copy:
            return StepResult(
                buf.obs, buf.state, avail, buf.agent_mask, buf.reward, buf.terminated, buf.truncated,
                buf.done, infos, *((buf.final_obs, buf.final_state, buf.final_avail_actions)
                                   if self._keeps_final else (None, None, None)),
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
            obs = copiers[0](buf.obs)
            state = None if buf.state is None else copiers[1](buf.state)
        final: tuple[Any, Any, Any] = (None, None, None)
        if self._keeps_final:
            final = self._final_copies(buf, bool(np.count_nonzero(buf.done)) if any_done is None else any_done)
        return StepResult(
            obs, state, None if avail is None else avail.copy(), buf.agent_mask.copy(), buf.reward.copy(),
            buf.terminated.copy(), buf.truncated.copy(), buf.done.copy(), infos, *final,
        )

    def _final_copies(self, buf: BatchBuffers, any_done: bool) -> tuple[Any, Any, Any]:
        """Copies of ``final_*``, or where no env finished, fresh zeros.

        ``final_*`` are valid only where an env finished. On the many steps where
        none did, zeros are cheaper than a copy: large ones are pages the kernel
        supplies on first touch (see :func:`marl_vec.vec.copies.zeros_maker`), which
        for pixel observations is most of the difference.
        """
        avail = buf.final_avail_actions
        if self._obs_is_tree:
            fresh: Callable[[np.ndarray], np.ndarray] = _copy if any_done else _zeros_like
            return (spaces.tree_map(fresh, buf.final_obs),
                    None if buf.final_state is None else spaces.tree_map(fresh, buf.final_state),
                    None if avail is None else fresh(avail))
        if any_done:
            if self._objects_out:
                return (_copy(buf.final_obs), None if buf.final_state is None else _copy(buf.final_state),
                        None if avail is None else avail.copy())
            copiers = cast(list, self._copiers)  # set by _result before
            return (copiers[2](buf.final_obs), None if buf.final_state is None else copiers[3](buf.final_state),
                    None if avail is None else avail.copy())
        if self._final_zeros is None:  # shapes and dtypes, read once: this runs on most steps
            self._final_zeros = zeros_makers([buf.final_obs, buf.final_state, avail])
        obs_zeros, state_zeros, avail_zeros = self._final_zeros()
        return obs_zeros, state_zeros, avail_zeros


def _copy(array: np.ndarray) -> np.ndarray:
    if array.dtype.hasobject:  # Text, Graph, ... values: the env may change them in place later
        return copy_module.deepcopy(array)
    return array.copy()  # the method: np.copy's Python wrapper costs more than the copy of a small array


def as_object_array(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` (nested sequences, e.g. one tuple of A values per env) as an object array of
    ``shape``, each value kept as it is: ``np.asarray`` would turn tuples and arrays
    (a Graph's nodes, a Sequence's items) into more axes.

    >>> as_object_array([("ab",), ("c",)], (2, 1))[1, 0]
    'c'
    """
    if isinstance(values, np.ndarray) and values.dtype.hasobject and values.shape == shape:
        return values
    out = np.empty(shape, dtype=object)

    def fill(index: tuple[int, ...], value: Any) -> None:
        if len(index) == len(shape):
            out[index] = value
            return
        n = shape[len(index)]
        try:
            items = list(value) if not isinstance(value, (str, bytes)) else None
        except TypeError:
            items = None
        if items is None or len(items) != n:
            where = f" at {list(index)}" if index else ""
            raise ValueError(f"expected {n} items{where} (object actions of shape {shape}: one value per env "
                             f"and agent), got {type(value).__name__} {value!r}")
        for k, item in enumerate(items):
            fill((*index, k), item)

    fill((), values)
    return out


def _zeros_like(array: np.ndarray) -> np.ndarray:
    """``np.zeros_like`` fills its result; ``np.zeros`` gets calloc'ed (untouched) memory."""
    return np.zeros(array.shape, array.dtype)

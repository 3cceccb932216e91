"""MultiAgentEnv: the contract between an env family and the batching layer.

An adapter wraps one native env. It knows nothing of batching: an
`EnvGroup` binds it once to the `RowViews` of its
row of the batch buffers, and from then on the adapter writes every result
straight into those views and returns only its info dict.

What an adapter writes:

- ``reset``: ``obs``, ``state``, ``avail_actions`` (discrete actions) and
  ``agent_mask``. Rewards and flags are cleared by the group.
- ``step``: the same, plus ``reward``, ``terminated`` and ``truncated`` per agent.
  The env has finished its episode when every agent is terminated or truncated.

Optionally, an adapter class may step a whole run of its instances in one loop:
`MultiAgentEnv.group_stepper` returns a `GroupStepper`, which the
group calls instead of ``step`` one env at a time. It must write exactly what
the adapters' ``step`` would; the group still owns autoreset, restarts and
episode bookkeeping. The default stepper just calls ``step``.

A minimal adapter::

    class Coin(MultiAgentEnv):
        def __init__(self):
            self.spec = EnvSpec(("a",), (1,), np.float32, (1,), np.float32, DiscreteAction(2))
        def reset(self, seed=None):
            self.rng = np.random.default_rng(seed)
            self.row.obs[:] = 0; self.row.state[:] = 0
            self.row.avail_actions[:] = True; self.row.agent_mask[:] = True
            return {}
        def step(self, actions):
            self.row.reward[0] = float(actions[0] == self.rng.integers(2))
            self.row.terminated[0] = True
            return {}
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.core.errors import SameEnvError
from marl_vec.core.spec import EnvSpec

# The attribute a face sets (VecEnv.set_attr) to hand options to each named env's next reset
# (Tianshou's reset(env_id, options=...)); only a GymAdapter answers it, so a face may probe
# with get_attr. The options are used by that one reset, then dropped.
RESET_OPTIONS_ATTR = "marl_vec_reset_options"


class GroupStepper:
    """Steps the adapters of one group, a run ``[first, stop)`` at a time.

    This default calls each adapter's ``step`` with its row of actions. A family
    whose per-env call overhead matters (cheap envs, many per process) overrides
    `MultiAgentEnv.group_stepper` with a loop over its native envs.

    Contract of `step`: env ``j`` of the run writes exactly what
    ``adapters[j].step(rows[j].actions)`` would write and puts its info dict in
    ``infos[j]``. When env ``j`` raises, every env before it in the run has been
    fully written, ``failed_at`` is ``j``, and the exception propagates unchanged
    (the group restarts env ``j`` or names it to the caller).

    Args:
        adapters: the group's adapters, bound to ``rows``.
        rows: each adapter's row views.
        block: the group's rows of every field, leading env axis (``BatchBuffers.block``).
    """

    # Set by the group (EnvGroup.run_while_stepping): the backend's work that needs nothing of
    # the step's results. A stepper whose native engine steps on threads of its own calls
    # it while they run (the caller would wait for them anyway); the others ignore it.
    while_stepping: Callable[[], None] | None = None

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews):
        self.adapters = list(adapters)
        self.act_rows = [row.actions for row in rows]
        self.failed_at = -1

    def steps_single_envs(self) -> bool:
        """Whether `step` may step part of the group (the async pool steps one env at
        a time); a native engine that steps its whole group in one call may not."""
        return True

    def autoreset_error(self, mode: str) -> str | None:
        """Why this stepper cannot serve autoreset ``mode`` (an ``AutoresetMode`` value), or
        None when it can. A stepper that only steps whole groups (a native engine) refuses
        the modes that leave finished envs out of a step; the group raises it as ValueError."""
        return None

    def reset_error(self, local_ids: Sequence[int], seeded: bool) -> str | None:
        """Why this stepper refuses a reset of the group's envs ``local_ids`` (only part of
        the group; ``seeded``: some of them get a seed), or None when it serves it. Asked
        before anything is reset; the group raises it as ValueError."""
        return None

    def flush_resets(self) -> None:
        """Called at the end of the group's ``reset``: an engine whose adapters' ``reset``
        only noted what to reset (JaxMARL) resets those envs here, in one native call."""

    def take_obs(self) -> np.ndarray | None:
        """After a whole-group step: an array equal to the group's observation block that
        nothing else references (a native engine's fresh output), which a ``copy=True``
        result may hand out instead of a copy; given once. None (the default): copy."""
        return None

    def supports_device(self) -> bool:
        """Whether this stepper can write its outputs into tensors on a device (`bind_device`,
        `step_device`) instead of the host buffers: a native engine that computes on torch
        (VMAS). The default cannot: a VecEnv then copies the host buffers once per field."""
        return False

    def device_framework(self) -> str | None:
        """What `step_device` makes where `supports_device`: ``"torch"`` (tensors written in
        place: VMAS) or ``"jax"`` (new JAX arrays each step: JaxMARL, `marl_vec.core.jax_device`)."""
        return None

    def bind_device(self, outputs: Any) -> None:
        """From now on write every output of the group's envs (observations of steps and
        resets, reward, terminated, truncated, done; agent_mask and avail_actions once, here)
        into ``outputs``, the group's rows of a `marl_vec.core.device_outputs.DeviceOutputs`,
        and read actions from its ``actions``."""
        raise NotImplementedError(f"{type(self).__name__} writes host buffers only")

    def step_device(self) -> list[int]:
        """Step the whole group into the bound device outputs; returns the local indices of the
        envs whose episode ended. Where the mode resets at once, those envs have reset natively
        and their ``reset`` writes the new episode's start (as after `step`)."""
        raise NotImplementedError(f"{type(self).__name__} writes host buffers only")

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        """Step envs ``first`` to ``stop - 1``; see the class docstring."""
        adapters, act_rows = self.adapters, self.act_rows
        j = first
        try:
            for j in range(first, stop):
                infos[j] = adapters[j].step(act_rows[j])
        except Exception:
            self.failed_at = j
            raise


class MultiAgentEnv(ABC):
    """Base class of every adapter. Subclasses set ``self.spec`` in ``__init__``."""

    spec: EnvSpec
    row: RowViews

    # The (shape, dtype) of a state this adapter computes but the batch does not keep
    # (set by use_state): own_row gives the adapter a private array to write it into.
    _private_state: tuple[tuple[int, ...], np.dtype] | None = None

    # True where ``native`` holds no episode state (a functional JAX env that a whole
    # block shares): the check that refuses one env object in several env_fns then
    # looks at the adapters only.
    native_is_stateless: bool = False

    def bind(self, row: RowViews) -> None:
        """Called once, before the first reset, with this env's views of the batch."""
        self.row = row

    def use_state(self, mode: str) -> None:
        """Make the state what ``mode`` asks (see `marl_vec.core.state`); called once,
        before `bind`, and it may change ``self.spec``.

        This default serves every adapter: ``env`` needs a state of its own (not
        ``spec.state_is_obs``); ``concat`` and ``none`` on an adapter that computes
        its own state let it go on writing that state into a private array (see
        `own_row`), which the batch ignores. Adapters that can skip the work
        override this.
        """
        spec = self.spec
        if mode == "auto":
            return
        if mode == "env":
            if spec.state_is_obs:
                raise ValueError(
                    f"state='env': {type(self).__name__} has no state of its own (its state is its agents' "
                    "observations); allowed here: auto, concat, none"
                )
            return
        if mode not in ("concat", "none"):
            raise ValueError(f"unknown state mode {mode!r}; allowed: auto, env, concat, none")
        if not spec.state_is_obs and spec.has_state:
            self._private_state = (spec.state_shape, spec.state_dtype)
        if mode == "concat":
            # One agent: its observation's own shape; several: raveled, concatenated (the buffers' view).
            self.spec = dataclasses.replace(spec, state_shape=spec.state_leaf_shape(tuple(spec.obs_shape)), state_dtype=spec.obs_dtype,
                                            state_is_obs=True, has_state=True)
        else:
            self.spec = dataclasses.replace(spec, state_shape=(0,), state_is_obs=False, has_state=False)

    def own_row(self, row: RowViews) -> RowViews:
        """The views this adapter is bound to: ``row``, or (see `use_state`) a copy
        of it whose ``state`` is a private array made once here."""
        if self._private_state is None:
            return row
        shape, dtype = self._private_state
        return dataclasses.replace(row, state=np.zeros(shape, dtype))

    @abstractmethod
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start an episode; ``seed`` None continues the env's own random stream."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Advance one step with ``actions`` of shape ``(A, *action_shape)``.

        Actions of agents whose mask is False must be ignored.
        """

    @classmethod
    def group_stepper(
        cls, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews
    ) -> GroupStepper:
        """The stepper of a group whose adapters are all of this class (see `GroupStepper`).

        Called again whenever the group replaces an adapter (``restart_on_error``).
        """
        return GroupStepper(adapters, rows, block)

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        """Family statistics of the episode that just ended (``info`` is its last step's)."""
        return {}

    def snapshot(self) -> Any:
        """Capture the env right after a reset, for ``autoreset='fast'``."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot its state")

    def restore(self, snapshot: Any) -> dict[str, Any]:
        """Return to ``snapshot`` and write its observation like ``reset`` does."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a snapshot")

    def render(self) -> np.ndarray | None:
        return None

    def close(self) -> None:
        pass

    @property
    def native(self) -> Any:
        """The wrapped env, target of ``VecEnv.call``/``get_attr``/``set_attr``."""
        return self

    def get_native_attr(self, name: str) -> Any:
        """Attribute ``name`` of the native env, as ``VecEnv.call``/``get_attr`` read it.

        A family whose envs come in wrappers overrides this to look through them.
        """
        return getattr(self.native, name)

    def set_native_attr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` of the native env, as ``VecEnv.set_attr`` does."""
        setattr(self.native, name, value)


class NativeEnvAdapter(MultiAgentEnv):
    """An adapter around one native env object, ``self.env``.

    Rendering, closing and ``VecEnv.call``/``get_attr``/``set_attr`` go to it.
    """

    env: Any

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    @property
    def native(self) -> Any:
        return self.env


def one_agent_spec(agent_id: str, obs_shape: tuple[int, ...], obs_dtype: Any, action: Any, **more: Any) -> EnvSpec:
    """The spec of an env with one agent, ``agent_id``, whose state is its observation.

    The buffers then keep one array for both (``state_is_obs``: no second copy of
    each frame), as every single-agent family does. ``more``: the other
    [`EnvSpec`][marl_vec.core.spec.EnvSpec] fields (``episode_limit``, ``reward_dtype``, ...).

    ```pycon
    >>> from marl_vec.core.spec import DiscreteAction
    >>> spec = one_agent_spec("agent_0", (4,), np.float32, DiscreteAction(2), episode_limit=500)
    >>> spec.agents, spec.state_shape, spec.state_is_obs, spec.episode_limit
    (('agent_0',), (4,), True, 500)
    ```
    """
    return EnvSpec(agents=(agent_id,), obs_shape=obs_shape, obs_dtype=obs_dtype, state_shape=obs_shape,
                   state_dtype=obs_dtype, action=action, state_is_obs=True, **more)


def check_distinct_envs(adapters: Sequence[MultiAgentEnv], start: int = 0) -> None:
    """Refuse envs of one group that are one object (or wrappers around one object).

    ``[lambda: env] * n`` would step ``env`` n times per batch step. ``start`` is the
    global index of ``adapters[0]``, for the message.

    ```pycon
    >>> import gymnasium as gym
    >>> from marl_vec.envs.gym import GymAdapter
    >>> env = gym.make("CartPole-v1")
    >>> try:
    ...     check_distinct_envs([GymAdapter(env), GymAdapter(env)])
    ... except ValueError as err:
    ...     print(str(err)[:59])
    env_fns 0 and 1 returned the same env object (CartPoleEnv);
    ```
    """
    owner: dict[int, int] = {}  # id of an adapter or of its innermost env -> the first env index that has it
    for j, adapter in enumerate(adapters):
        objects: dict[int, Any] = {id(adapter): adapter}
        if not adapter.native_is_stateless:  # a shared stateless env (JaxMARL's) is fine
            inner = getattr(adapter.native, "unwrapped", adapter.native)
            objects[id(inner)] = inner
        for obj in objects.values():
            first = owner.setdefault(id(obj), j)
            if first != j:
                raise SameEnvError(
                    f"env_fns {start + first} and {start + j} returned the same env object "
                    f"({type(obj).__name__}); it would be stepped once per env at every step. "
                    "This happens with [lambda: env] * n or make_vec_env(lambda: env): "
                    "make a new env in each env_fn, e.g. [lambda: gym.make('CartPole-v1')] * n"
                )


def require_adapter(made: Any) -> MultiAgentEnv:
    """``made`` if it is an adapter; else a TypeError saying where raw envs are wrapped.

    The core steps adapters only: a backend turns each env_fn into an adapter factory
    (``marl_vec.envs.registry.adapter_fns``) before its groups call them.
    """
    if isinstance(made, MultiAgentEnv):
        return made
    raise TypeError(
        f"an adapter factory returned {type(made).__name__}, not a marl_vec MultiAgentEnv; wrap env_fns "
        "that make gymnasium or PettingZoo envs with marl_vec.envs.registry.adapter_fns (every backend does)"
    )

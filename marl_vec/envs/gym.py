"""Any single-agent ``gymnasium.Env`` as a one-agent env.

Observation spaces: every space of `marl_vec.core.spaces` (Box of any dtype,
Discrete with its start, MultiDiscrete, MultiBinary, Dict and Tuple nested); the
state is the observation. Action spaces: Discrete (values kept, start
included; all actions always available), Box, MultiDiscrete and MultiBinary.
Rewards are float64, as gymnasium's own vector envs give them.

Examples:
    >>> import gymnasium as gym
    >>> env = GymAdapter(gym.make("CartPole-v1"))
    >>> env.spec.obs_shape, env.spec.n_actions, env.spec.episode_limit
    ((4,), 2, 500)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import RowViews
from marl_vec.envs.base import RESET_OPTIONS_ATTR, GroupStepper, MultiAgentEnv, NativeEnvAdapter, one_agent_spec
from marl_vec.envs.gym_chain import FastChain, fast_chain
from marl_vec.core.obs_types import OBS_KIND_ATTR, REWARD_KIND_ATTR, obs_kind, reward_kind
from marl_vec.core.spec import (ActionSpec, ContinuousAction, DiscreteAction, MultiBinaryAction,
                           MultiDiscreteAction, ObjectAction, TreeAction)

ALLOWED_ACTIONS = "Discrete, Box, MultiDiscrete (one axis), MultiBinary, and Dict / Tuple of those (nested)"
ALLOWED_GYM_ACTIONS = ("Discrete, Box, MultiDiscrete, MultiBinary, and Dict / Tuple of those (nested); "
                       "any other space (Text, Graph, Sequence, OneOf, custom) as an object leaf")


def action_spec_of(space: gym.Space, what: str, gymnasium_env: bool = False) -> ActionSpec:
    """The action spec of one agent's gymnasium action space; TypeError naming ``what`` if unsupported.

    ``gymnasium_env``: also the spaces only single-agent gymnasium envs get (object leaves for
    Text, Graph, Sequence, OneOf and custom spaces; MultiDiscrete of any rank).
    """
    if isinstance(space, gym.spaces.Discrete):
        return DiscreteAction(int(space.n), np.dtype(space.dtype), int(space.start))
    if isinstance(space, gym.spaces.Box):
        return ContinuousAction(
            shape=tuple(space.shape),
            low=np.asarray(space.low, dtype=np.float64),
            high=np.asarray(space.high, dtype=np.float64),
            dtype=np.dtype(space.dtype),
        )
    if isinstance(space, gym.spaces.MultiDiscrete) and (space.nvec.ndim == 1 or gymnasium_env):
        grid = None if space.nvec.ndim == 1 else tuple(int(d) for d in space.nvec.shape)
        return MultiDiscreteAction(tuple(int(n) for n in space.nvec.reshape(-1)),
                                   tuple(int(s) for s in space.start.reshape(-1)), np.dtype(space.dtype), grid)
    if isinstance(space, gym.spaces.MultiBinary):
        return MultiBinaryAction(tuple(int(d) for d in space.shape), np.dtype(space.dtype))
    if spaces.is_tree(space):
        try:
            leaves = tuple((path, action_spec_of(leaf, what, gymnasium_env))
                           for path, leaf in spaces.leaves(space, what, objects=gymnasium_env))
        except TypeError:
            leaves = ()
        if leaves and not any(isinstance(leaf, TreeAction) for _, leaf in leaves):
            return TreeAction(space, leaves)  # type: ignore[arg-type]  # leaves are leaf specs: checked above
    if gymnasium_env and isinstance(space, gym.Space) and spaces.is_object_leaf(space):
        return ObjectAction(space)
    allowed = ALLOWED_GYM_ACTIONS if gymnasium_env else ALLOWED_ACTIONS
    raise TypeError(f"{what}: action space {space} is not supported; allowed: {allowed}")


def episode_limit_of(env: Any) -> int | None:
    """The step limit ``env`` enforces: the smallest ``TimeLimit`` in its wrapper chain
    (``gym.make`` puts one there from ``max_episode_steps`` or the registered default);
    None without one.

    The spec's ``max_episode_steps`` is not what counts: a TimeLimit over an env made
    without ``gym.make`` has no spec, and an env taken out of its TimeLimit keeps it.

    ```pycon
    >>> episode_limit_of(gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 1000))  # the inner 500 cuts first
    500
    ```
    """
    limits = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            limits.append(int(env._max_episode_steps))
        env = env.env
    return min(limits, default=None)


class GymAdapter(NativeEnvAdapter):
    """Wraps ``env`` as one agent named ``agent_id``."""

    def __init__(self, env: gym.Env, agent_id: str = "agent_0"):
        name = type(env.unwrapped).__name__
        # (getattr: an env that never set its spaces gets this message, not an AttributeError.)
        obs_space = getattr(env, "observation_space", None)
        # Text, Graph, Sequence, OneOf and custom spaces become object leaves; anything
        # that is not a gymnasium Space at all is refused here, by name.
        if not isinstance(obs_space, gym.Space):
            raise TypeError(f"{name}: observation_space must be a gymnasium Space (the batch's buffers are "
                            f"made from it), got {obs_space!r}")
        self.env = env
        action = action_spec_of(env.action_space, name, gymnasium_env=True)
        obs_shape, obs_dtype = spaces.flat_shape_dtype(obs_space)
        self.spec = one_agent_spec(
            agent_id, obs_shape, obs_dtype, action,
            episode_limit=episode_limit_of(env),
            obs_space=obs_space,
            reward_dtype=np.dtype(np.float64),  # gymnasium's vector envs: rewards bit for bit
        )
        self._tree_actions = isinstance(action, TreeAction)
        self._obs_kind: Any = None  # the Python types of the env's own observation (its first reset's)
        self._reward_kind: str | None = None  # the dtype numpy gives the env's own reward (its first step's)
        self._report_kind = False  # a face asked for it in the info of the env's first step (REWARD_KIND_ATTR)
        self._reset_options: dict[str, Any] | None = None  # for the next reset only (RESET_OPTIONS_ATTR)
        # Set when VecEnv.call/get_attr/set_attr reach the env: the group stepper then looks
        # at the wrapper chain anew (it may step below the check-only wrappers).
        self._touched = [False]
        # (the raw env's reset, its TimeLimit or None) while the group stepper steps below
        # the check-only wrappers (see marl_vec.envs.gym_chain); None: reset the whole chain.
        self._reset_below: tuple[Any, Any] | None = None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # Views of agent 0; `[0, ...]` keeps a 0-d view for scalar (Discrete) observations.
        # Also the state: spec.state_is_obs. Dict/Tuple spaces: a tree of views.
        self._obs = spaces.writable(spaces.tree_map(lambda a: a[0, ...], row.obs))
        self._reward = row.reward
        self._terminated = row.terminated
        self._truncated = row.truncated
        # One agent, always alive, every action always available.
        row.agent_mask[:] = True
        if row.avail_actions is not None:
            row.avail_actions[:] = True
        self._discrete = self.spec.discrete

    @classmethod
    def group_stepper(
        cls, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews
    ) -> GroupStepper:
        # A subclass that changes what a step writes is stepped through its own step();
        # Dict/Tuple actions too (each step builds the action tree), and object actions
        # (a row of an object array holds the value itself, not a view of it).
        if cls.step is not GymAdapter.step or cls.bind is not GymAdapter.bind \
                or isinstance(adapters[0].spec.action, (TreeAction, ObjectAction)):
            return super().group_stepper(adapters, rows, block)
        return _GymGroupStepper(adapters, rows, block)

    # VecEnv.call/get_attr/set_attr reach through gymnasium wrappers, as SyncVectorEnv's
    # do: a plain getattr on a wrapper misses the inner env's attributes. set_attr sets an
    # attribute where a wrapper or the env has it, and a new one on the env itself
    # (env.unwrapped, where Tianshou's workers put it): gymnasium's set_wrapper_attr would put
    # it on the outermost wrapper, where the env's own code never sees it.

    def get_native_attr(self, name: str) -> Any:
        if name == OBS_KIND_ATTR:  # for the faces' final observations (marl_vec.core.obs_types)
            return self._obs_kind
        if name == REWARD_KIND_ATTR:
            return self._reward_kind
        if name == RESET_OPTIONS_ATTR:
            return self._reset_options
        self._touched[0] = True  # what it returns (a wrapper, a method) may change the chain
        self._reset_below = None
        return self.env.get_wrapper_attr(name)

    def set_native_attr(self, name: str, value: Any) -> None:
        if name == REWARD_KIND_ATTR:  # a face that cannot wait for get_attr (steps in flight) asks for it
            self._report_kind = bool(value)
            return
        if name == RESET_OPTIONS_ATTR:
            if value is not None and not isinstance(value, dict):
                raise TypeError(f"reset options must be a dict (or None), got {type(value).__name__}")
            self._reset_options = value
            return
        self._touched[0] = True
        self._reset_below = None
        if not self.env.set_wrapper_attr(name, value, force=False):
            setattr(self.env.unwrapped, name, value)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        below = self._reset_below
        options, self._reset_options = self._reset_options, None
        if below is None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:  # TimeLimit.reset's work, then the call the check-only wrappers hand on
            raw_reset, limit = below
            if limit is not None:
                limit._elapsed_steps = 0
            obs, info = raw_reset(seed=seed, options=options)
        self._obs[...] = obs
        if self._obs_kind is None:
            self._obs_kind = obs_kind(obs)
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        # Discrete: a numpy integer, the space's own value (start included); else the row's
        # array; Dict/Tuple: a tree of those (as gymnasium's vector envs hand them out).
        action = spaces.tree_map(_first, actions) if self._tree_actions else actions[0]
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._obs[...] = obs
        self._reward[0] = reward
        if self._reward_kind is None:
            self._reward_kind = reward_kind(reward)
            if self._report_kind:
                info = {**info, REWARD_KIND_ATTR: self._reward_kind}
        self._terminated[0] = terminated
        self._truncated[0] = truncated
        return info


def _first(array: np.ndarray) -> Any:
    return array[0]


class _GymGroupStepper(GroupStepper):
    """Steps a group of `GymAdapter`s in one loop over their native envs.

    For cheap envs such as CartPole (~6 us a step) the adapter's method call and
    its three one-element numpy writes per env are a tenth of the step. Here each
    env's step result goes straight into its observation view and into Python
    lists; reward and flags then reach the group's ``(k, 1)`` columns with one
    numpy assignment each per run. The actions an env sees are those of
    ``GymAdapter.step``: numpy integers (gymnasium checks Python ints more
    slowly) or the row's action array. Dict/Tuple observations are written leaf
    by leaf through their `TreeView`.

    Below the check-only wrappers: when every env's chain is ``gym.make``'s (see
    `marl_vec.envs.gym_chain`) and its checks are done (after the first two
    steps), each env is stepped below ``OrderEnforcing`` and ``PassiveEnvChecker``
    and its ``TimeLimit`` is applied here, on the wrapper's own step count: the same
    results, half a microsecond less per step on CartPole. ``VecEnv.call``,
    ``get_attr`` and ``set_attr`` may change a chain: the next step goes through the
    whole chains again and looks at them anew.
    """

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews):
        super().__init__(adapters, rows, block)
        gyms: list[GymAdapter] = list(adapters)  # type: ignore[arg-type]  # GymAdapter.group_stepper checked
        self._gyms = gyms
        self._env_steps = [adapter.env.step for adapter in gyms]  # bound once: a rebuilt env gets a new stepper
        self._obs_views = [adapter._obs for adapter in gyms]
        # Discrete and scalar Box: the (k,) column of agent 0's actions, read at each step
        # as numpy scalars (GymAdapter.step's `actions[0]`); other Box: each env's action
        # array, a view of its row. (`row.actions[0]` of a scalar Box is a numpy scalar
        # copied here once, not a view: every step would send that first value.)
        self._by_column = gyms[0].spec.discrete or gyms[0].spec.action_shape == ()
        self._action_column = block.actions[:, 0]
        self._action_rows = [row.actions[0] for row in rows]
        self._reward_column = block.reward[:, 0]
        self._terminated_column = block.terminated[:, 0]
        self._truncated_column = block.truncated[:, 0]
        k = len(gyms)
        self._rewards: list[Any] = [0.0] * k
        self._terminated: list[Any] = [False] * k
        self._truncated: list[Any] = [False] * k
        self._progress = 0  # the env a loop was at when it raised
        # Set by the adapters' get_native_attr/set_native_attr (VecEnv.call, get_attr,
        # set_attr): the chains are looked at anew before the next step.
        self._touched = [False]
        for adapter in gyms:
            adapter._touched = self._touched
        self._kinds_missing = any(adapter._reward_kind is None for adapter in gyms)
        self._look_again()

    def _look_again(self) -> None:
        """Step through the whole chains until every one is known to be only checks past
        their checks (`fast_chain`)."""
        self._touched[0] = False
        for adapter in self._gyms:
            adapter._reset_below = None
        self._chains = [fast_chain(adapter.env) for adapter in self._gyms]
        limits = [chain.limit is None for chain in self._chains if chain is not None]
        # Every chain of one kind (all with a TimeLimit, or none): one loop serves them.
        self._eligible = len(limits) == len(self._chains) and limits.count(limits[0]) == len(limits)
        self._below: tuple[list[Any], list[Any] | None] | None = None
        self._ready_upto = 0  # chains before this one are past their checks (they stay so)

    def _chains_ready(self) -> bool:
        """Whether every chain is past its checks. Resumes at the first chain that was not:
        an env that is not stepped (finished, in ``one_episode`` mode) costs one look a step."""
        chains: list[FastChain] = self._chains  # type: ignore[assignment]  # eligible: none is None
        j = self._ready_upto
        while j < len(chains) and chains[j].ready():
            j += 1
        self._ready_upto = j
        return j == len(chains)

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        if self._touched[0]:
            self._look_again()
        done = stop
        try:
            below = self._below
            if below is not None:
                if below[1] is not None:
                    self._step_below_limit(first, stop, infos, below[0], below[1])
                else:
                    self._step_loop(first, stop, infos, below[0])
            else:
                self._step_loop(first, stop, infos, self._env_steps)
        except BaseException as exc:
            done = self._progress  # envs first..done-1 finished their step
            if isinstance(exc, Exception):
                self.failed_at = done
            raise
        finally:
            self._write_columns(first, done)
            if self._kinds_missing:
                self._record_reward_kinds(first, done, infos)
        if self._below is None and self._eligible and self._chains_ready():
            chains: list[FastChain] = self._chains  # type: ignore[assignment]  # eligible: none is None
            limits = [chain.limit for chain in chains]
            self._below = ([chain.raw_step for chain in chains], None if limits[0] is None else limits)
            for adapter, chain in zip(self._gyms, chains):
                adapter._reset_below = (chain.raw.reset, chain.limit)

    def _record_reward_kinds(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        """Each env's reward kind (GymAdapter.step's), from the rewards of its first step."""
        for j in range(first, stop):
            adapter = self._gyms[j]
            if adapter._reward_kind is None:
                adapter._reward_kind = reward_kind(self._rewards[j])
                if adapter._report_kind:
                    infos[j] = {**infos[j], REWARD_KIND_ATTR: adapter._reward_kind}
        self._kinds_missing = any(adapter._reward_kind is None for adapter in self._gyms)

    def _step_loop(self, first: int, stop: int, infos: list[dict[str, Any]], env_steps: list[Any]) -> None:
        """Step envs first..stop-1 with ``env_steps`` (the chains' or the raw envs' steps)."""
        obs_views = self._obs_views
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        actions: Any = self._action_column if self._by_column else self._action_rows
        j = first
        try:
            # zip: one iterator step per env instead of three list lookups by index.
            for j, env_step, obs_view, action in zip(range(first, stop), env_steps[first:stop],
                                                     obs_views[first:stop], actions[first:stop]):
                obs, rewards[j], terminated[j], truncated[j], infos[j] = env_step(action)
                obs_view[...] = obs
        except BaseException:
            self._progress = j
            raise

    def _step_below_limit(self, first: int, stop: int, infos: list[dict[str, Any]],
                          raw_steps: list[Any], limits: list[Any]) -> None:
        """`_step_loop` of the raw envs, with each TimeLimit's work done as
        ``TimeLimit.step`` does it: count the step on the wrapper, truncate at its limit."""
        obs_views = self._obs_views
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        actions: Any = self._action_column if self._by_column else self._action_rows
        j = first
        try:
            for j, raw_step, limit, obs_view, action in zip(range(first, stop), raw_steps[first:stop],
                                                            limits[first:stop], obs_views[first:stop],
                                                            actions[first:stop]):
                obs, rewards[j], terminated[j], trunc, infos[j] = raw_step(action)
                elapsed = limit._elapsed_steps + 1
                limit._elapsed_steps = elapsed
                truncated[j] = True if elapsed >= limit._max_episode_steps else trunc
                obs_view[...] = obs
        except BaseException:
            self._progress = j
            raise

    def _write_columns(self, first: int, j: int) -> None:
        """Reward and flags of envs first..j-1 (all of the run unless env j raised) into the
        group's columns."""
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        if first == 0 and j == len(rewards):  # the whole group: no slices to make
            _write_rewards(self._reward_column, rewards)
            _write_flags(self._terminated_column, terminated)
            _write_flags(self._truncated_column, truncated)
        elif first < j:
            _write_rewards(self._reward_column[first:j], rewards[first:j])
            _write_flags(self._terminated_column[first:j], terminated[first:j])
            _write_flags(self._truncated_column[first:j], truncated[first:j])


# Converting a Python list to a numpy column costs a few hundred instructions per
# item (dtype discovery, packing); these shortcuts cover the usual steps of many
# cheap envs: one reward for all (CartPole's 1.0) and few or no flags set.

def _write_rewards(column: np.ndarray, rewards: list[Any]) -> None:
    """``column[...] = rewards``; ``list.count`` compares by identity first, so a
    shared reward object is recognized at C speed."""
    if rewards.count(rewards[0]) == len(rewards):
        column.fill(rewards[0])
    else:
        column[...] = rewards


def _write_flags(column: np.ndarray, flags: list[Any]) -> None:
    """``column[...] = flags`` (as bools); cheap when at most a few are set."""
    unset = flags.count(False)
    if unset == len(flags):
        column.fill(False)
        return
    if unset >= len(flags) - 8:
        # Clear, then find the set ones with list.index (a C loop); a flag that is
        # neither == False nor == True (2, None) is not found: convert the list instead.
        column.fill(False)
        j = -1
        try:
            for _ in range(len(flags) - unset):
                j = flags.index(True, j + 1)
                column[j] = True
            return
        except ValueError:
            pass
    column[...] = flags


def make_gym(env_id: str, **kwargs: Any) -> GymAdapter:
    """The ``gym`` family: ``gymnasium.make(env_id, **kwargs)`` as one agent."""
    return GymAdapter(gym.make(env_id, **kwargs))

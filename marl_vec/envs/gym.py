"""Any single-agent ``gymnasium.Env`` as a one-agent env.

Observation spaces: Box, Discrete, MultiDiscrete, MultiBinary (dtype kept; the
state is the observation). Action spaces: Discrete (all actions always
available) and Box.

Example:
    >>> import gymnasium as gym
    >>> env = GymAdapter(gym.make("CartPole-v1"))
    >>> env.spec.obs_shape, env.spec.n_actions, env.spec.episode_limit
    ((4,), 2, 500)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.base import GroupStepper, MultiAgentEnv, NativeEnvAdapter
from marl_vec.spec import ContinuousAction, DiscreteAction, EnvSpec

_OBS_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def action_spec_of(space: gym.Space, what: str) -> DiscreteAction | ContinuousAction:
    if isinstance(space, gym.spaces.Discrete):
        return DiscreteAction(int(space.n))
    if isinstance(space, gym.spaces.Box):
        return ContinuousAction(
            shape=tuple(space.shape),
            low=np.asarray(space.low, dtype=np.float64),
            high=np.asarray(space.high, dtype=np.float64),
            dtype=np.dtype(space.dtype),
        )
    raise TypeError(f"{what}: action space {space} is not supported; allowed: Discrete, Box")


def episode_limit_of(env: Any) -> int | None:
    """The step limit ``env`` enforces: the smallest ``TimeLimit`` in its wrapper chain
    (``gym.make`` puts one there from ``max_episode_steps`` or the registered default);
    None without one.

    The spec's ``max_episode_steps`` is not what counts: a TimeLimit over an env made
    without ``gym.make`` has no spec, and an env taken out of its TimeLimit keeps it.

    >>> episode_limit_of(gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 1000))  # the inner 500 cuts first
    500
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
        obs_space = env.observation_space
        if not isinstance(obs_space, _OBS_SPACES):
            raise TypeError(
                f"observation space {obs_space} is not supported; allowed: Box, Discrete, "
                "MultiDiscrete, MultiBinary (flatten Dict/Tuple spaces with gymnasium.wrappers.FlattenObservation)"
            )
        self.env = env
        action = action_spec_of(env.action_space, type(env.unwrapped).__name__)
        self._action_start = int(getattr(env.action_space, "start", 0)) if action.discrete else 0
        # Box, Discrete, MultiDiscrete and MultiBinary always have a shape.
        obs_shape = cast("tuple[int, ...]", obs_space.shape)
        self.spec = EnvSpec(
            agents=(agent_id,),
            obs_shape=obs_shape,
            obs_dtype=obs_space.dtype,
            state_shape=obs_shape,
            state_dtype=obs_space.dtype,
            action=action,
            episode_limit=episode_limit_of(env),
            state_is_obs=True,
        )

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # Views of agent 0; `[0, ...]` keeps a 0-d view for scalar (Discrete) observations.
        self._obs = row.obs[0, ...]  # also the state: spec.state_is_obs
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
        # A subclass that changes what a step writes is stepped through its own step().
        if cls.step is not GymAdapter.step or cls.bind is not GymAdapter.bind:
            return super().group_stepper(adapters, rows, block)
        return _GymGroupStepper(adapters, rows, block)

    # VecEnv.call/get_attr/set_attr reach through gymnasium wrappers, as SyncVectorEnv's
    # do: a plain getattr on a wrapper misses the inner env's attributes, and a plain
    # setattr would set a new attribute on the outermost wrapper, leaving the env unchanged.

    def get_native_attr(self, name: str) -> Any:
        return self.env.get_wrapper_attr(name)

    def set_native_attr(self, name: str, value: Any) -> None:
        self.env.set_wrapper_attr(name, value)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, info = self.env.reset(seed=seed)
        self._obs[...] = obs
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        if self._discrete:
            action = actions[0] if not self._action_start else actions.item() + self._action_start
        else:
            action = actions[0]
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._obs[...] = obs
        self._reward[0] = reward
        self._terminated[0] = terminated
        self._truncated[0] = truncated
        return info


class _GymGroupStepper(GroupStepper):
    """Steps a group of :class:`GymAdapter`\\ s in one loop over their native envs.

    For cheap envs such as CartPole (~6 us a step) the adapter's method call and
    its three one-element numpy writes per env are a tenth of the step. Here each
    env's step result goes straight into its observation view and into Python
    lists; reward and flags then reach the group's ``(k, 1)`` columns with one
    numpy assignment each per run. The actions an env sees are those of
    ``GymAdapter.step``: numpy integers (gymnasium checks Python ints more
    slowly), Python ints shifted by the space's start, or the row's action array.
    """

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews):
        super().__init__(adapters, rows, block)
        gyms: list[GymAdapter] = list(adapters)  # type: ignore[arg-type]  # GymAdapter.group_stepper checked
        self._env_steps = [adapter.env.step for adapter in gyms]  # bound once: a rebuilt env gets a new stepper
        self._obs_views = [adapter._obs for adapter in gyms]
        self._action_start = gyms[0]._action_start
        self._discrete = gyms[0].spec.discrete
        # Discrete: the (k,) column of agent 0's actions; Box: each env's action array.
        self._action_column = block.actions[:, 0]
        self._action_rows = [row.actions[0] for row in rows]
        self._reward_column = block.reward[:, 0]
        self._terminated_column = block.terminated[:, 0]
        self._truncated_column = block.truncated[:, 0]
        k = len(gyms)
        self._rewards: list[Any] = [0.0] * k
        self._terminated: list[Any] = [False] * k
        self._truncated: list[Any] = [False] * k

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        env_steps, obs_views = self._env_steps, self._obs_views
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        actions: Any
        if not self._discrete:
            actions = self._action_rows
        elif self._action_start:
            start = self._action_start
            actions = [a + start for a in self._action_column.tolist()]
        else:
            actions = self._action_column
        j = first
        try:
            for j in range(first, stop):
                obs, rewards[j], terminated[j], truncated[j], infos[j] = env_steps[j](actions[j])
                obs_views[j][...] = obs
            j = stop
        except Exception:
            self.failed_at = j
            raise
        finally:
            # Envs first..j-1 finished their step (all of the run unless env j raised).
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

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

from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.base import NativeEnvAdapter
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
    spec = getattr(env, "spec", None)
    limit = getattr(spec, "max_episode_steps", None)
    return int(limit) if limit else None


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
        self.spec = EnvSpec(
            agents=(agent_id,),
            obs_shape=obs_space.shape,
            obs_dtype=obs_space.dtype,
            state_shape=obs_space.shape,
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


def make_gym(env_id: str, **kwargs: Any) -> GymAdapter:
    """The ``gym`` family: ``gymnasium.make(env_id, **kwargs)`` as one agent."""
    return GymAdapter(gym.make(env_id, **kwargs))

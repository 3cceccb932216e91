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
from marl_vec.core.adapter import RESET_OPTIONS_ATTR, GroupStepper, MultiAgentEnv, NativeEnvAdapter, one_agent_spec
from marl_vec.core.obs_types import OBS_KIND_ATTR, REWARD_KIND_ATTR, obs_kind, reward_kind
from marl_vec.core.spec import ObjectAction, TreeAction
from marl_vec.envs.gym.actions import action_spec_of
from marl_vec.envs.gym.group_stepper import _GymGroupStepper

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
        # the check-only wrappers (see marl_vec.envs.gym.wrapper_chain); None: reset the whole chain.
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


def make_gym(env_id: str, **kwargs: Any) -> GymAdapter:
    """The ``gym`` family: ``gymnasium.make(env_id, **kwargs)`` as one agent."""
    return GymAdapter(gym.make(env_id, **kwargs))

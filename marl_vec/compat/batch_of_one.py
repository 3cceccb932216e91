"""BatchOfOne: one ``gymnasium.Env`` as a vector env of size 1.

For code written against batches (a trainer, an evaluation loop) that should
also drive a single env without a vectorization layer: observations, rewards
and flags get a leading axis of size 1, actions of shape ``(1, ...)`` lose it
before the env sees them, and an ended episode resets on the next step, as
gymnasium >= 1.0 (``AutoresetMode.NEXT_STEP``): that step returns the reset
observation with zero reward and False flags.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> env = BatchOfOne(gym.make("CartPole-v1"))
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape
    (1, 4)
    >>> obs, reward, terminated, truncated, info = env.step(np.array([1]))
    >>> reward, terminated
    (array([1.]), array([False]))
    >>> env.close()
"""

from __future__ import annotations

import copy as _copy
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate


class BatchOfOne(gymnasium.vector.VectorEnv):
    """Wraps ``env`` as a batch of one.

    Args:
        env: any ``gymnasium.Env``; the wrapper owns it and closes it.
        copy: return a copy of the batched observation (False: a buffer that the
            next step overwrites), as ``SyncVectorEnv``.
    """

    def __init__(self, env: gymnasium.Env, copy: bool = True):
        if not isinstance(env, gymnasium.Env):
            raise TypeError(f"BatchOfOne wraps a gymnasium.Env, got {type(env).__name__}")
        self.env = env
        self.copy = copy
        self.num_envs = 1
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(env.observation_space, 1)
        self.action_space = batch_space(env.action_space, 1)
        self.metadata = {**dict(env.metadata), "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = env.render_mode
        self.spec = env.spec
        # Preallocated once: the batched observation is refilled in place every step.
        self._obs: Any = create_empty_array(env.observation_space, n=1)
        self._reward = np.zeros(1, dtype=np.float64)
        self._terminated = np.zeros(1, dtype=np.bool_)
        self._truncated = np.zeros(1, dtype=np.bool_)
        self._autoreset = False

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; ``seed`` is an int, None, or a list of one of those."""
        if isinstance(seed, (list, tuple)):
            if len(seed) != 1:
                raise ValueError(f"BatchOfOne has one env; seed must be an int, None or a list of one, got {seed!r}")
            seed = seed[0]
        obs, info = self.env.reset(seed=seed, options=options)
        self._autoreset = False
        self._reward[0], self._terminated[0], self._truncated[0] = 0.0, False, False
        return self._batch_obs(obs), self._add_info({}, info, 0)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step with ``actions`` of shape ``(1, *action_shape)``; resets instead after an end."""
        try:  # gymnasium's own unbatching: Dict / Tuple actions are a tree of (1, ...) leaves
            items = list(iterate(self.action_space, actions))
        except (TypeError, ValueError, KeyError, IndexError):
            items = []
        if len(items) != 1:
            raise ValueError(
                f"BatchOfOne takes a batch of one action (leading axis of size 1, e.g. np.array([a]); "
                f"for Dict / Tuple actions on every leaf), got {actions!r}"
            )
        if self._autoreset:
            obs, info = self.env.reset()
            self._reward[0], self._terminated[0], self._truncated[0] = 0.0, False, False
        else:
            obs, reward, terminated, truncated, info = self.env.step(items[0])
            self._reward[0], self._terminated[0], self._truncated[0] = reward, terminated, truncated
        self._autoreset = bool(self._terminated[0] or self._truncated[0])
        return (
            self._batch_obs(obs),
            self._reward.copy(),
            self._terminated.copy(),
            self._truncated.copy(),
            self._add_info({}, info, 0),
        )

    def render(self) -> tuple[Any, ...]:
        """A tuple of one frame, as gymnasium's vector envs."""
        return (self.env.render(),)

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    def _batch_obs(self, obs: Any) -> Any:
        self._obs = concatenate(self.single_observation_space, [obs], self._obs)
        return _copy.deepcopy(self._obs) if self.copy else self._obs

    def __repr__(self) -> str:
        return f"BatchOfOne({self.env})"

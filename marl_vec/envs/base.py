"""MultiAgentEnv: the contract between an env family and the batching layer.

An adapter wraps one native env. It knows nothing of batching: an
:class:`~marl_vec.group.EnvGroup` binds it once to the :class:`RowViews` of its
row of the batch buffers, and from then on the adapter writes every result
straight into those views and returns only its info dict.

What an adapter writes:

- ``reset``: ``obs``, ``state``, ``avail_actions`` (discrete actions) and
  ``agent_mask``. Rewards and flags are cleared by the group.
- ``step``: the same, plus ``reward``, ``terminated`` and ``truncated`` per agent.
  The env has finished its episode when every agent is terminated or truncated.

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

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.spec import EnvSpec


class MultiAgentEnv(ABC):
    """Base class of every adapter. Subclasses set ``self.spec`` in ``__init__``."""

    spec: EnvSpec
    row: RowViews

    def bind(self, row: RowViews) -> None:
        """Called once, before the first reset, with this env's views of the batch."""
        self.row = row

    @abstractmethod
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start an episode; ``seed`` None continues the env's own random stream."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Advance one step with ``actions`` of shape ``(A, *action_shape)``.

        Actions of agents whose mask is False must be ignored.
        """

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

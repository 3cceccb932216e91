"""EnvSpec: what one environment of a batch looks like.

Every adapter describes itself with an :class:`EnvSpec`; the buffers of a batch
are allocated from it once, and trainers read shapes from it instead of poking
at the native env.

Example:
    >>> import numpy as np
    >>> spec = EnvSpec(agents=("a", "b"), obs_shape=(4,), obs_dtype=np.dtype(np.float32),
    ...                state_shape=(8,), state_dtype=np.dtype(np.float32),
    ...                action=DiscreteAction(5), episode_limit=25)
    >>> spec.n_agents, spec.n_actions
    (2, 5)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np


@dataclass(frozen=True)
class DiscreteAction:
    """Each agent picks one integer in ``[0, n_actions)``.

    Agents whose native action space is smaller are padded: their extra actions
    are never available.
    """

    n_actions: int
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int64))

    @property
    def discrete(self) -> bool:
        return True

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class ContinuousAction:
    """Each agent gives a float vector of ``shape`` within ``[low, high]``."""

    shape: tuple[int, ...]
    low: np.ndarray
    high: np.ndarray
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))

    @property
    def discrete(self) -> bool:
        return False

    @property
    def n_actions(self) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousAction)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    def __hash__(self) -> int:
        return hash((self.shape, str(self.dtype)))


ActionSpec = Union[DiscreteAction, ContinuousAction]


@dataclass(frozen=True)
class EnvSpec:
    """Shapes and dtypes of one env; the batch adds a leading ``(E,)`` axis.

    Attributes:
        agents: agent ids in the fixed order of the agent axis.
        obs_shape, obs_dtype: one agent's observation (padded to the largest agent's).
        state_shape, state_dtype: the global state.
        action: :class:`DiscreteAction` or :class:`ContinuousAction`.
        episode_limit: the env's own step limit, where it declares one; else None.
        obs_padded: True when some agents' observations are zero-padded to ``obs_shape``.
        actions_padded: True when some agents have fewer native actions than ``n_actions``
            (the extra ones are always unavailable).
        stats: names of the family statistics reported in ``infos[i]["episode"]``.
        has_state: False when the batch keeps no state (``state="none"``): ``state_shape``
            is ``(0,)``, no state array exists and ``StepResult.state`` is None.
    """

    agents: tuple[str, ...]
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    state_shape: tuple[int, ...]
    state_dtype: np.dtype
    action: ActionSpec
    episode_limit: int | None = None
    obs_padded: bool = False
    actions_padded: bool = False
    stats: tuple[str, ...] = ()
    # Whether the adapter can snapshot its first reset and restore it (autoreset="fast").
    snapshots: bool = False
    # The state is the agents' observations concatenated (for one agent: its
    # observation). The buffers then share one array for both, so adapters write
    # only observations and the state costs nothing.
    state_is_obs: bool = False
    has_state: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "agents", tuple(str(a) for a in self.agents))
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        object.__setattr__(self, "state_shape", tuple(int(d) for d in self.state_shape))
        object.__setattr__(self, "obs_dtype", np.dtype(self.obs_dtype))
        object.__setattr__(self, "state_dtype", np.dtype(self.state_dtype))
        if not self.agents:
            raise ValueError("EnvSpec needs at least one agent")
        if self.state_is_obs and (
            int(np.prod(self.state_shape)) != len(self.agents) * int(np.prod(self.obs_shape))
            or self.state_dtype != self.obs_dtype
        ):
            raise ValueError("state_is_obs needs a state of the observations' dtype and of n_agents times their size")
        if not self.has_state and (self.state_shape != (0,) or self.state_is_obs):
            raise ValueError("a spec without state (has_state=False) has state_shape (0,) and state_is_obs False")
        if len(set(self.agents)) != len(self.agents):
            raise ValueError(f"EnvSpec agent ids must be unique, got {self.agents}")

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    @property
    def discrete(self) -> bool:
        return self.action.discrete

    @property
    def n_actions(self) -> int | None:
        return self.action.n_actions

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one agent's action: ``()`` for discrete actions."""
        return self.action.shape

    def env_info(self) -> dict[str, Any]:
        """The PyMARL ``get_env_info()`` dict."""
        n_actions = self.n_actions if self.discrete else int(np.prod(self.action_shape))
        return {
            "n_agents": self.n_agents,
            "obs_shape": int(np.prod(self.obs_shape)),
            "state_shape": int(np.prod(self.state_shape)),
            "n_actions": n_actions,
            "episode_limit": self.episode_limit,
        }

    def describe(self) -> str:
        """A few readable lines, for ``marl-vec info``."""
        if isinstance(self.action, ContinuousAction):
            action = f"continuous {self.action_shape} in [{self.action.low.min()}, {self.action.high.max()}]"
        else:
            action = f"discrete, {self.n_actions} actions"
        lines = [
            f"agents         {self.n_agents}: {', '.join(self.agents)}",
            f"obs            {self.obs_shape} {self.obs_dtype}" + ("  (zero-padded)" if self.obs_padded else ""),
            f"state          {self.state_shape} {self.state_dtype}" if self.has_state else "state          none",
            f"action         {action}" + ("  (padded; extra actions unavailable)" if self.actions_padded else ""),
            f"episode_limit  {self.episode_limit}",
        ]
        if self.stats:
            lines.append(f"episode stats  {', '.join(self.stats)}")
        return "\n".join(lines)

    def check_same(self, other: EnvSpec, index: int) -> None:
        """All envs of a batch must share one spec; say how env ``index`` differs."""
        for name in ("agents", "obs_shape", "obs_dtype", "has_state", "state_shape", "state_dtype", "action"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                raise ValueError(
                    f"env {index} has {name}={theirs!r} but env 0 has {name}={mine!r}; "
                    "every env of a batch must have the same spec"
                )

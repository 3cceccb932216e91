"""EnvSpec: what one environment of a batch looks like.

Every adapter describes itself with an [`EnvSpec`][marl_vec.core.spec.EnvSpec]; the buffers of a batch
are allocated from it once, and trainers read shapes from it instead of poking
at the native env.

Examples:
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

import gymnasium as gym
import numpy as np

from marl_vec.core import spaces


@dataclass(frozen=True)
class DiscreteAction:
    """Each agent picks one integer in ``[start, start + n_actions)``: gymnasium's
    ``Discrete(n, start=s)`` keeps its values. ``avail_actions[..., k]`` is about
    action ``start + k``.

    Agents whose native action space is smaller are padded: their extra actions
    are never available.
    """

    n_actions: int
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int64))
    start: int = 0

    @property
    def discrete(self) -> bool:
        return True

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def mask_shape(self) -> tuple[int, ...]:
        """One agent's row of ``avail_actions``."""
        return (self.n_actions,)

    def space(self) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(self.n_actions, start=self.start)


class _UnmaskedAction:
    """What the action kinds without Discrete's mask share: not ``discrete``, no
    ``n_actions``, and (unless a kind says otherwise) no row of ``avail_actions``."""

    @property
    def discrete(self) -> bool:
        return False

    @property
    def n_actions(self) -> None:
        return None

    @property
    def mask_shape(self) -> tuple[int, ...] | None:
        return None


@dataclass(frozen=True)
class ContinuousAction(_UnmaskedAction):
    """Each agent gives a float vector of ``shape`` within ``[low, high]``.

    Agents with different Box spaces are padded to the largest: ``agent_shapes``
    then holds each agent's own shape, ``low``/``high`` have a leading agent axis
    (padding at -inf/+inf), and the padding entries of an action are ignored.
    """

    shape: tuple[int, ...]
    low: np.ndarray
    high: np.ndarray
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    agent_shapes: tuple[tuple[int, ...], ...] | None = None

    @property
    def padded(self) -> bool:
        return self.agent_shapes is not None and any(s != self.shape for s in self.agent_shapes)

    def space(self) -> gym.spaces.Box:
        """One agent's space; for padded agents, a Box of the padded shape within every agent's bounds.

        An entry no agent has (shapes (2, 3) and (3, 2) padded to (3, 3)) gets ``[-1, 1]``,
        so the Box stays a valid one to sample from.
        """
        if self.agent_shapes is None:
            low, high = np.broadcast_to(self.low, self.shape), np.broadcast_to(self.high, self.shape)
            return gym.spaces.Box(low.astype(self.dtype), high.astype(self.dtype), self.shape, dtype=self.dtype)
        covered = self._covered()
        low = np.where(covered, self.low, np.inf).min(axis=0)
        high = np.where(covered, self.high, -np.inf).max(axis=0)
        nobody = ~covered.any(axis=0)
        low, high = np.where(nobody, -1.0, low), np.where(nobody, 1.0, high)
        return gym.spaces.Box(low.astype(self.dtype), high.astype(self.dtype), self.shape, dtype=self.dtype)

    def agent_bounds(self, n_agents: int) -> tuple[np.ndarray, np.ndarray]:
        """Each agent's own bounds, ``(n_agents, *shape)`` each, in ``dtype``.

        Faces that state bounds per agent (TorchRL's specs, RLlib's, XuanCe's and
        AgileRL's per-agent spaces, Tianshou's agent axis) use these, so that a policy
        squashed into them never sends an agent an action outside its own Box (the
        VecEnv refuses those).
        Padding entries, which the env ignores, take ``space()``'s bounds instead of
        ``low``/``high``'s infinities: a bounded policy needs finite ones.

        Examples:
            >>> act = ContinuousAction((2,), np.array([[-1.0, -np.inf], [-2.0, -2.0]]),
            ...                        np.array([[1.0, np.inf], [2.0, 2.0]]), agent_shapes=((1,), (2,)))
            >>> act.agent_bounds(2)[0].tolist()
            [[-1.0, -2.0], [-2.0, -2.0]]
        """
        union = self.space()
        shape = (n_agents, *self.shape)
        if self.agent_shapes is None:
            low, high = np.broadcast_to(union.low, shape), np.broadcast_to(union.high, shape)
        else:
            covered = self._covered()
            low, high = np.where(covered, self.low, union.low), np.where(covered, self.high, union.high)
        return low.astype(self.dtype), high.astype(self.dtype)

    def agent_space(self, agent: int, n_agents: int) -> gym.spaces.Box:
        """Agent ``agent``'s Box (padded shape, its own bounds: see ``agent_bounds``)."""
        low, high = self.agent_bounds(n_agents)
        return gym.spaces.Box(low[agent], high[agent], self.shape, dtype=self.dtype)

    def _covered(self) -> np.ndarray:
        """``(A, *shape)``: True on each agent's own entries, False on its padding."""
        assert self.agent_shapes is not None
        covered = np.zeros((len(self.agent_shapes), *self.shape), dtype=bool)
        for a, native in enumerate(self.agent_shapes):
            spaces.window(covered[a], native, len(native) != len(self.shape))[...] = True
        return covered

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousAction)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.agent_shapes == other.agent_shapes
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    def __hash__(self) -> int:
        return hash((self.shape, str(self.dtype)))


@dataclass(frozen=True)
class MultiDiscreteAction(_UnmaskedAction):
    """Each agent gives ``len(nvec)`` integers, component c in ``[start[c], start[c] + nvec[c])``.

    ``avail_actions`` per agent is ``(len(nvec), max(nvec))``: entry ``[c, k]`` says
    whether component c may take ``start[c] + k`` (``k >= nvec[c]`` never).

    ``grid``: the shape of a MultiDiscrete whose ``nvec`` has more than one axis
    (gymnasium allows any rank, e.g. ``nvec`` of shape (2, 3)); ``nvec`` and ``start``
    are then its entries in C order, an action has shape ``grid`` and its
    ``avail_actions`` ``(*grid, max(nvec))``.
    """

    nvec: tuple[int, ...]
    start: tuple[int, ...]
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int64))
    grid: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),) if self.grid is None else self.grid

    @property
    def mask_shape(self) -> tuple[int, ...]:
        return (*self.shape, max(self.nvec))

    def space(self) -> gym.spaces.MultiDiscrete:
        return gym.spaces.MultiDiscrete(np.array(self.nvec).reshape(self.shape), dtype=self.dtype,
                                        start=np.array(self.start).reshape(self.shape))


@dataclass(frozen=True)
class MultiBinaryAction(_UnmaskedAction):
    """Each agent gives an array of ``shape`` of 0s and 1s (gymnasium's MultiBinary)."""

    shape: tuple[int, ...]
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int8))

    def space(self) -> gym.spaces.MultiBinary:
        return gym.spaces.MultiBinary(list(self.shape))


@dataclass(frozen=True)
class ObjectAction(_UnmaskedAction):
    """Each agent gives one value of a space without a fixed shape (Text, Graph,
    Sequence, OneOf, a custom ``Space``): the action buffer is an ``(E, A)`` object
    array holding the values as given (see `marl_vec.core.spaces`)."""

    space_: gym.Space = field(hash=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def dtype(self) -> np.dtype:
        return spaces.OBJECT

    def space(self) -> gym.Space:
        return self.space_

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectAction) and self.space_ == other.space_

    def __hash__(self) -> int:
        return hash(type(self.space_).__name__)


LeafAction = Union[DiscreteAction, ContinuousAction, MultiDiscreteAction, MultiBinaryAction, ObjectAction]


@dataclass(frozen=True)
class TreeAction(_UnmaskedAction):
    """Each agent gives a dict / tuple of actions, as gymnasium's Dict / Tuple action
    spaces take them: ``leaves`` holds each leaf's path and spec (no masks).

    Actions are given as the same tree of ``(E, A, *leaf_shape)`` arrays.
    """

    tree: gym.Space = field(hash=False)
    leaves: tuple[tuple[spaces.Path, LeafAction], ...] = field(hash=False)

    @property
    def shape(self) -> tuple[int, ...]:
        """Leaves have their own shapes (``leaves``); the tree itself has none."""
        return ()

    @property
    def dtype(self) -> np.dtype:
        return spaces.flat_shape_dtype(self.tree)[1]

    def space(self) -> gym.Space:
        return self.tree

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TreeAction) and self.tree == other.tree

    def __hash__(self) -> int:
        return hash(len(self.leaves))


ActionSpec = Union[DiscreteAction, ContinuousAction, MultiDiscreteAction, MultiBinaryAction, ObjectAction, TreeAction]


WAIT = -1
"""Turn-based games: the mover's action that leaves its env unstepped for one step
(no turn is played, zero reward, clear flags; see `marl_vec.vec.turns`)."""


@dataclass(frozen=True)
class EnvSpec:
    """Shapes and dtypes of one env; the batch adds a leading ``(E,)`` axis.

    Attributes:
        agents: agent ids in the fixed order of the agent axis.
        obs_shape, obs_dtype: one agent's observation (padded to the largest agent's).
            For Dict/Tuple observation spaces (``obs_is_tree``): the shape and dtype of
            the observation with its leaves raveled and concatenated (what a trainer
            that flattens gets; the buffers hold one array per leaf instead).
        state_shape, state_dtype: the global state (for trees: flat, like obs_shape).
        action: [`DiscreteAction`][marl_vec.core.spec.DiscreteAction], [`ContinuousAction`][marl_vec.core.spec.ContinuousAction],
            `MultiDiscreteAction`, `MultiBinaryAction` or `TreeAction`.
        episode_limit: the env's own step limit, where it declares one; else None.
        obs_padded: True when some agents' observations are zero-padded to ``obs_shape``.
        actions_padded: True when some agents have fewer native actions than ``n_actions``
            (the extra ones are always unavailable), or smaller Box actions.
        stats: names of the family statistics reported in ``infos[i]["episode"]``.
        obs_space: one agent's (padded) observation space, a gymnasium space; None
            means a Box of ``obs_shape`` and ``obs_dtype``.
        reward_dtype: dtype of the reward array (float32 unless the family or the
            VecEnv's ``reward_dtype`` says otherwise).
        has_state: False when the batch keeps no state (``state="none"``): ``state_shape``
            is ``(0,)``, no state array exists and ``StepResult.state`` is None.
        turn_based: True for turn-based games (PettingZoo AEC envs): one agent moves per
            step, ``StepResult.acting`` marks it and only its action is read. False for
            simultaneous-move envs, whose ``acting`` equals ``agent_mask``.
        env_name: the env's name where the family knows one (for error messages).
        action_names: discrete actions' names, in action order, where the family knows them
            (Melting Pot's FORWARD, TURN_LEFT, FIRE_ZAP, ...); ``env_info()`` then has them too.
        device: where the env computes its outputs, a torch device name (``"cuda:0"``: VMAS's
            ``device=``); None: the host. Process and Ray backends refuse one off the CPU.
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
    # only observations and the state costs nothing. For tree observations the
    # state is a tree too: each leaf the agents' leaves concatenated.
    state_is_obs: bool = False
    obs_space: gym.Space | None = field(default=None, hash=False)
    reward_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    has_state: bool = True
    turn_based: bool = False
    env_name: str | None = field(default=None, compare=False)
    action_names: tuple[str, ...] | None = None
    device: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agents", tuple(str(a) for a in self.agents))
        if self.obs_space is not None:
            spaces.leaves(self.obs_space, "observation space", objects=True)
            shape, dtype = spaces.flat_shape_dtype(self.obs_space)
            if not spaces.is_tree(self.obs_space) and (tuple(self.obs_shape), np.dtype(self.obs_dtype)) != (shape, dtype):
                raise ValueError(f"obs_space {self.obs_space} does not match obs_shape={self.obs_shape}, "
                                 f"obs_dtype={self.obs_dtype}")
            object.__setattr__(self, "obs_shape", shape)
            object.__setattr__(self, "obs_dtype", dtype)
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        object.__setattr__(self, "state_shape", tuple(int(d) for d in self.state_shape))
        object.__setattr__(self, "obs_dtype", np.dtype(self.obs_dtype))
        object.__setattr__(self, "state_dtype", np.dtype(self.state_dtype))
        object.__setattr__(self, "reward_dtype", np.dtype(self.reward_dtype))
        if self.reward_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"reward_dtype must be float32 or float64, got {self.reward_dtype}")
        if not self.agents:
            raise ValueError("EnvSpec needs at least one agent")
        if self.state_is_obs and (
            int(np.prod(self.state_shape)) != len(self.agents) * int(np.prod(self.obs_shape))
            or self.state_dtype != self.obs_dtype
        ):
            raise ValueError("state_is_obs needs a state of the observations' dtype and of n_agents times their size")
        if not self.has_state and (self.state_shape != (0,) or self.state_is_obs):
            raise ValueError("a spec without state (has_state=False) has state_shape (0,) and state_is_obs False")
        if self.action_names is not None:
            object.__setattr__(self, "action_names", tuple(str(n) for n in self.action_names))
            if not self.action.discrete or len(self.action_names) != self.action.n_actions:
                raise ValueError(f"action_names needs one name per discrete action; got {len(self.action_names)} "
                                 f"names for {self.action}")
        if len(set(self.agents)) != len(self.agents):
            raise ValueError(f"EnvSpec agent ids must be unique, got {self.agents}")

    # -- spaces ------------------------------------------------------------------------

    @property
    def single_agent_observation_space(self) -> gym.Space:
        """One agent's observation space (padded to the largest agent's), a gymnasium space."""
        if self.obs_space is not None:
            return self.obs_space
        return spaces.container_box(self.obs_shape, self.obs_dtype)

    @property
    def observation_space(self) -> gym.Space:
        """One env's observations: the single-agent space batched over the agent axis
        (gymnasium's ``batch_space``: leaves get a leading ``A`` axis)."""
        from gymnasium.vector.utils import batch_space

        return batch_space(self.single_agent_observation_space, self.n_agents)

    @property
    def obs_is_tree(self) -> bool:
        """True for Dict/Tuple observations: ``obs`` is a dict or tuple of arrays."""
        return self.obs_space is not None and spaces.is_tree(self.obs_space)

    @property
    def single_agent_action_space(self) -> gym.Space:
        """One agent's action space (padded, see the action classes)."""
        return self.action.space()

    @property
    def action_space(self) -> gym.Space:
        """One env's actions: the single-agent space batched over the agent axis."""
        from gymnasium.vector.utils import batch_space

        return batch_space(self.single_agent_action_space, self.n_agents)

    def state_leaf_shape(self, obs_leaf_shape: tuple[int, ...]) -> tuple[int, ...]:
        """With ``state_is_obs``: the state's shape for an observation leaf of that shape
        (one agent: the leaf's own; several: the agents' leaves raveled, concatenated)."""
        if self.n_agents == 1:
            return tuple(obs_leaf_shape)
        return (self.n_agents * int(np.prod(obs_leaf_shape)),)

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
            **({"action_names": list(self.action_names)} if self.action_names is not None else {}),
            "episode_limit": self.episode_limit,
        }

    def describe(self) -> str:
        """A few readable lines, for ``marl-vec info``."""
        act = self.action
        if isinstance(act, ContinuousAction):
            action = f"continuous {self.action_shape} in [{act.space().low.min()}, {act.space().high.max()}]"
            if act.agent_shapes is not None and act.padded:
                action += f", per agent {', '.join(str(s) for s in act.agent_shapes)}"
        elif isinstance(act, DiscreteAction):
            action = f"discrete, {self.n_actions} actions" + (f" from {act.start}" if act.start else "")
        else:
            action = str(act.space())
        obs = f"{self.obs_shape} {self.obs_dtype}"
        if self.obs_is_tree or (self.obs_space is not None and not isinstance(self.obs_space, gym.spaces.Box)):
            obs = f"{self.single_agent_observation_space}" + (f"  (flat: {obs})" if self.obs_is_tree else "")
        lines = [
            f"agents         {self.n_agents}: {', '.join(self.agents)}",
            f"obs            {obs}" + ("  (zero-padded)" if self.obs_padded else ""),
            f"state          {self.state_shape} {self.state_dtype}" if self.has_state else "state          none",
            f"reward         {self.reward_dtype}",
            f"action         {action}" + (("  (padded; padding ignored)" if isinstance(act, ContinuousAction)
                                              else "  (padded; extra actions unavailable)") if self.actions_padded else ""),
            f"episode_limit  {self.episode_limit}",
        ]
        if self.turn_based:
            lines.append("turns          one agent moves per step (StepResult.acting)")
        if self.stats:
            lines.append(f"episode stats  {', '.join(self.stats)}")
        if self.action_names is not None:
            lines.append(f"action names   {', '.join(self.action_names)}")
        return "\n".join(lines)

    def check_same(self, other: EnvSpec, index: int) -> None:
        """All envs of a batch must share one spec; say how env ``index`` differs."""
        for name in ("agents", "turn_based", "obs_shape", "obs_dtype", "has_state", "state_shape", "state_dtype", "action", "obs_space"):
            mine, theirs = getattr(self, name), getattr(other, name)
            # Observation spaces need the same layout, not the same bounds: the batch's
            # buffers depend only on it (gymnasium's observation_mode="different").
            if name == "obs_space" and _obs_layout(mine) == _obs_layout(theirs):
                continue
            if mine != theirs:
                raise SpecMismatchError(
                    f"env {index} has {name}={theirs!r} but env 0 has {name}={mine!r}; "
                    "every env of a batch must have the same spec",
                    index, name, self, other,
                )


class SpecMismatchError(ValueError, RuntimeError):
    """Envs of one batch whose specs differ ([`EnvSpec.check_same`][marl_vec.core.spec.EnvSpec.check_same]).

    A ValueError (marl_vec's error for bad input) and a RuntimeError, which is what
    gymnasium's vector envs raise for sub-envs with incompatible spaces, so code
    written against either catches it. ``index``: the env that differs; ``field``:
    the spec field; ``first``/``other``: env 0's spec and its.
    """

    def __init__(self, message: str, index: int, field: str, first: "EnvSpec", other: "EnvSpec"):
        super().__init__(message)
        self.index, self.field, self.first, self.other = index, field, first, other

    def __reduce__(self) -> Any:  # picklable (Ray, worker processes) with its attributes
        return type(self), (self.args[0], self.index, self.field, self.first, self.other)


def _obs_layout(space: gym.Space | None) -> Any:
    """What the buffers of an observation space depend on: each leaf's path, kind, shape and dtype."""
    if space is None:
        return None
    return [(path, type(leaf).__name__, *spaces.leaf_shape_dtype(leaf))
            for path, leaf in spaces.leaves(space, objects=True)]

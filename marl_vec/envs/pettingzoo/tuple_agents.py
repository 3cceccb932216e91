"""Level-Based Foraging and the Multi-Robot Warehouse: gymnasium envs whose agents are a Tuple.

``lbforaging`` (family ``lbf``) and ``rware`` (family ``rware``) register
gymnasium envs whose observation and action spaces are ``Tuple``\\ s with one
entry per agent; ``step`` takes a list of actions and returns a list of
rewards and one ``done`` for the whole env. `TupleAgentsAdapter` serves
any env of that kind; the two families differ only in how an episode's end is
told apart (see below) and in their ids.

Conventions (see docs/families/lbf_rware.md):

- Agents: ``agent_0 .. agent_{n-1}``, the order of the Tuple. All always alive.
- Observations: each agent's own (LBF: its vector, or with ``grid_observation``
  its ``(3, 2*sight+1, 2*sight+1)`` grid; RWARE: the flattened vector, the image
  or the Dict of its ``observation_type``), written as the env returns them.
- State: the agents' observations concatenated (neither env has a global state).
- Actions: Discrete (LBF 6, RWARE 5) or MultiDiscrete (RWARE with ``msg_bits``),
  all always available, as EPyMARL serves them: LBF itself turns an invalid move
  into a no-op.
- Rewards: per agent, as the env gives them (float32 in the batch).
- End of episode: both envs report a single ``done`` and never ``truncated``.
  The adapter keeps the two apart, the same for every agent:

  * LBF: ``terminated`` when every food is collected (the goal), ``truncated``
    when ``max_episode_steps`` ran out first.
  * RWARE: the warehouse never reaches a terminal state: its ends are all time
    limits (``max_steps``, or ``max_inactivity_steps`` without a delivery), so
    ``truncated``.

  ``spec.episode_limit`` is LBF's ``max_episode_steps`` / RWARE's ``max_steps``.
- Keyword arguments go to the env's constructor over the registered ones
  (LBF: ``sight``, ``penalty``, ``max_episode_steps``, ``force_coop``,
  ``grid_observation``, ...; RWARE: ``sensor_range``, ``max_steps``,
  ``reward_type``, ``request_queue_size``, ``msg_bits``, ...); an unknown one is
  refused with the list of allowed names (``EnvOptionsError`` through the
  registry); an unknown id raises ``UnknownEnvError`` with close matches.
- Seeding: ``reset(seed=s)`` is the env's ``reset(seed=s)``; ``reset()`` goes on
  with the env's own random stream, as a plain loop does.

Examples:
    >>> env = make_lbf("Foraging-8x8-2p-2f-coop-v3", sight=2, penalty=0.1)
    >>> env.spec.agents, env.spec.obs_shape, env.spec.n_actions, env.spec.episode_limit
    (('agent_0', 'agent_1'), (12,), 6, 50)
    >>> make_rware("rware-tiny-2ag-v2").spec.n_actions
    5
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import RowViews
from marl_vec.core.adapter import NativeEnvAdapter
from marl_vec.envs.extras import UnknownEnvError, require
from marl_vec.envs.gym.actions import action_spec_of
from marl_vec.core.spec import DiscreteAction, EnvSpec


def _lbf_terminal(env: Any) -> bool:
    # LBF ends at the step limit or when the field holds no food; only the latter is the goal.
    return int(env.field.sum()) == 0


def _never_terminal(env: Any) -> bool:
    return False


@dataclasses.dataclass(frozen=True)
class TupleFamily:
    """What differs between the families served by `TupleAgentsAdapter`."""

    name: str  # the registry key
    module: str  # the package whose import registers the gymnasium ids
    extra: str  # the pip extra that installs it
    prefix: str  # the ids it registers start with this
    example: str  # an id, for errors and docs
    limit_attr: str  # the unwrapped env's step limit attribute
    terminal: Callable[[Any], bool]  # at a done step: the goal reached (else a time limit)


LBF = TupleFamily("lbf", "lbforaging", "lbf", "Foraging", "Foraging-8x8-2p-2f-coop-v3", "_max_episode_steps",
                  _lbf_terminal)
RWARE = TupleFamily("rware", "rware", "rware", "rware", "rware-tiny-2ag-v2", "max_steps", _never_terminal)


class TupleAgentsAdapter(NativeEnvAdapter):
    """Wraps one gymnasium env with a Tuple of per-agent spaces (LBF, RWARE).

    Args:
        env: the native env (``env.unwrapped`` is LBF's ``ForagingEnv`` or RWARE's ``Warehouse``).
        family: which family's rule tells a goal from a time limit (`LBF`, `RWARE`).
    """

    def __init__(self, env: gym.Env, family: TupleFamily):
        name = type(env.unwrapped).__name__
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, gym.spaces.Tuple) or not isinstance(act_space, gym.spaces.Tuple):
            raise TypeError(f"{name}: observation and action spaces must be Tuples with one entry per agent, "
                            f"got {obs_space} and {act_space}")
        n = len(obs_space.spaces)
        if len(act_space.spaces) != n or n == 0:
            raise TypeError(f"{name}: {n} observation spaces but {len(act_space.spaces)} action spaces")
        self.env = env
        self.family = family
        self._unwrapped = env.unwrapped
        agents = tuple(f"agent_{i}" for i in range(n))
        actions = {action_spec_of(space, name) for space in act_space.spaces}
        if len(actions) != 1:
            raise TypeError(f"{name}: agents with different action spaces are not supported ({act_space})")
        action = actions.pop()
        self._layout = spaces.AgentLayout(list(obs_space.spaces), agents, f"{name}: observation space")
        obs_space_1 = self._layout.space
        obs_shape, obs_dtype = spaces.flat_shape_dtype(obs_space_1)
        # Every agent's observation has the space's own shape: one assignment writes them all.
        self._stack = not spaces.is_tree(obs_space_1) and not self._layout.padded
        limit = getattr(self._unwrapped, family.limit_attr, None)
        self.spec = EnvSpec(
            agents=agents,
            obs_shape=obs_shape,
            obs_dtype=obs_dtype,
            state_shape=(n * int(np.prod(obs_shape)),),
            state_dtype=obs_dtype,
            action=action,
            episode_limit=int(limit) if isinstance(limit, (int, np.integer)) and limit > 0 else None,
            obs_padded=self._layout.padded,
            state_is_obs=True,
            obs_space=obs_space_1 if spaces.is_tree(obs_space_1) else None,
        )
        self._discrete = isinstance(action, DiscreteAction)

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # `a[j, ...]`: a 0-d view for Discrete leaves (`a[j]` would be a copy).
        self._views = [spaces.writable(self._layout.agent_views(j, spaces.tree_map(lambda a: a[j, ...], row.obs)))
                       for j in range(self.spec.n_agents)]
        row.agent_mask[:] = True
        if row.avail_actions is not None:
            row.avail_actions[:] = True

    def _write_obs(self, obs: Any) -> None:
        if self._stack:
            self.row.obs[...] = obs  # a tuple of equal arrays: numpy stacks it in one call
        else:
            for view, value in zip(self._views, obs):
                view[...] = value

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, info = self.env.reset(seed=seed)
        self._write_obs(obs)
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        # The env takes a list of per-agent actions: Python ints (as a plain loop
        # gives them) or, for MultiDiscrete, each agent's row.
        native = actions.tolist() if self._discrete else list(actions)
        obs, rewards, done, truncated, info = self.env.step(native)
        self._write_obs(obs)
        row = self.row
        row.reward[:] = rewards
        # Both envs say `done` for goal and time limit alike (and truncated=False):
        # the family's rule tells them apart; a TimeLimit wrapper's truncation counts too.
        goal = bool(done) and self.family.terminal(self._unwrapped)
        cut = bool(truncated) or (bool(done) and not goal)
        row.terminated[:] = goal
        row.truncated[:] = cut and not goal
        return info

    def render(self) -> Any:
        # Both envs draw with pyglet (a display is needed) and take the mode as an argument.
        return self.env.unwrapped.render(mode="rgb_array")


def _constructor_params(entry_point: Any) -> list[str]:
    creator = gym.envs.registration.load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return [p for p in inspect.signature(creator).parameters if p not in ("self", "render_mode")]


def _known_ids(family: TupleFamily) -> list[str]:
    return [i for i in gym.registry if i.startswith(family.prefix)]


def make_tuple_env(family: TupleFamily, env_id: str, **kwargs: Any) -> TupleAgentsAdapter:
    """An adapter for the registered ``env_id`` of ``family``, its constructor's
    registered kwargs updated with ``kwargs`` (``max_episode_steps`` included:
    it reaches LBF's constructor, not a gymnasium TimeLimit)."""
    require(family.module, family.extra, f"the {family.name} family")
    if not isinstance(env_id, str) or env_id not in gym.registry or not env_id.startswith(family.prefix):
        close = difflib.get_close_matches(str(env_id), _known_ids(family), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownEnvError(f"unknown {family.name} env id {env_id!r}: name one that {family.module} registers, "
                              f"e.g. {family.example}{hint}")
    spec = gym.spec(env_id)
    allowed = _constructor_params(spec.entry_point)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"unknown {family.name} option(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    # gymnasium's make() keeps max_episode_steps for a TimeLimit of its own; LBF takes it
    # as a constructor argument: put it in the spec's kwargs, where make() passes it on.
    spec = dataclasses.replace(spec, kwargs={**spec.kwargs, **kwargs})
    return TupleAgentsAdapter(gym.make(spec, disable_env_checker=True), family)


def make_lbf(env_id: str, **kwargs: Any) -> TupleAgentsAdapter:
    """The ``lbf`` family: a Level-Based Foraging id, e.g. ``Foraging-8x8-2p-2f-coop-v3``
    (``-2s``: sight 2; ``-coop``: every food needs all agents). Keyword arguments:
    ForagingEnv's (``sight``, ``penalty``, ``max_episode_steps``, ``grid_observation``, ...)."""
    return make_tuple_env(LBF, env_id, **kwargs)


def make_rware(env_id: str, **kwargs: Any) -> TupleAgentsAdapter:
    """The ``rware`` family: a warehouse id, e.g. ``rware-tiny-2ag-v2`` (``-easy``/``-hard``:
    the request queue). Keyword arguments: Warehouse's (``sensor_range``, ``max_steps``,
    ``max_inactivity_steps``, ``reward_type``, ``request_queue_size``, ``msg_bits``, ...)."""
    return make_tuple_env(RWARE, env_id, **kwargs)

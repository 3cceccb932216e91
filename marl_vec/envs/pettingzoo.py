"""Any PettingZoo ``ParallelEnv`` as a fixed-shape multi-agent env.

Conventions (see README.md, "PettingZoo"):

- Agents keep the order of ``possible_agents``.
- Observations follow their space (see :mod:`marl_vec.spaces`; Dict/Tuple give trees).
  Observations of different shapes are zero-padded to the largest, leaf by leaf (per
  dimension when all have the same rank, else flattened and padded); ``spec.obs_padded``
  says so.
- Discrete action spaces of different sizes are padded; padded actions are never
  available. Box action spaces of different shapes are padded to the largest, each
  agent's bounds checked on its own part; the padding is ignored.
- Action masks come from ``{"observation", "action_mask"}`` observation dicts or from
  ``infos[agent]["action_mask"]`` (looked for in the infos of each episode's reset and
  first step); otherwise every native action is available.
- State: ``env.state()`` where the env has a ``state_space``, else the agents'
  (padded) observations concatenated, sharing memory with ``obs`` (free). mpe2's
  ``state()`` is defined as that concatenation, so for mpe2 envs with unpadded
  observations the adapter uses the observations it already has.
- An agent that leaves ``env.agents`` is dead from then on: mask False, zero
  observation and reward, only action 0 available (SMAC's no-op rule); its
  terminated/truncated flags stay as the env last said. At the step it leaves, its
  last reward, flags and observation are written.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec import spaces
from marl_vec.buffers import RowViews
from marl_vec.envs.base import NativeEnvAdapter
from marl_vec.envs.extras import require
from marl_vec.envs.gym import action_spec_of
from marl_vec.spec import ActionSpec, ContinuousAction, DiscreteAction, EnvSpec, MultiDiscreteAction, TreeAction


def _inner_obs_space(space: gym.Space) -> tuple[gym.Space, bool]:
    """The observation part of a space, and whether it carries an action mask."""
    if isinstance(space, gym.spaces.Dict) and "observation" in space.spaces:
        return space.spaces["observation"], "action_mask" in space.spaces
    return space, False


def _episode_limit(env: Any) -> int | None:
    unwrapped = getattr(env, "unwrapped", None)
    # sisl envs keep max_cycles on an inner `env` of their raw env.
    for obj in (env, getattr(env, "aec_env", None), unwrapped, getattr(unwrapped, "env", None)):
        limit = getattr(obj, "max_cycles", None)
        if isinstance(limit, (int, np.integer)) and limit > 0:
            return int(limit)
    return None


def _state_is_concatenated_obs(env: Any) -> bool:
    """True for envs whose ``state()`` is, by its definition, every agent's observation concatenated.

    mpe2's ``SimpleEnv.state()`` recomputes each observation and concatenates them;
    for those envs the adapter takes the observations it already has (a parity
    test checks the values against ``env.state()``).
    """
    try:
        from mpe2._mpe_utils.simple_env import SimpleEnv
    except ImportError:
        return False
    unwrapped = getattr(env, "unwrapped", None)
    return isinstance(unwrapped, SimpleEnv) and type(unwrapped).state is SimpleEnv.state


class PettingZooAdapter(NativeEnvAdapter):
    """Wraps a PettingZoo ``ParallelEnv``."""

    def __init__(self, env: Any):
        self.env = env
        self.agent_ids = tuple(env.possible_agents)
        name = env.metadata.get("name", type(env).__name__) if hasattr(env, "metadata") else type(env).__name__
        obs_spaces, self._obs_has_mask = [], []
        for agent in self.agent_ids:
            inner, has_mask = _inner_obs_space(env.observation_space(agent))
            obs_spaces.append(inner)
            self._obs_has_mask.append(has_mask)
        # Leaf by leaf, each padded to the largest agent's (TypeError for unsupported spaces).
        self._obs_layout = spaces.AgentLayout(obs_spaces, self.agent_ids, f"{name}: observation space")
        obs_space = self._obs_layout.space
        obs_shape, obs_dtype = spaces.flat_shape_dtype(obs_space)
        obs_padded = self._obs_layout.padded
        self._obs_is_tree = spaces.is_tree(obs_space)
        action, actions_padded = self._action_spec(env, name)

        # Where the env's state is its agents' observations concatenated, take the
        # observations already written instead of computing them twice.
        self._has_state = self._env_has_state(env) and not (_state_is_concatenated_obs(env) and not obs_padded)
        if self._has_state:
            state_space = env.state_space
            state_shape, state_dtype = tuple(state_space.shape), np.dtype(state_space.dtype)
        else:
            state_shape, state_dtype = (len(self.agent_ids) * int(np.prod(obs_shape)),), obs_dtype
        self.spec = EnvSpec(
            agents=self.agent_ids,
            obs_shape=obs_shape,
            obs_dtype=obs_dtype,
            state_shape=state_shape,
            state_dtype=state_dtype,
            action=action,
            episode_limit=_episode_limit(env),
            obs_padded=obs_padded,
            actions_padded=actions_padded,
            state_is_obs=not self._has_state,
            obs_space=obs_space,
        )

    def _action_spec(self, env: Any, name: str) -> tuple[ActionSpec, bool]:
        """One action spec for every agent, and whether some agents' actions are padded.

        Discrete spaces of different sizes are padded (extra actions never available;
        they must share their start); Box spaces are padded to the largest with each
        agent's own bounds; MultiDiscrete and MultiBinary must be equal for all agents.
        """
        native = [env.action_space(agent) for agent in self.agent_ids]
        specs = [action_spec_of(space, f"{name}, agent {agent!r}") for space, agent in zip(native, self.agent_ids)]
        self._n_native = [a.n_actions if isinstance(a, DiscreteAction) else 0 for a in specs]
        self._nvec = specs[0].nvec if isinstance(specs[0], MultiDiscreteAction) else None
        # Box actions of padded agents: each agent's (shape, flattened) window of its padded row.
        self._action_windows: list[tuple[tuple[int, ...], bool]] | None = None
        kinds = {type(a) for a in specs}
        if len(kinds) > 1:
            raise TypeError(f"{name}: agents mix action spaces {sorted(k.__name__ for k in kinds)}; "
                            "marl_vec needs one kind for all agents")
        first = specs[0]
        if isinstance(first, DiscreteAction):
            starts = {a.start for a in specs if isinstance(a, DiscreteAction)}
            if len(starts) > 1:
                raise TypeError(f"{name}: agents' Discrete action spaces start at different values {sorted(starts)}; "
                                "marl_vec needs one start for all agents")
            return DiscreteAction(max(self._n_native), start=starts.pop()), len(set(self._n_native)) > 1
        if isinstance(first, ContinuousAction):
            boxes = [a for a in specs if isinstance(a, ContinuousAction)]
            if all(a == first for a in boxes):
                return first, False
            shapes = [a.shape for a in boxes]
            shape, flatten = spaces.padded_shape(shapes)
            dtype = np.result_type(*[a.dtype for a in boxes])
            low = np.full((len(boxes), *shape), -np.inf)
            high = np.full((len(boxes), *shape), np.inf)
            for i, a in enumerate(boxes):
                spaces.window(low[i], a.shape, flatten)[...] = np.broadcast_to(a.low, a.shape)
                spaces.window(high[i], a.shape, flatten)[...] = np.broadcast_to(a.high, a.shape)
            padded = any(s != shape for s in shapes)
            if padded:
                self._action_windows = [(s, flatten) for s in shapes]
            return ContinuousAction(shape, low, high, np.dtype(dtype), agent_shapes=tuple(shapes)), padded
        if any(a != first for a in specs):
            raise TypeError(f"{name}: agents have different {type(first).__name__} action spaces "
                            f"({', '.join(str(s) for s in native)}); marl_vec needs them equal")
        return first, False

    @staticmethod
    def _env_has_state(env: Any) -> bool:
        try:
            space = env.state_space
        except (AttributeError, NotImplementedError):
            return False
        return space is not None and getattr(space, "shape", None) is not None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # Each agent's native-shaped window into its padded obs row (Dict/Tuple
        # observations: a TreeView, written with `view[...] = ob` all the same).
        self._obs_views = [
            spaces.writable(self._obs_layout.agent_views(i, spaces.tree_map(lambda a: a[i, ...], row.obs)))
            for i in range(len(self.agent_ids))
        ]
        self._row_obs = spaces.writable(row.obs)
        self._index = {agent: i for i, agent in enumerate(self.agent_ids)}
        # The agents alive after the last reset or step. Reading `env.agents` goes
        # through several wrapper __getattr__ calls, so it is read once per step.
        self._live: list[str] | None = None
        # Whether the env gives action masks at all; without them, available actions
        # change only when agents die.
        self._env_masks = any(self._obs_has_mask)
        # The common case, stepped with few Python operations (see `step`): every
        # agent alive and listed in possible_agents order (set by `_write`), and our
        # actions are the env's as they are (no padded Box actions to cut).
        self._agent_list = list(self.agent_ids)
        self._all_alive = False
        self._discrete = self.spec.discrete
        self._tree_actions = isinstance(self.spec.action, TreeAction)
        self._actions_as_given = self._action_windows is None and not self._tree_actions

    # -- writing results ----------------------------------------------------------

    def _write(self, obs: dict, infos: dict, live: list[str]) -> None:
        row, index = self.row, self._index
        if len(obs) < len(self.agent_ids):
            self._row_obs.fill(0)
        # Every agent the env still reports on gets its observation, also at the
        # step it leaves (its last one); only agents still in `agents` are alive.
        for agent, ob in obs.items():
            i = index[agent]
            self._obs_views[i][...] = ob["observation"] if self._obs_has_mask[i] else ob
        live_changed = live != self._live
        if live_changed:
            self._live = list(live)
            self._all_alive = self._live == self._agent_list
            row.agent_mask.fill(False)
            for agent in live:
                row.agent_mask[index[agent]] = True
        avail = row.avail_actions
        if avail is not None and (live_changed or self._env_masks):
            avail.fill(False)
            avail[..., 0] = True  # dead agents may only take the no-op (MultiDiscrete: per component)
            for agent in live:
                i = index[agent]
                mask = None
                if self._obs_has_mask[i] and agent in obs:
                    mask = obs[agent]["action_mask"]
                else:
                    info = infos.get(agent)
                    mask = info.get("action_mask") if info else None
                if self._nvec is None:
                    n = self._n_native[i]
                    avail[i, :n] = True if mask is None else np.asarray(mask, dtype=bool)[:n]
                else:
                    _write_multi_discrete_mask(avail[i], mask, self._nvec)
        if self._has_state:
            row.state[...] = self.env.state()
        # else: the buffers' state is these observations (spec.state_is_obs)

    def _agent_actions(self, actions: Any) -> Any:
        """Each agent's action: its row, for padded Box actions its own part of the row,
        for Dict/Tuple actions the tree of its rows."""
        if self._tree_actions:
            return [spaces.tree_map(lambda a: a[i], actions) for i in range(len(self.agent_ids))]
        if self._action_windows is None:
            return actions
        return [spaces.window(actions[i], shape, flat) for i, (shape, flat) in enumerate(self._action_windows)]

    def _look_for_masks(self, infos: dict | None) -> None:
        """Masks in infos are looked for at the start of each episode, not every step."""
        if not self._env_masks and infos:
            self._env_masks = any("action_mask" in info for info in infos.values() if info)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, infos = self.env.reset(seed=seed)
        # The row may still hold the last episode's flags (same_step keeps them for
        # the step that ended it); the first step of this episode starts afresh.
        self._fresh_episode = True
        self._look_for_masks(infos)
        self._live = None
        self._write(obs, infos or {}, list(self.env.agents))
        return {"agents": infos} if infos and any(infos.values()) else {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        row, index = self.row, self._index
        all_alive = self._all_alive
        if all_alive and self._actions_as_given:
            # Python ints at once (cheaper than indexing numpy per agent); Box: row views.
            native = dict(zip(self.agent_ids, actions.tolist() if self._discrete else actions))
        elif self._discrete:
            chosen = actions.tolist()
            native = {a: chosen[index[a]] for a in (self._live or [])}
        else:
            per_agent = self._agent_actions(actions)
            native = {a: per_agent[index[a]] for a in (self._live or [])}
        obs, rewards, terms, truncs, infos = self.env.step(native)
        if self._fresh_episode:
            self._look_for_masks(infos)
        live = self.env.agents
        ids = self.agent_ids
        if all_alive and not self._env_masks and len(obs) == len(ids) and live == self._live:
            # Everyone acted, is still alive and has an observation; no action masks
            # (so no "observation" dicts either): mask and availability stay, and this
            # writes what the general path below would, in fewer operations. Flags are
            # written for every agent, so those of the last episode need no clearing.
            self._fresh_episode = False
            for agent, view in zip(ids, self._obs_views):
                view[...] = obs[agent]
            if self._has_state:
                row.state[...] = self.env.state()
            # Element writes: for a few agents cheaper than converting lists.
            reward, terminated, truncated = row.reward, row.terminated, row.truncated
            for i, agent in enumerate(ids):
                reward[i] = rewards.get(agent, 0.0)
                terminated[i] = bool(terms.get(agent, False))
                truncated[i] = bool(truncs.get(agent, False))
            return {"agents": infos} if infos and any(infos.values()) else {}
        self._write(obs, infos, live)
        # The step's reward and flags for every agent that acted. Dead agents'
        # flags stay in the row as the env last said; their reward is zero.
        if len(native) < len(self.agent_ids):
            row.reward.fill(0.0)
        reward, terminated, truncated = row.reward, row.terminated, row.truncated
        if self._fresh_episode:
            self._fresh_episode = False
            terminated.fill(False)
            truncated.fill(False)
        for agent in native:
            i = index[agent]
            reward[i] = rewards.get(agent, 0.0)
            t, u = bool(terms.get(agent, False)), bool(truncs.get(agent, False))
            if not (t or u) and agent not in live:
                t = True  # left `agents` without a flag: it is dead all the same
            terminated[i], truncated[i] = t, u
        if not live:
            # The env ended; an agent it never flagged was cut off with it.
            np.logical_or(truncated, ~(terminated | truncated), out=truncated)
        return {"agents": infos} if infos and any(infos.values()) else {}


def _write_multi_discrete_mask(avail: np.ndarray, mask: Any, nvec: tuple[int, ...]) -> None:
    """One agent's ``(k, max_n)`` availability from a MultiDiscrete mask: None (all),
    a sequence of k per-component masks (gymnasium's ``sample(mask=...)`` form),
    a ``(k, >= max n)`` array or the k masks concatenated."""
    if mask is None:
        for c, n in enumerate(nvec):
            avail[c, :n] = True
        return
    if isinstance(mask, (tuple, list)):
        parts = [np.asarray(m, dtype=bool) for m in mask]
    else:
        array = np.asarray(mask, dtype=bool)
        if array.ndim == 2:
            parts = list(array)
        else:
            bounds = np.cumsum((0, *nvec))
            parts = [array[bounds[c]:bounds[c + 1]] for c in range(len(nvec))]
    for c, (n, part) in enumerate(zip(nvec, parts)):
        avail[c, :n] = part[:n]


def make_pettingzoo(env_id: str, **kwargs: Any) -> PettingZooAdapter:
    """The ``pettingzoo`` family: ``env_id`` names a module with ``parallel_env``.

    For example ``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``,
    ``pettingzoo.sisl.multiwalker_v9`` or ``magent2.environments.battle_v4``.
    """
    module = require(env_id, "pettingzoo", f"the PettingZoo env {env_id!r}")
    if not hasattr(module, "parallel_env"):
        raise ValueError(f"{env_id!r} has no parallel_env(); name a PettingZoo env module such as mpe2.simple_spread_v3")
    return PettingZooAdapter(module.parallel_env(**kwargs))

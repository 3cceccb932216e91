"""Any PettingZoo ``ParallelEnv`` as a fixed-shape multi-agent env.

Conventions (see README.md, "PettingZoo"):

- Agents keep the order of ``possible_agents``.
- Observations of different shapes are zero-padded to the largest (per dimension
  when all have the same rank, else flattened and padded); ``spec.obs_padded`` says so.
- Discrete action spaces of different sizes are padded; padded actions are never available.
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

from typing import Any, cast

import gymnasium as gym
import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.base import NativeEnvAdapter
from marl_vec.envs.extras import require
from marl_vec.envs.gym import action_spec_of
from marl_vec.spec import ContinuousAction, DiscreteAction, EnvSpec


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
            if not hasattr(inner, "shape") or inner.shape is None:
                raise TypeError(
                    f"{name}: observation space {inner} of agent {agent!r} is not supported; allowed: Box, "
                    "Discrete, MultiDiscrete, MultiBinary, or a dict of 'observation' and 'action_mask'"
                )
            obs_spaces.append(inner)
            self._obs_has_mask.append(has_mask)
        # Every space has a shape: checked above.
        self._obs_native_shapes = [tuple(cast("tuple[int, ...]", s.shape)) for s in obs_spaces]
        obs_dtype = np.result_type(*[s.dtype for s in obs_spaces])
        ranks = {len(s) for s in self._obs_native_shapes}
        if len(set(self._obs_native_shapes)) == 1:
            obs_shape, self._flatten_obs = self._obs_native_shapes[0], False
        elif len(ranks) == 1:
            obs_shape = tuple(int(d) for d in np.max(self._obs_native_shapes, axis=0))
            self._flatten_obs = False
        else:
            obs_shape = (max(int(np.prod(s)) for s in self._obs_native_shapes),)
            self._flatten_obs = True
        obs_padded = any(s != obs_shape for s in self._obs_native_shapes)

        action_specs = [action_spec_of(env.action_space(agent), f"{name}, agent {agent!r}") for agent in self.agent_ids]
        if all(isinstance(a, DiscreteAction) for a in action_specs):
            self._n_native = [a.n_actions for a in action_specs if isinstance(a, DiscreteAction)]  # all of them
            self._action_starts = [int(getattr(env.action_space(a), "start", 0)) for a in self.agent_ids]
            action: DiscreteAction | ContinuousAction = DiscreteAction(max(self._n_native))
            actions_padded = len(set(self._n_native)) > 1
        elif all(isinstance(a, ContinuousAction) for a in action_specs):
            first = action_specs[0]
            if any(a != first for a in action_specs):
                raise TypeError(f"{name}: agents have different Box action spaces; marl_vec needs one shared Box")
            action, actions_padded = first, False
        else:
            raise TypeError(f"{name}: agents mix Discrete and Box action spaces; marl_vec needs one kind")

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
        )

    @staticmethod
    def _env_has_state(env: Any) -> bool:
        try:
            space = env.state_space
        except (AttributeError, NotImplementedError):
            return False
        return space is not None and getattr(space, "shape", None) is not None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # Each agent's native-shaped window into its padded obs row.
        self._obs_views = []
        for i, shape in enumerate(self._obs_native_shapes):
            if self._flatten_obs:
                self._obs_views.append(row.obs[i][: int(np.prod(shape))].reshape(shape))
            else:
                self._obs_views.append(row.obs[i][tuple(slice(0, d) for d in shape)])
        self._index = {agent: i for i, agent in enumerate(self.agent_ids)}
        # The agents alive after the last reset or step. Reading `env.agents` goes
        # through several wrapper __getattr__ calls, so it is read once per step.
        self._live: list[str] | None = None
        # Whether the env gives action masks at all; without them, available actions
        # change only when agents die.
        self._env_masks = any(self._obs_has_mask)
        # The common case, stepped with few Python operations (see `step`): every
        # agent alive and listed in possible_agents order (set by `_write`), and our
        # actions are the env's as they are (no Discrete start to add).
        self._agent_list = list(self.agent_ids)
        self._all_alive = False
        self._discrete = self.spec.discrete
        self._actions_as_given = not self._discrete or not any(self._action_starts)

    # -- writing results ----------------------------------------------------------

    def _write(self, obs: dict, infos: dict, live: list[str]) -> None:
        row, index = self.row, self._index
        if len(obs) < len(self.agent_ids):
            row.obs.fill(0)
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
            avail[:, 0] = True  # dead agents may only take the no-op
            for agent in live:
                i = index[agent]
                mask = None
                if self._obs_has_mask[i] and agent in obs:
                    mask = obs[agent]["action_mask"]
                else:
                    info = infos.get(agent)
                    mask = info.get("action_mask") if info else None
                n = self._n_native[i]
                avail[i, :n] = True if mask is None else np.asarray(mask, dtype=bool)[:n]
        if self._has_state:
            row.state[...] = self.env.state()
        # else: the buffers' state is these observations (spec.state_is_obs)

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
            acting = self._live or []
            starts = self._action_starts
            chosen = actions.tolist()
            native = {a: chosen[index[a]] + starts[index[a]] for a in acting}
        else:
            native = {a: actions[index[a]] for a in (self._live or [])}
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


def make_pettingzoo(env_id: str, **kwargs: Any) -> PettingZooAdapter:
    """The ``pettingzoo`` family: ``env_id`` names a module with ``parallel_env``.

    For example ``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``,
    ``pettingzoo.sisl.multiwalker_v9`` or ``magent2.environments.battle_v4``.
    """
    module = require(env_id, "pettingzoo", f"the PettingZoo env {env_id!r}")
    if not hasattr(module, "parallel_env"):
        raise ValueError(f"{env_id!r} has no parallel_env(); name a PettingZoo env module such as mpe2.simple_spread_v3")
    return PettingZooAdapter(module.parallel_env(**kwargs))

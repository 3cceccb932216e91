"""Any PettingZoo ``ParallelEnv`` as a fixed-shape multi-agent env.

Conventions (see docs/families/pettingzoo.md and docs/concepts/agents.md):

- Agents keep the order of ``possible_agents``.
- Observations follow their space (see `marl_vec.core.spaces`; Dict/Tuple give trees).
  Observations of different shapes are zero-padded to the largest, leaf by leaf (per
  dimension when all have the same rank, else flattened and padded); ``spec.obs_padded``
  says so.
- Discrete action spaces of different sizes are padded; padded actions are never
  available. Box action spaces of different shapes are padded to the largest, each
  agent's bounds checked on its own part; the padding is ignored.
- Action masks come from ``{"observation", "action_mask"}`` observation dicts or from
  ``infos[agent]["action_mask"]`` (looked for in the infos of each episode's reset and
  first step); otherwise every native action is available.
- State (``state=``, see `marl_vec.core.state`): ``auto`` is ``env.state()`` where
  the env has a ``state_space``, else the agents' (padded) observations
  concatenated, sharing memory with ``obs`` (free). mpe2's ``state()`` is defined
  as that concatenation, so for mpe2 envs with unpadded observations the adapter
  uses the observations it already has. Where ``state()`` raises under ``auto``
  (multiwalker after a walker fell, magent2 when a team is empty), the state row
  is zeros on that step and the info says ``state_unavailable``; a warning names
  the env and the error once per process.
- An agent that leaves ``env.agents`` is dead: mask False, zero observation and
  reward, only action 0 available (SMAC's no-op rule); its terminated/truncated
  flags stay as the env last said. At the step it leaves, its last reward, flags
  and observation are written. An agent that re-enters ``env.agents`` (respawn)
  is alive again with clear flags, so ``done`` is True exactly when ``env.agents``
  is empty.

Speed: results are written with array operations over the agents the env
reported (index arrays rebuilt only when that set of agents changes); per-agent
Python is left only in building the action dict the env takes. Observations of
one array shape for every agent (the common case) go into the row with one
``np.concatenate``; Dict/Tuple observations, padded ones and those inside action-mask
dicts are written agent by agent, leaf by leaf.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import RowViews
from marl_vec.core.adapter import NativeEnvAdapter
from marl_vec.envs.gym.actions import action_spec_of
from marl_vec.core.spec import ActionSpec, ContinuousAction, DiscreteAction, EnvSpec, MultiDiscreteAction, TreeAction


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


def _packed_dtype(array: np.ndarray) -> np.dtype | None:
    """A void dtype covering ``array``'s last axis, where copying it as such is faster.

    Pixel arrays from pygame envs (pistonball, cooperative_pong) are transposed
    views whose 3 colour bytes are contiguous: numpy copies them a byte at a time,
    with a cache miss on nearly every one. Viewed as one 3-byte item per pixel the
    same copy moves three times fewer items, 2-3x faster. None where this does not
    apply (C-contiguous arrays copy fast already).
    """
    if array.ndim < 2 or array.flags.c_contiguous or array.strides[-1] != array.itemsize:
        return None
    size = array.shape[-1] * array.itemsize
    return np.dtype(f"V{size}") if 1 < size <= 16 else None


def _assign(dst: np.ndarray, src: Any, packed: np.dtype | None) -> None:
    """``dst[...] = src``; with ``packed``, as items of that dtype (see _packed_dtype)."""
    if packed is not None and isinstance(src, np.ndarray) and src.dtype == dst.dtype and src.shape == dst.shape:
        try:
            dst.view(packed)[...] = src.view(packed)
            return
        except ValueError:  # this array's last axis is not contiguous after all
            pass
    dst[...] = src


class StateUnavailableError(RuntimeError):
    """``state='env'`` was asked and the env's ``state()`` raised."""


# Env names (and errors) already warned about in this process: the fallback of
# ``state='auto'`` warns once, not at every step of every copy.
_warned_state: set[tuple[str, str]] = set()


class PettingZooAdapter(NativeEnvAdapter):
    """Wraps a PettingZoo ``ParallelEnv``."""

    def __init__(self, env: Any):
        self.env = env
        self.agent_ids = tuple(env.possible_agents)
        name = env.metadata.get("name", type(env).__name__) if hasattr(env, "metadata") else type(env).__name__
        self.name = str(name)
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

        self._env_state = self._env_has_state(env)
        # Where the env's state is its agents' observations concatenated, take the
        # observations already written instead of computing them twice.
        self._state_from_obs = _state_is_concatenated_obs(env) and not obs_padded
        self.spec = EnvSpec(
            agents=self.agent_ids,
            obs_shape=obs_shape,
            obs_dtype=obs_dtype,
            state_shape=(0,),
            state_dtype=obs_dtype,
            action=action,
            episode_limit=_episode_limit(env),
            obs_padded=obs_padded,
            actions_padded=actions_padded,
            obs_space=obs_space,
            has_state=False,
        )
        self.use_state("auto")

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

    def use_state(self, mode: str) -> None:
        """``auto``/``env``: ``env.state()`` (``env`` refuses an env without one);
        ``concat``: the observations; ``none``: nothing. See `marl_vec.core.state`."""
        if mode not in ("auto", "env", "concat", "none"):
            raise ValueError(f"unknown state mode {mode!r}; allowed: auto, env, concat, none")
        if mode == "env" and not self._env_state:
            raise ValueError(
                f"state='env': {self.name} has no state_space, so no state() of its own; "
                "allowed here: auto, concat (the agents' observations concatenated), none"
            )
        self._state_mode = mode
        spec = self.spec
        # Whether step and reset call env.state().
        self._call_state = mode in ("auto", "env") and self._env_state and not self._state_from_obs
        if mode == "none":
            self.spec = dataclasses.replace(spec, state_shape=(0,), state_dtype=spec.obs_dtype,
                                            state_is_obs=False, has_state=False)
        elif self._call_state:
            space = self.env.state_space
            self.spec = dataclasses.replace(spec, state_shape=tuple(space.shape), state_dtype=np.dtype(space.dtype),
                                            state_is_obs=False, has_state=True)
        else:
            # One agent: its observation's own shape; several: raveled, concatenated (the buffers' view).
            self.spec = dataclasses.replace(spec, state_shape=spec.state_leaf_shape(tuple(spec.obs_shape)), state_dtype=spec.obs_dtype,
                                            state_is_obs=True, has_state=True)

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
        A = len(self.agent_ids)
        shape = self.spec.obs_shape
        # Observations go in with one concatenate call into the row when every agent's
        # observation has the row's shape and is a plain array (no Dict/Tuple tree, no
        # action-mask dict); agents the env did not report get a zero array in their place.
        self._obs_by_array = (not self._obs_is_tree and not self.spec.obs_padded and not any(self._obs_has_mask)
                              and len(shape) >= 1)
        if self._obs_by_array:
            self._obs_rows_flat = row.obs.reshape((A * shape[0], *shape[1:]))  # the row's memory: contiguous
            self._zero_obs = np.zeros(shape, row.obs.dtype)
        # The agents alive after the last reset or step (env.agents, read once per
        # step: it goes through several wrapper __getattr__ calls), their indices.
        self._live: list[str] = []
        self._live_idx: list[int] = []
        self._live_array = np.zeros(0, dtype=np.intp)
        self._all_alive = False
        # The agents of the last observation dict (per-agent path: rows of the others
        # are zeroed when it changes).
        self._obs_keys: list[str] | None = None
        # Packed dtypes (see _packed_dtype) of observations and state, decided from
        # the first one seen (None: copied as they are).
        self._obs_packed: np.dtype | None = None
        self._state_packed: np.dtype | None = None
        self._obs_layout_seen = self._state_layout_seen = False
        # Whether the env gives action masks at all; without them, available actions
        # change only when agents die. Only actions with masks (Discrete, MultiDiscrete)
        # have an avail_actions row to write them into.
        avail = row.avail_actions
        self._has_avail = avail is not None
        self._env_masks = self._has_avail and any(self._obs_has_mask)
        self._agent_list = list(self.agent_ids)
        self._discrete = self.spec.discrete
        # Actions are taken in the env's own numbering (Discrete start included), so
        # discrete ones go as they are; padded Box and Dict/Tuple ones per agent.
        self._tree_actions = isinstance(self.spec.action, TreeAction)
        self._actions_as_given = self._action_windows is None and not self._tree_actions
        if avail is not None:
            # Each agent's native actions (padded ones never available), for rows of live agents.
            self._avail_live = np.zeros(avail.shape, dtype=bool)
            for i, n in enumerate(self._n_native):
                if self._nvec is None:
                    self._avail_live[i, :n] = True
                else:
                    _write_multi_discrete_mask(self._avail_live[i], None, self._nvec)

    # -- writing results ----------------------------------------------------------

    def _write_obs(self, obs: dict) -> None:
        """Every agent the env reports on gets its observation (also at the step it
        leaves: its last one); the others' rows are zero."""
        row = self.row
        if self._obs_by_array and obs:
            values = list(obs.values())
            if len(values) < len(self._agent_list) or list(obs) != self._agent_list:
                zero = self._zero_obs
                values = [obs.get(agent, zero) for agent in self._agent_list]
            if not self._obs_layout_seen:  # the first observation: look at its layout once
                self._obs_layout_seen = True
                first = values[0]
                same = isinstance(first, np.ndarray) and first.dtype == row.obs.dtype
                self._obs_packed = _packed_dtype(first) if same else None
            out, packed = self._obs_rows_flat, self._obs_packed
            if packed is None or not self._concatenate_packed(values, out, packed):
                np.concatenate(values, axis=0, out=out, casting="unsafe")
            return
        keys = list(obs)
        if keys != self._obs_keys:
            self._obs_keys = keys
            if len(keys) < len(self._agent_list):
                self._row_obs.fill(0)  # rows of agents not reported stay zero until the set changes
        index, views, has_mask = self._index, self._obs_views, self._obs_has_mask
        for agent, ob in obs.items():
            i = index[agent]
            views[i][...] = ob["observation"] if has_mask[i] else ob

    @staticmethod
    def _concatenate_packed(values: list, out: np.ndarray, packed: np.dtype) -> bool:
        """Concatenate ``values`` as packed items (see _packed_dtype); False where one
        does not fit that view (the caller then concatenates them as they are)."""
        try:
            np.concatenate([v.view(packed) for v in values], axis=0, out=out.view(packed))
        except (ValueError, TypeError, AttributeError):  # a value of another layout or type
            return False
        return True

    def _set_live(self, live: list[str]) -> None:
        """``live`` differs from the last step's: mask and (without env masks) availability."""
        row = self.row
        self._live = list(live)
        self._all_alive = self._live == self._agent_list
        self._live_idx = [self._index[a] for a in live]
        self._live_array = np.asarray(self._live_idx, dtype=np.intp)
        row.agent_mask.fill(False)
        row.agent_mask[self._live_array] = True
        avail = row.avail_actions
        if avail is not None and not self._env_masks:
            avail.fill(False)
            avail[..., 0] = True  # dead agents may only take the no-op (MultiDiscrete: per component)
            avail[self._live_array] = self._avail_live[self._live_array]

    def _write_env_masks(self, obs: dict, infos: dict) -> None:
        avail = self.row.avail_actions
        assert avail is not None  # env masks are written only where actions have masks
        avail.fill(False)
        avail[..., 0] = True  # dead agents may only take the no-op (MultiDiscrete: per component)
        for agent in self._live:
            i = self._index[agent]
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

    def _write_state(self) -> bool:
        """``env.state()`` into the row; False (zeros) where it raised under ``auto``."""
        state = self.row.state
        assert state is not None  # _call_state implies a state row
        try:
            value = self.env.state()
        except Exception as exc:  # any error of the env's state(): a plain loop never calls it
            if self._state_mode == "env":
                raise StateUnavailableError(
                    f"{self.name}: env.state() raised {type(exc).__name__}: {exc}; state='env' was asked. "
                    "Use state='auto' (zeros on the steps where state() fails) or state='concat'"
                ) from exc
            state.fill(0)
            key = (self.name, f"{type(exc).__name__}: {exc}")
            if key not in _warned_state:
                _warned_state.add(key)
                warnings.warn(
                    f"{self.name}: env.state() raised {key[1]}; with state='auto' the state is zeros on the steps "
                    "where it fails (infos[i]['state_unavailable'] is True). Use state='concat' for the agents' "
                    "observations, or state='none'.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return False
        if not self._state_layout_seen:  # first state of this adapter: look at its layout once
            self._state_layout_seen = True
            self._state_packed = _packed_dtype(value) if isinstance(value, np.ndarray) else None
        _assign(state, value, self._state_packed)
        return True

    def _look_for_masks(self, infos: dict | None) -> None:
        """Masks in infos are looked for at the start of each episode, not every step."""
        if not self._env_masks and self._has_avail and infos:
            self._env_masks = any("action_mask" in info for info in infos.values() if info)

    def _infos(self, infos: dict | None, state_ok: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"agents": infos} if infos and any(infos.values()) else {}
        if not state_ok:
            out["state_unavailable"] = True
        return out

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, infos = self.env.reset(seed=seed)
        return self._record_reset(obs, infos)

    def _record_reset(self, obs: dict | None, infos: dict) -> dict[str, Any]:
        """Write what a reset returned; ``obs`` None: a fast path wrote the observations."""
        # The row may still hold the last episode's flags (same_step keeps them for
        # the step that ended it); the first step of this episode starts afresh.
        self._fresh_episode = True
        self._look_for_masks(infos)
        self._obs_keys = None
        if obs is not None:
            self._write_obs(obs)
        self._set_live(list(self.env.agents))
        if self._env_masks:
            self._write_env_masks(obs or {}, infos or {})
        state_ok = self._write_state() if self._call_state else True
        return self._infos(infos, state_ok)

    def _agent_actions(self, actions: Any) -> Any:
        """Each agent's action: its row, for padded Box actions its own part of the row,
        for Dict/Tuple actions the tree of its rows."""
        if self._tree_actions:
            return [spaces.tree_map(lambda a: a[i], actions) for i in range(len(self.agent_ids))]
        if self._action_windows is None:
            return actions
        return [spaces.window(actions[i], shape, flat) for i, (shape, flat) in enumerate(self._action_windows)]

    def _native_actions(self, actions: Any) -> dict[str, Any]:
        if self._discrete:
            # Python ints at once: cheaper than indexing numpy per agent.
            chosen = actions.tolist()
            if self._all_alive:
                return dict(zip(self.agent_ids, chosen))
            return dict(zip(self._live, [chosen[i] for i in self._live_idx]))
        per_agent = actions if self._actions_as_given else self._agent_actions(actions)
        if self._all_alive:
            return dict(zip(self.agent_ids, per_agent))  # row views
        return dict(zip(self._live, [per_agent[i] for i in self._live_idx]))

    def step(self, actions: Any) -> dict[str, Any]:
        acted, acted_array = self._live, self._live_array
        obs, rewards, terms, truncs, infos = self.env.step(self._native_actions(actions))
        return self._record_step(acted, acted_array, obs, rewards, terms, truncs, infos)

    def _record_step(self, acted: list[str], acted_array: np.ndarray, obs: dict | None, rewards: dict,
                     terms: dict, truncs: dict, infos: dict) -> dict[str, Any]:
        """Write what a step of the agents ``acted`` returned; ``obs`` None: a fast
        path wrote the observations."""
        row = self.row
        if self._fresh_episode:
            self._look_for_masks(infos)
        live = self.env.agents
        if obs is not None:
            self._write_obs(obs)
        reward, terminated, truncated = row.reward, row.terminated, row.truncated
        if self._fresh_episode:
            self._fresh_episode = False
            terminated.fill(False)
            truncated.fill(False)
        # The step's reward and flags for every agent that acted. Dead agents' flags
        # stay in the row as the env last said; their reward is zero.
        if not self._all_alive:
            reward.fill(0.0)
        if list(rewards) == acted and list(terms) == acted and list(truncs) == acted:
            # The usual layout: each dict has the agents that acted, in order.
            reward[acted_array] = list(rewards.values())
            terminated[acted_array] = list(terms.values())
            truncated[acted_array] = list(truncs.values())
        else:
            for agent, i in zip(acted, self._live_idx):
                reward[i] = rewards.get(agent, 0.0)
                terminated[i] = bool(terms.get(agent, False))
                truncated[i] = bool(truncs.get(agent, False))
        if live != acted:
            live_set = set(live)
            for agent, i in zip(acted, self._live_idx):
                if agent not in live_set and not (terminated[i] or truncated[i]):
                    terminated[i] = True  # left `agents` without a flag: it is dead all the same
            acted_set = set(acted)
            for agent in live:
                if agent not in acted_set:  # back in `agents` (respawn): alive, flags clear
                    i = self._index[agent]
                    terminated[i] = truncated[i] = False
            self._set_live(list(live))
            if not live:
                # The env ended; an agent it never flagged was cut off with it.
                np.logical_or(truncated, ~(terminated | truncated), out=truncated)
        if self._env_masks:
            self._write_env_masks(obs or {}, infos)
        state_ok = self._write_state() if self._call_state else True
        return self._infos(infos, state_ok)


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

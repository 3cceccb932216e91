"""TorchRLEnv: a TorchRL ``EnvBase`` over any marl_vec VecEnv (extra ``torchrl``).

The layout is TorchRL's multi-agent one (as its ``PettingZooWrapper`` / ``VmasEnv``),
with ``batch_size=(E,)`` and the agents split into groups:

- ``(group, "observation")`` (E, A_g, *obs_shape); ``(group, "action_mask")``
  (E, A_g, n_actions) bool only where the env has masks (see ``action_mask``);
  ``(group, "mask")`` (E, A_g) bool, the agents alive, only with ``agent_mask=True`` (where an
  env finished: the final step's, as the observation; no agent of a finished env is alive);
  ``(group, "acting")`` (E, A_g) bool, the agent to move, for turn-based games
  (``spec.turn_based``: only its action is read; their action masks are on by default,
  and the action spec's mask lets the others take any action, which is ignored);
  ``"state"`` (E, *state_shape) where the VecEnv has a state. A Dict observation space
  (Melting Pot's ``RGB``, ``READY_TO_SHOOT``, ...) gives ``(group, "observation")`` as a
  nested TensorDict with one entry per key, (E, A_g, *leaf_shape), a scalar leaf as
  (E, A_g, 1) as TorchRL's ``MeltingpotEnv`` has it; Tuple spaces and object leaves
  (Text, Graph) are refused.
- ``(group, "action")``: discrete (E, A_g) int64 (categorical, never one-hot);
  continuous (E, A_g, *action_shape) float32 within the env's bounds.
- ``(group, "reward")`` (E, A_g, 1) float32.
- ``(group, "done" | "terminated" | "truncated")`` (E, A_g, 1) per agent, and at the
  root (E, 1): ``done`` is the env finishing its episode; ``terminated`` when every
  agent terminated, else ``truncated``.

Autoreset: the VecEnv must run in ``same_step`` (or ``fast``) mode. A step hands
back the episode's last observation (``final_obs``) where an env finished, and
keeps the new episode's start, which the VecEnv already made; ``reset`` with a
``"_reset"`` mask (what TorchRL's collectors and rollouts pass after an episode
ends) then hands back that start instead of resetting again; masked envs that did
not just finish are really reset (``venv.reset(env_ids=...)``). A ``reset()``
without a ``"_reset"`` entry resets every env, as ``PettingZooWrapper`` does.

Seeding: ``set_seed(s)`` resets every env at once with seed ``s + i`` (as
``PettingZooWrapper`` resets with its seed); the constructor does the same
with ``seed`` (default: the VecEnv's own ``env_seed``, by an unseeded reset).

Groups (``group_map``): None -> one group ``"agents"``; ``"prefix"`` -> agents named
``name_<int>`` grouped by ``name`` (PettingZooWrapper's default, e.g. ``adversary`` /
``agent`` in simple_tag); or a dict ``{group: [agent ids]}`` covering every agent
once. Observations keep the VecEnv's padded per-agent shape in every group.

Examples:
    >>> import marl_vec as mv
    >>> from marl_vec.compat.torchrl import TorchRLEnv
    >>> env = TorchRLEnv(mv.make("mpe/simple_spread", num_envs=2))
    >>> td = env.rollout(5)
    >>> td["agents", "observation"].shape, td["next", "agents", "reward"].shape
    (torch.Size([2, 5, 3, 18]), torch.Size([2, 5, 3, 1]))
    >>> env.close()
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from marl_vec.envs.extras import missing_extra_message

try:
    import torch
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import Bounded, Categorical, Composite, Unbounded
    from torchrl.envs import EnvBase
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(missing_extra_message("torchrl", "torchrl", "TorchRLEnv", exc)) from exc

from marl_vec.core.episode import AutoresetMode
from marl_vec.core.devices import torch_device
from marl_vec.core.spec import ContinuousAction, EnvSpec
from marl_vec.vec.base import StepResult, VecEnv

GroupMap = Mapping[str, Sequence[str]]


def prefix_group_map(agents: Sequence[str]) -> dict[str, list[str]]:
    """PettingZooWrapper's default grouping: ``name_<int>`` -> group ``name``; other names alone.

    ```pycon
    >>> prefix_group_map(["adversary_0", "adversary_1", "agent_0", "leader"])
    {'adversary': ['adversary_0', 'adversary_1'], 'agent': ['agent_0'], 'leader': ['leader']}
    ```
    """
    groups: dict[str, list[str]] = {}
    for agent in agents:
        name, _, number = agent.rpartition("_")
        group = name if name and number.isdigit() else agent
        groups.setdefault(group, []).append(agent)
    return groups


def _check_group_map(group_map: GroupMap | str | None, agents: tuple[str, ...]) -> dict[str, list[str]]:
    if group_map is None:
        return {"agents": list(agents)}
    if group_map == "prefix":
        return prefix_group_map(agents)
    if isinstance(group_map, str) or not isinstance(group_map, Mapping):
        raise ValueError(f"group_map must be None, 'prefix' or a dict {{group: [agent ids]}}, got {group_map!r}")
    listed = [a for members in group_map.values() for a in members]
    if sorted(listed) != sorted(agents):
        raise ValueError(
            f"group_map must name every agent exactly once; agents are {list(agents)}, group_map names {listed}"
        )
    for group, members in group_map.items():
        if not members or "/" in group or group in ("state", "done", "terminated", "truncated", "_reset"):
            raise ValueError(f"group_map: group {group!r} must be a non-empty list under a name other than "
                             "'state', 'done', 'terminated', 'truncated', '_reset', without '/'")
    return {g: list(m) for g, m in group_map.items()}


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def _tree(fn: Any, *trees: Any) -> Any:
    """``fn`` over the leaves of nested dicts (a Dict observation) or over plain arrays."""
    if isinstance(trees[0], dict):
        return {k: _tree(fn, *(t[k] for t in trees)) for k in trees[0]}
    return fn(*trees)


def _result_spec(value: Any, batch: tuple[int, ...], device: Any) -> Any:
    """The spec of a result's tensor, or a Composite of a dict of them (shapes and dtypes as they are)."""
    if isinstance(value, dict):
        return Composite({k: _result_spec(v, batch, device) for k, v in value.items()}, shape=batch)
    return Unbounded(shape=tuple(value.shape), dtype=value.dtype, device=device)


def _leaf_specs(space: Any, batch: tuple[int, ...], device: Any) -> Any:
    """A Composite mirroring a (nested) gymnasium Dict space, leaves batched over ``batch``;
    scalar leaves get a trailing 1, as TorchRL's ``MeltingpotEnv``; other spaces are refused."""
    if isinstance(space, gym.spaces.Dict):
        return Composite({k: _leaf_specs(v, batch, device) for k, v in space.spaces.items()}, shape=batch)
    if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)):
        raise TypeError(f"TorchRLEnv takes array and Dict observations (Box, Discrete, MultiBinary, MultiDiscrete "
                        f"leaves); this VecEnv's observation space holds {space}")
    shape = tuple(space.shape) or (1,)
    return Unbounded(shape=(*batch, *shape), dtype=_torch_dtype(np.dtype(space.dtype)), device=device)


class TorchRLEnv(EnvBase):
    """A TorchRL multi-agent ``EnvBase`` over a marl_vec VecEnv; see the module docstring.

    Args:
        venv: the VecEnv (any backend, any family), in ``same_step`` or ``fast`` autoreset mode.
            The face owns it: ``close()`` closes it.
        group_map: None (one group ``"agents"``), ``"prefix"``, or ``{group: [agent ids]}``.
        action_mask: expose ``(group, "action_mask")``. None: where the actions are
            discrete and the env masks some (padded actions, or an action unavailable at
            the first reset). Refused for continuous actions.
        agent_mask: expose ``(group, "mask")``, which agents are alive.
        seed: reset with this seed at construction; None: the VecEnv's ``env_seed``.
        device: where the tensors go. None: the CPU for a numpy-mode VecEnv; for a
            torch-mode DummyVecEnv (``array_backend="torch"``) its own ``device``, where its
            tensors are passed through (VMAS's engine writes them there: no host round trip);
            another device is refused.
    """

    def __init__(self, venv: VecEnv, group_map: GroupMap | str | None = None, action_mask: bool | None = None,
                 agent_mask: bool = False, seed: int | None = None, device: Any = None):
        if not isinstance(venv, VecEnv):
            raise TypeError(f"TorchRLEnv wraps a marl_vec VecEnv, got {type(venv).__name__}")
        if venv.autoreset not in (AutoresetMode.SAME_STEP, AutoresetMode.FAST):
            raise ValueError(
                f"TorchRLEnv needs a VecEnv with autoreset='same_step' or 'fast' (TorchRL resets finished envs "
                f"itself, after seeing the final observation), got autoreset={venv.autoreset.value!r}"
            )
        array_backend = getattr(venv, "array_backend", "numpy")
        if array_backend not in ("numpy", "torch"):
            raise ValueError(f"TorchRLEnv takes a VecEnv with array_backend 'numpy' or 'torch', got {array_backend!r}")
        self._torch_mode = array_backend == "torch"
        if self._torch_mode:
            own = torch_device(venv.device)
            if device is not None and torch_device(device) != own:  # "cuda" is "cuda:0" (torch_device)
                raise ValueError(f"TorchRLEnv passes a torch-mode VecEnv's tensors through on its device {own}; "
                                 f"got device={device!r} (leave it out, or build the VecEnv with device={device!r})")
            device = own
        super().__init__(device="cpu" if device is None else device, batch_size=torch.Size([venv.num_envs]),
                         allow_done_after_reset=False)
        self.venv = venv
        spec: EnvSpec = venv.spec
        self.group_map = _check_group_map(group_map, spec.agents)
        index = {a: i for i, a in enumerate(spec.agents)}
        # Each group's agent positions: a slice where they are contiguous (a view, no copy per step).
        self._group_index: dict[str, Any] = {}
        for g, members in self.group_map.items():
            positions = [index[a] for a in members]
            contiguous = positions == list(range(positions[0], positions[0] + len(positions)))
            self._group_index[g] = slice(positions[0], positions[-1] + 1) if contiguous else np.array(positions)
        self._discrete = spec.discrete
        if action_mask and not self._discrete:
            raise ValueError("action_mask=True needs discrete actions; this VecEnv's actions are continuous")
        self._agent_mask = bool(agent_mask)
        self._actions = np.zeros((venv.num_envs, spec.n_agents, *spec.action_shape),
                                 dtype=np.int64 if self._discrete else np.float32)
        if self._torch_mode:  # actions stay on the device: the VecEnv takes them there
            self._actions = torch.from_numpy(self._actions).to(self.device)
        # Index tensors of the groups that are not contiguous, made once where the tensors live.
        self._home = self.device if self._torch_mode else torch.device("cpu")  # where results arrive
        self._group_ix = {g: idx if isinstance(idx, slice) else torch.as_tensor(idx, device=self._home)
                          for g, idx in self._group_index.items()}

        # With copy=False the VecEnv hands back its buffers, which the next step
        # overwrites; TorchRL keeps every step's tensors, so the face copies them.
        self._copy = not venv.copy
        self._dict_obs = spec.obs_is_tree and isinstance(spec.obs_space, gym.spaces.Dict)
        if spec.obs_is_tree and not self._dict_obs:
            raise TypeError(f"TorchRLEnv takes array and Dict observations; this VecEnv's observation space is "
                            f"{spec.obs_space} (Tuple spaces are not supported: use a Dict)")
        if self._dict_obs:
            _leaf_specs(spec.obs_space, (1, 1), "cpu")  # refuses object leaves before the first reset
        first = self._own(venv.reset(seed=seed))
        self._check_arrays(first)
        self._turn_based = spec.turn_based
        if action_mask is None:
            action_mask = self._discrete and (spec.turn_based or spec.actions_padded
                                              or not bool(first.avail_actions.all()))
        self._action_mask = bool(action_mask)
        self._has_state = first.state is not None
        # The latest StepResult: its obs/state/avail rows are each env's current
        # observation, i.e. the new episode's start where an env just finished.
        self._current = first
        self._make_specs(spec)
        self._just_reset = torch.ones(venv.num_envs, dtype=torch.bool, device=self.device)

    # -- specs -----------------------------------------------------------------------

    def _make_specs(self, spec: EnvSpec) -> None:
        E = self.venv.num_envs
        dev = self.device
        obs_dtype = _torch_dtype(spec.obs_dtype)
        observation, action, reward, done = Composite(shape=(E,)), Composite(shape=(E,)), Composite(shape=(E,)), Composite(shape=(E,))
        flag = lambda *shape: Categorical(n=2, shape=torch.Size(shape), dtype=torch.bool, device=dev)  # noqa: E731
        for group, members in self.group_map.items():
            A = len(members)
            if self._dict_obs:
                group_obs = {"observation": _leaf_specs(spec.obs_space, (E, A), dev)}
            else:
                group_obs = {"observation": Unbounded(shape=(E, A, *spec.obs_shape), dtype=obs_dtype, device=dev)}
            if self._discrete:
                n = spec.n_actions
                act: Any = Categorical(n=n, shape=(E, A), dtype=torch.int64, device=dev)
                if self._action_mask:
                    group_obs["action_mask"] = flag(E, A, n)
            else:
                assert isinstance(spec.action, ContinuousAction)
                # Each member's own bounds (agents' Boxes may differ in size and bounds; padding
                # entries, ignored by the env, get finite ones so that a squashed policy can use them).
                shape = (E, A, *spec.action.shape)
                agent_low, agent_high = spec.action.agent_bounds(spec.n_agents)
                rows = self._group_index[group]
                low = torch.tensor(agent_low[rows], dtype=torch.float32)
                high = torch.tensor(agent_high[rows], dtype=torch.float32)
                act = Bounded(low=low.expand(shape), high=high.expand(shape), shape=shape, dtype=torch.float32, device=dev)
            if self._agent_mask:
                group_obs["mask"] = flag(E, A)
            if self._turn_based:
                group_obs["acting"] = flag(E, A)
            observation[group] = Composite(group_obs, shape=(E, A))
            action[group] = Composite({"action": act}, shape=(E, A))
            reward[group] = Composite({"reward": Unbounded(shape=(E, A, 1), dtype=torch.float32, device=dev)}, shape=(E, A))
            done[group] = Composite({k: flag(E, A, 1) for k in ("done", "terminated", "truncated")}, shape=(E, A))
        if self._has_state:  # from the first result: a Dict observation's "auto" state is a dict too
            observation["state"] = _result_spec(self._current.state, (E,), dev)
        for k in ("done", "terminated", "truncated"):
            done[k] = flag(E, 1)
        self.observation_spec = observation
        self.action_spec = action
        self.reward_spec = reward
        self.done_spec = done

    def _check_arrays(self, result: StepResult) -> None:
        if self._dict_obs or isinstance(result.obs, torch.Tensor):
            return
        raise TypeError(
            "TorchRLEnv takes array and Dict observations; this VecEnv's observations are "
            f"{type(result.obs).__name__} (Tuple spaces are not supported: use a Dict)"
        )

    # -- TorchRL's hooks ------------------------------------------------------------------

    def _set_seed(self, seed: int | None) -> None:
        # As PettingZooWrapper: seeding resets at once, so the next episode uses the seed.
        self._current = self._own(self.venv.reset(seed=seed))
        self._just_reset[:] = True

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        seed = kwargs.pop("seed", None)
        if kwargs:
            raise TypeError(f"TorchRLEnv.reset takes only 'seed', got {sorted(kwargs)}")
        if seed is not None:
            self._set_seed(seed)
            return self._output(self._current, step=False)
        wanted = self._reset_mask(tensordict)
        if wanted is None:
            # A reset without "_reset" masks (a rollout's or collector's start) resets
            # every env, as PettingZooWrapper's reset does.
            self._current = self._own(self.venv.reset())
            self._just_reset[:] = True
            return self._output(self._current, step=False)
        # Envs that finished at the last step are already at their new episode's start.
        to_reset = np.flatnonzero(wanted & ~self._just_reset.cpu().numpy())
        if len(to_reset):
            fresh = self._own(self.venv.reset(env_ids=to_reset.tolist()))
            self._current = self._merge(self._current, fresh, torch.as_tensor(to_reset, device=self._home))
        self._just_reset[torch.as_tensor(wanted, device=self.device)] = True
        return self._output(self._current, step=False)

    def _reset_mask(self, tensordict: TensorDictBase | None) -> np.ndarray | None:
        """The envs a ``"_reset"`` entry names (root, else any of the groups'); None without one."""
        E = self.venv.num_envs
        if tensordict is None:
            return None
        root = tensordict.get("_reset", None)
        if root is not None:
            return root.reshape(E).cpu().numpy().astype(bool)
        masks = [tensordict.get((g, "_reset"), None) for g in self.group_map]
        masks = [m.reshape(E, -1).any(-1).cpu().numpy() for m in masks if m is not None]
        return np.logical_or.reduce(masks) if masks else None

    def _own(self, r: StepResult) -> StepResult:
        """``r``'s arrays as tensors: a torch-mode VecEnv's as they are, numpy ones viewed
        (``torch.from_numpy``); copies of them for a ``copy=False`` VecEnv."""
        if self._torch_mode:
            leaf: Any = (lambda a: a.clone()) if self._copy else (lambda a: a)  # noqa: E731
        else:
            leaf = (lambda a: torch.from_numpy(a.copy() if self._copy else a))  # noqa: E731
        own = (lambda a: None if a is None else _tree(leaf, a))  # noqa: E731
        return StepResult(own(r.obs), own(r.state), own(r.avail_actions), own(r.agent_mask), own(r.reward),
                          own(r.terminated), own(r.truncated), own(r.done), r.infos,
                          own(r.final_obs), own(r.final_state), own(r.final_avail_actions),
                          acting=own(r.acting), final_acting=own(r.final_acting))

    @staticmethod
    def _merge(old: StepResult, fresh: StepResult, rows: torch.Tensor) -> StepResult:
        """The current arrays with ``rows`` taken from a partial reset's result."""
        merged = {}
        for name in ("obs", "state", "avail_actions", "agent_mask", "acting"):
            a, b = getattr(old, name), getattr(fresh, name)
            if a is None:
                merged[name] = None
                continue
            def take(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                x = x.clone()
                x[rows] = y[rows]
                return x

            merged[name] = _tree(take, a, b)
        return StepResult(merged["obs"], merged["state"], merged["avail_actions"], merged["agent_mask"],
                          fresh.reward, fresh.terminated, fresh.truncated, fresh.done, fresh.infos,
                          acting=merged["acting"])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._torch_mode:  # on the device, no host copy
            for group, ix in self._group_ix.items():
                self._actions[:, ix] = tensordict.get((group, "action")).detach()
        else:
            for group, idx in self._group_index.items():
                self._actions[:, idx] = tensordict.get((group, "action")).detach().cpu().numpy()
        result = self._own(self.venv.step(self._actions))
        self._current = result
        self._just_reset.copy_(result.done)
        return self._output(result, step=True)

    # -- building the tensordicts ---------------------------------------------------------

    def _output(self, r: StepResult, step: bool) -> TensorDictBase:
        """TorchRL's view of a result (tensors: `_own`); after a step, finished envs show their
        final observation (picked by ``torch.where``, on the device: no read of ``done``)."""
        E = self.venv.num_envs
        obs, state, avail, alive, acting = r.obs, r.state, r.avail_actions, r.agent_mask, r.acting
        dev = self._home
        out: dict[str, Any] = {}
        if step:
            done = r.done

            def final(current: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
                return torch.where(done.reshape(E, *(1,) * (current.ndim - 1)), last, current)

            obs = _tree(final, obs, r.final_obs)
            if state is not None:
                state = _tree(final, state, r.final_state)
            if self._turn_based:
                acting = final(acting, r.final_acting)
            if avail is not None:
                avail = final(avail, r.final_avail_actions)
            terminated, truncated = r.terminated, r.truncated
            if self._agent_mask:  # the final step's too: the agents that had not ended (PettingZooWrapper's
                alive = final(alive, ~(terminated | truncated))  # env.agents after the step: none of a done env)
            root_terminated = done & terminated.all(dim=1)
            out["done"] = done.reshape(E, 1).clone()
            out["terminated"] = root_terminated.reshape(E, 1)
            out["truncated"] = (done & ~root_terminated).reshape(E, 1)
            reward_t = r.reward.to(torch.float32)
            agent_done = terminated | truncated
        else:
            for k in ("done", "terminated", "truncated"):
                out[k] = torch.zeros(E, 1, dtype=torch.bool, device=dev)
        avail_t = avail if (self._action_mask and avail is not None) else None
        acting_t = acting if self._turn_based else None
        # The action spec's mask: agents not to move may take any action (it is ignored).
        spec_mask_t = avail_t if acting_t is None or avail_t is None else avail_t | ~acting_t.unsqueeze(-1)
        for group, ix in self._group_ix.items():
            g: dict[str, Any] = {"observation": _tree(lambda o: self._group_leaf(o, ix), obs)}
            if avail_t is not None:
                g["action_mask"] = avail_t[:, ix]
                assert spec_mask_t is not None
                self.action_spec[group, "action"].update_mask(spec_mask_t[:, ix].clone())
            if acting_t is not None:
                g["acting"] = acting_t[:, ix]
            if self._agent_mask:
                g["mask"] = alive[:, ix]
            A = len(self.group_map[group])
            if step:
                g["reward"] = reward_t[:, ix].unsqueeze(-1)
                g["done"] = agent_done[:, ix].unsqueeze(-1)
                g["terminated"] = terminated[:, ix].unsqueeze(-1)
                g["truncated"] = truncated[:, ix].unsqueeze(-1)
            else:
                for k in ("done", "terminated", "truncated"):
                    g[k] = torch.zeros(E, A, 1, dtype=torch.bool, device=dev)
            out[group] = TensorDict(g, batch_size=(E, A))
        if self._has_state:
            out["state"] = state
        return TensorDict(out, batch_size=(E,), device=self.device)

    def _group_leaf(self, leaf: torch.Tensor, ix: Any) -> torch.Tensor:
        """One group's rows of an observation leaf; a Dict's scalar leaf gets a trailing 1."""
        rows = leaf[:, ix]
        return rows.unsqueeze(-1) if self._dict_obs and rows.ndim == 2 else rows

    # -- the rest of EnvBase ------------------------------------------------------------------

    def close(self, *, raise_if_closed: bool = True) -> None:
        self.venv.close()
        self.is_closed = True

    def render(self, mode: str = "rgb_array") -> Any:
        """Env 0's frame, as TorchRL's single-env wrappers give one frame (BenchMARL's video)."""
        frames = self.venv.render()
        return None if frames is None else frames[0]

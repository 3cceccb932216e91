"""GymVectorEnv: a ``gymnasium.vector.VectorEnv`` over a single-agent marl_vec VecEnv.

Gymnasium-based trainers expect batched arrays without an agent axis,
``single_observation_space`` / ``single_action_space``, the autoreset mode in
``metadata["autoreset_mode"]`` and infos as a dict of arrays with ``_key``
masks. This face gives them that over any backend (dummy, subproc, ray).

Mapping of results, for E envs:

- ``obs`` (E, *obs_shape), ``terminated``/``truncated`` (E,) bool: the agent axis squeezed.
- ``reward`` (E,) float64, as gymnasium's vector envs: gymnasium envs are batched with float64 rewards, bit for bit.
- same_step (and fast): ``infos["final_obs"]`` (object array, None where not done)
  and ``infos["final_info"]`` hold the ended episode's last observation and step
  info; the top-level infos are the reset's, as ``SyncVectorEnv``.
- ``infos["episode"]``: ``{"r", "l"}`` (return, length) plus family stats, where an
  episode ended, as gymnasium's ``RecordEpisodeStatistics`` (without ``"t"``).

Example:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> envs = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3, autoreset="next_step"))
    >>> envs.metadata["autoreset_mode"]
    <AutoresetMode.NEXT_STEP: 'NextStep'>
    >>> obs, infos = envs.reset(seed=0)
    >>> obs, reward, terminated, truncated, infos = envs.step(np.zeros(3, dtype=np.int64))
    >>> reward.dtype, terminated.shape
    (dtype('float64'), (3,))
    >>> envs.close()
"""

from __future__ import annotations

from typing import Any, Sequence, cast

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode as GymAutoresetMode
from gymnasium.vector.utils import batch_space

from marl_vec.episode import AutoresetMode
from marl_vec.spec import DiscreteAction, EnvSpec
from marl_vec.vec.base import VecEnv

# marl_vec autoreset mode -> gymnasium's. one_episode has no gymnasium equivalent.
AUTORESET_MODES: dict[AutoresetMode, GymAutoresetMode] = {
    AutoresetMode.SAME_STEP: GymAutoresetMode.SAME_STEP,
    AutoresetMode.FAST: GymAutoresetMode.SAME_STEP,
    AutoresetMode.NEXT_STEP: GymAutoresetMode.NEXT_STEP,
    AutoresetMode.DISABLED: GymAutoresetMode.DISABLED,
}

# Keys marl_vec's EnvGroup adds to a step's info; everything else is the env's own.
_GROUP_KEYS = ("episode", "reset_info")


def observation_space_of(spec: EnvSpec, native: Any = None) -> gymnasium.spaces.Space:
    """One agent's observation space: the native env's when it matches the spec, else a Box by dtype."""
    if isinstance(native, gymnasium.spaces.Space) and native.shape == spec.obs_shape and native.dtype == spec.obs_dtype:
        return native
    dtype = spec.obs_dtype
    if dtype == np.bool_:
        return gymnasium.spaces.Box(0, 1, spec.obs_shape, dtype=np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return gymnasium.spaces.Box(info.min, info.max, spec.obs_shape, dtype=dtype)
    return gymnasium.spaces.Box(-np.inf, np.inf, spec.obs_shape, dtype=dtype)


def action_space_of(spec: EnvSpec) -> gymnasium.spaces.Space:
    """One agent's action space in marl_vec's numbering (discrete actions start at 0)."""
    action = spec.action
    if isinstance(action, DiscreteAction):
        return gymnasium.spaces.Discrete(action.n_actions)
    return gymnasium.spaces.Box(
        np.broadcast_to(action.low, action.shape).astype(action.dtype),
        np.broadcast_to(action.high, action.shape).astype(action.dtype),
        action.shape,
        dtype=action.dtype,
    )


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """Wraps a single-agent marl_vec ``VecEnv`` (``spec.n_agents == 1``).

    Args:
        venv: the batch; this face owns it and closes it.
        single_observation_space: override of the observation space (default: the
            native env's, when it matches the spec's shape and dtype).
    """

    def __init__(self, venv: VecEnv, single_observation_space: gymnasium.spaces.Space | None = None):
        spec = venv.spec
        if spec.n_agents != 1:
            raise ValueError(
                f"GymVectorEnv needs a single-agent VecEnv, got {spec.n_agents} agents {spec.agents}; "
                "gymnasium's VectorEnv has no agent axis (use the marl_vec API for multi-agent envs)"
            )
        if venv.autoreset not in AUTORESET_MODES:
            allowed = ", ".join(m.value for m in AUTORESET_MODES)
            raise ValueError(
                f"autoreset={venv.autoreset.value!r} has no gymnasium equivalent; allowed: {allowed}"
            )
        self.venv = venv
        self.num_envs = venv.num_envs
        if single_observation_space is None:
            native = _native_observation_space(venv)
            single_observation_space = observation_space_of(spec, native)
        self.single_observation_space = single_observation_space
        self.single_action_space = action_space_of(spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AUTORESET_MODES[venv.autoreset], "render_modes": []}
        self.render_mode = None
        self._keeps_final = venv.autoreset.keeps_final
        self._action_shape = (self.num_envs, 1, *spec.action_shape)

    # -- gymnasium API ------------------------------------------------------------

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset all envs (env i seeded ``seed + i``), or those of ``options["reset_mask"]``."""
        env_ids = None
        options = dict(options or {})
        if "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,) or not mask.any():
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) with a True value, "
                    f"got {mask!r}"
                )
            env_ids = np.flatnonzero(mask).tolist()
        if options:
            raise ValueError(f"reset options {sorted(options)} are not supported; allowed: reset_mask")
        if seed is not None and not isinstance(seed, (int, np.integer)):
            seeds = list(seed)
            first = seeds[0]
            if first is None or any(s != first + i for i, s in enumerate(seeds)):
                raise ValueError(f"seed must be an int (env i gets seed + i) or None, got {seed!r}")
            seed = first
        r = self.venv.reset(seed=None if seed is None else int(seed), env_ids=env_ids)
        infos: dict[str, Any] = {}
        for i in range(self.num_envs) if env_ids is None else env_ids:
            if r.infos[i]:
                infos = self._add_info(infos, r.infos[i], i)
        return r.obs[:, 0], infos

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions)
        expected = (self.num_envs, *self.venv.spec.action_shape)
        if actions.shape != expected:
            raise ValueError(f"actions must have shape {expected} (one per env), got {actions.shape}")
        r = self.venv.step(actions.reshape(self._action_shape))
        infos: dict[str, Any] = {}
        done = r.done
        for i, info in enumerate(r.infos):
            if not info:
                continue
            if "episode" in info:
                infos = self._add_info(infos, {"episode": _gym_episode(info["episode"])}, i)
            if self._keeps_final and done[i]:
                step_info = {k: v for k, v in info.items() if k not in _GROUP_KEYS}
                infos = self._add_info(infos, {"final_obs": cast(np.ndarray, r.final_obs)[i, 0], "final_info": step_info}, i)
                info = info.get("reset_info", {})
            elif "episode" in info:
                info = {k: v for k, v in info.items() if k != "episode"}
            if info:
                infos = self._add_info(infos, info, i)
        return (
            r.obs[:, 0],
            r.reward[:, 0].astype(np.float64),
            r.terminated[:, 0],
            r.truncated[:, 0],
            infos,
        )

    def render(self) -> tuple[Any, ...]:
        return tuple(self.venv.render())

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return tuple(self.venv.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(self.venv.get_attr(name))

    def set_attr(self, name: str, values: Any) -> None:
        self.venv.set_attr(name, values)

    def close_extras(self, **kwargs: Any) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"GymVectorEnv({self.venv!r})"


def _native_observation_space(venv: VecEnv) -> Any:
    try:
        return venv.get_attr("observation_space", indices=[0])[0]
    except Exception:  # an adapter without one (each backend wraps the AttributeError its own way)
        return None


def _gym_episode(summary: dict[str, Any]) -> dict[str, Any]:
    """marl_vec's episode summary in RecordEpisodeStatistics' names (``r``, ``l``) plus family stats."""
    out = {"r": float(summary["return"]), "l": int(summary["length"])}
    out.update({k: v for k, v in summary.items() if k not in ("return", "length", "agent_returns")})
    return out

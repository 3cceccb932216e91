"""AgileRLVecEnv: a marl_vec VecEnv as AgileRL's multi-agent vector env (extra ``agilerl``).

AgileRL's multi-agent trainers (``train_multi_agent_on_policy`` /
``train_multi_agent_off_policy``) and its agents' ``test`` take any
``agilerl.vector.pz_vec_env.PettingZooVecEnv``; anything else they wrap as ONE
env. This face subclasses it and behaves as AgileRL's ``AsyncPettingZooVecEnv``
over the same PettingZoo envs, seeds and actions:

- ``reset(seed=int | list | None, options=None)`` -> ``({agent: (E, *obs)}, infos)``;
  an int seed gives env i ``seed + i``; None continues each env's own stream.
- ``step({agent: (E,) or (E, d)})`` (numpy arrays or CPU torch tensors) ->
  ``obs, rewards {agent: (E,) float64}, terminations, truncations, infos``.
- Same-step autoreset: when an env's episode ends, the returned observation is
  the next episode's first one (the final observation is dropped, as AgileRL's
  workers do); rewards and flags are the final step's.
- An agent already gone before a step (its ``agent_mask`` was False) gets NaN
  reward, NaN flags (the flag arrays are then float) and, unless its env reset
  at this step, a NaN observation (float observations only: an integer
  observation keeps marl_vec's zeros). A NaN action is accepted for such agents
  only.
- Infos gymnasium-vector style: ``{agent: {key: (E, ...), "_key": (E,)}}`` with
  the env's own per-agent info keys and, for discrete actions when
  ``action_mask=True``, ``"action_mask"`` (E, n_actions) int8 from marl_vec's
  ``avail_actions``. The default is False, what every AgileRL trainer accepts:
  AgileRL 2.58's IPPO (``train_multi_agent_on_policy``) fails on numpy action masks
  in infos ("truth value of an array is ambiguous"; an AgileRL bug), while MADDPG
  and MATD3 use them. ``action_mask=True`` with continuous actions is an error.

Rewards are float64, as PettingZoo envs give them (Python floats): with float32
the fitness would differ from AgileRL's own vec env by rounding. So the VecEnv
must have ``reward_dtype="float64"``; [`AgileRLVecEnv.from_config`][marl_vec.compat.agilerl.AgileRLVecEnv.from_config] builds one
so by default. It must autoreset ``same_step`` (or ``fast``).

Not supported: per-agent observation spaces of different shapes (marl_vec pads
every agent's observation to the largest, and the face reports that padded
space for every agent), Dict/Tuple observations, and ``reset`` options.

Examples:
    >>> import marl_vec as mv
    >>> from marl_vec.compat import AgileRLVecEnv
    >>> env = AgileRLVecEnv.from_config("mpe/simple_spread", num_envs=2)  # float64 rewards
    >>> obs, info = env.reset(seed=0)
    >>> obs["agent_0"].shape
    (2, 18)
    >>> env.close()
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from marl_vec.core.episode import AutoresetMode
from marl_vec.core.spec import ContinuousAction, EnvSpec
from marl_vec.vec.base import StepResult, VecEnv

try:
    from agilerl.vector.pz_vec_env import PettingZooVecEnv
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "marl_vec.compat.AgileRLVecEnv needs AgileRL: pip install marl_vec[agilerl] "
        "(AgileRL 2.58 pins pettingzoo<1.27 and tensordict==0.13.0: use a venv of its own, "
        "e.g. scripts/install/install_agilerl_venv.sh)"
    ) from error


class AgileRLVecEnv(PettingZooVecEnv):
    """Wraps a marl_vec ``VecEnv`` (float64 rewards, same_step autoreset) for AgileRL.

    Args:
        venv: the batch; the face owns it and closes it.
        action_mask: put ``"action_mask"`` in each agent's infos (discrete actions
            only). Default False: AgileRL's IPPO raises on numpy masks; MADDPG and
            MATD3 take them.
    """

    def __init__(self, venv: VecEnv, action_mask: bool = False):
        spec = venv.spec
        if spec.reward_dtype != np.dtype(np.float64):
            raise ValueError(
                f"AgileRLVecEnv needs float64 rewards, the VecEnv has {spec.reward_dtype}; build it with "
                "reward_dtype='float64' (e.g. mv.make(config, reward_dtype='float64')), or use "
                "AgileRLVecEnv.from_config(config, ...), which does"
            )
        if action_mask and not spec.discrete:
            raise ValueError(
                "AgileRLVecEnv: action_mask=True needs discrete actions; this env's actions are "
                f"{spec.single_agent_action_space} (leave action_mask=False)"
            )
        if venv.autoreset not in (AutoresetMode.SAME_STEP, AutoresetMode.FAST):
            raise ValueError(
                f"AgileRLVecEnv needs autoreset='same_step' (or 'fast'), the VecEnv has "
                f"{venv.autoreset.value!r}: AgileRL's vec envs reset an env in the step that ends it"
            )
        if spec.obs_is_tree:
            raise ValueError(
                f"AgileRLVecEnv supports array observations only, got {spec.single_agent_observation_space}"
            )
        agents = list(spec.agents)
        single_obs = spec.single_agent_observation_space
        single_action = spec.single_agent_action_space
        super().__init__(
            venv.num_envs,
            {agent: single_obs for agent in agents},
            _action_spaces(spec),
            agents,
            metadata={"render_modes": []},
        )
        self.venv = venv
        self.action_mask = bool(action_mask)
        E, A = venv.num_envs, spec.n_agents
        self._discrete = spec.discrete
        self._action_shape = spec.action_shape
        self._action_size = int(np.prod(spec.action_shape, dtype=np.int64))
        self._actions = np.zeros((E, A, *spec.action_shape), dtype=np.int64 if spec.discrete else single_action.dtype)
        self._nan_obs = np.issubdtype(spec.obs_dtype, np.floating)
        self._alive = np.ones((E, A), dtype=bool)  # agent_mask of the last result: who acts next step
        self._pending: list[dict[str, Any]] | None = None

    @classmethod
    def from_config(cls, source: Any, action_mask: bool = False, **overrides: Any) -> "AgileRLVecEnv":
        """The face over ``marl_vec.make(source, **overrides)`` with float64 rewards (PettingZoo's own).

        ```python
        env = AgileRLVecEnv.from_config("mpe/simple_spread", num_envs=2, backend="dummy")
        ```
        """
        from marl_vec.tools.config import make

        overrides.setdefault("reward_dtype", "float64")
        return cls(make(source, **overrides), action_mask=action_mask)

    # -- AgileRL API ------------------------------------------------------------

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every env; ``seed`` as AsyncPettingZooVecEnv's (int: env i gets ``seed + i``)."""
        if options:
            raise ValueError(
                f"reset options {sorted(options)} are not supported by AgileRLVecEnv "
                "(marl_vec's reset passes no options to the envs)"
            )
        E = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * E
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(E)]
        else:
            seeds = list(seed)
        if len(seeds) != E:
            raise ValueError(f"seed: one per env expected ({E}), got {len(seeds)}")
        # marl_vec seeds env i with seed + i: envs whose seeds share one offset reset together.
        by_offset: dict[int | None, list[int]] = defaultdict(list)
        for i, s in enumerate(seeds):
            by_offset[None if s is None else int(s) - i].append(i)
        env_infos: list[dict[str, Any]] = [{} for _ in range(E)]
        r: StepResult | None = None
        for offset, ids in by_offset.items():
            r = self.venv.reset(seed=offset, env_ids=None if len(ids) == E else ids)
            for i in ids:
                env_infos[i] = r.infos[i]
        assert r is not None
        np.copyto(self._alive, r.agent_mask)
        per_agent = [info.get("agents") or {} for info in env_infos]
        return self._observations(r.obs, None), self._infos(per_agent, r.avail_actions)

    def step_async(self, actions: list[dict[str, Any]]) -> None:
        """AgileRL's base ``step`` hands a list of E dicts agent -> action (NaN actions left out)."""
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} action dicts (one per env), got {len(actions)}")
        self._pending = actions

    def step_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        if self._pending is None:
            raise RuntimeError("step_wait() called without a prior step_async()")
        per_env, self._pending = self._pending, None
        actions = {}
        for agent in self.agents:
            stacked = np.full((self.num_envs, *self._action_shape), np.nan)
            for i, env_actions in enumerate(per_env):
                if agent in env_actions:
                    stacked[i] = _as_numpy(env_actions[agent]).reshape(self._action_shape)
            actions[agent] = stacked
        return self.step(actions)

    def step(self, actions: Mapping[str, Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """One step of every env: ``actions[agent]`` is (E,) or (E, *action_shape); NaN for a gone agent."""
        self._write_actions(actions)
        r = self.venv.step(self._actions)
        gone = ~self._alive
        np.copyto(self._alive, r.agent_mask)
        rewards: dict[str, np.ndarray] = {}
        terminations: dict[str, np.ndarray] = {}
        truncations: dict[str, np.ndarray] = {}
        for a, agent in enumerate(self.agents):
            reward = r.reward[:, a].copy()
            term, trunc = r.terminated[:, a].copy(), r.truncated[:, a].copy()
            if gone[:, a].any():
                reward[gone[:, a]] = np.nan
                term, trunc = term.astype(np.float64), trunc.astype(np.float64)
                term[gone[:, a]] = np.nan
                trunc[gone[:, a]] = np.nan
            rewards[agent], terminations[agent], truncations[agent] = reward, term, trunc
        # Where an env reset, its infos are the reset's (as AgileRL's workers report them).
        per_agent = []
        for i, info in enumerate(r.infos):
            if r.done[i]:
                info = info.get("reset_info") or {}
            per_agent.append(info.get("agents") or {})
        # A gone agent's observation is NaN, except where its env reset at this step.
        obs_gone = gone & ~r.done[:, None]
        return self._observations(r.obs, obs_gone), rewards, terminations, truncations, self._infos(
            per_agent, r.avail_actions
        )

    def render(self) -> tuple[Any, ...]:
        return tuple(self.venv.render())

    def close_extras(self, **kwargs: Any) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"AgileRLVecEnv({self.venv!r})"

    # -- translation ------------------------------------------------------------

    def _write_actions(self, actions: Mapping[str, Any]) -> None:
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for unknown agents {sorted(unknown)}; agents are {self.agents}")
        E = self.num_envs
        for a, agent in enumerate(self.agents):
            if agent not in actions:
                given = np.full((E,), np.nan)
            else:
                given = _as_numpy(actions[agent])
            if given.ndim == 0 or given.shape[0] != E or given.size != E * self._action_size:
                raise ValueError(
                    f"actions[{agent!r}] must have shape ({E},) or ({E}, {', '.join(map(str, self._action_shape))}),"
                    f" got {given.shape}"
                )
            given = given.reshape((E, *self._action_shape))
            missing = (np.isnan(given).reshape(E, -1).all(axis=1) if given.dtype.kind == "f"
                       else np.zeros(E, dtype=bool))
            bad = missing & self._alive[:, a]
            if bad.any():
                raise ValueError(
                    f"no action (NaN or left out) for agent {agent!r} in env {int(np.flatnonzero(bad)[0])}, "
                    "which is alive; NaN actions are allowed only for agents that are gone"
                )
            target = self._actions[:, a]
            if missing.any():
                given = np.where(missing.reshape((E,) + (1,) * len(self._action_shape)), 0, given)
            if self._discrete and given.dtype.kind == "f":
                rounded = np.rint(given)
                if not np.array_equal(rounded, given):
                    raise ValueError(f"actions[{agent!r}]: discrete actions must be whole numbers, got {given}")
                given = rounded
            np.copyto(target, given, casting="unsafe")

    def _observations(self, obs: np.ndarray, gone: np.ndarray | None) -> dict[str, np.ndarray]:
        out = {}
        for a, agent in enumerate(self.agents):
            agent_obs = obs[:, a].copy()
            if gone is not None and self._nan_obs and gone[:, a].any():
                agent_obs[gone[:, a]] = np.nan
            out[agent] = agent_obs
        return out

    def _infos(self, per_agent: list[dict[str, Any]], avail: np.ndarray | None) -> dict[str, Any]:
        infos: dict[str, Any] = {}
        for a, agent in enumerate(self.agents):
            agent_infos: dict[str, Any] = {}
            for i, env_agents in enumerate(per_agent):
                own = env_agents.get(agent)
                if own:
                    _add_info(agent_infos, {k: v for k, v in own.items() if k != "action_mask"}, i, self.num_envs)
            if self.action_mask and avail is not None:
                agent_infos["action_mask"] = avail[:, a].astype(np.int8)
                agent_infos["_action_mask"] = np.ones(self.num_envs, dtype=bool)
            infos[agent] = agent_infos
        return infos


def _as_numpy(x: Any) -> np.ndarray:
    """An array from numpy data or a torch tensor (moved to the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _add_info(vector_infos: dict[str, Any], info: dict[str, Any], i: int, num_envs: int) -> None:
    """gymnasium's vector info layout: ``key`` (E, ...) and a ``_key`` (E,) bool mask of the envs that gave it."""
    for key, value in info.items():
        if isinstance(value, dict):
            sub = vector_infos.setdefault(key, {})
            _add_info(sub, value, i, num_envs)
        else:
            if key not in vector_infos:
                if isinstance(value, np.ndarray):
                    vector_infos[key] = np.zeros((num_envs, *value.shape), dtype=value.dtype)
                elif isinstance(value, (bool, int, float, np.number)):
                    vector_infos[key] = np.zeros(num_envs, dtype=type(value))
                else:
                    vector_infos[key] = np.full(num_envs, None, dtype=object)
            vector_infos[key][i] = value
        vector_infos.setdefault(f"_{key}", np.zeros(num_envs, dtype=bool))[i] = True


def _action_spaces(spec: EnvSpec) -> dict[str, gym.spaces.Space]:
    """Each agent's action space: Box actions within the agent's own bounds (agents' Boxes may
    differ, and AgileRL scales each agent's actions into its own space), else the shared one."""
    if isinstance(spec.action, ContinuousAction):
        return {agent: spec.action.agent_space(a, spec.n_agents) for a, agent in enumerate(spec.agents)}
    return dict.fromkeys(spec.agents, spec.single_agent_action_space)

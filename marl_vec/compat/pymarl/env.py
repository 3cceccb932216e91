"""PyMARLEnv: one env of a marl_vec config as a PyMARL ``MultiAgentEnv`` (the env face).

The PyMARL school's trainers build envs from a module-level registry (``envs.REGISTRY``:
name -> callable taking ``**env_args``) and step them with a runner from
``runners.REGISTRY``; [`marl_vec.compat.pymarl.register`][marl_vec.compat.pymarl.register] puts both faces there:

- **The env face** [`PyMARLEnv`][marl_vec.compat.pymarl.env.PyMARLEnv] (``env=marl_vec``): one env of a marl_vec config
  as a PyMARL ``MultiAgentEnv``: ``get_obs``, ``get_state``, ``get_avail_actions``,
  ``get_env_info`` (``state_shape``, ``obs_shape``, ``n_actions``, ``n_agents``,
  ``episode_limit``), ``get_stats``, ``reset``, ``step``. ``step(actions)`` returns
  ``(reward, terminated, info)`` (PyMARL, pymarlzooplus) or, with
  ``step_api="epymarl"``, ``(obs, reward, terminated, truncated, info)`` (EPyMARL's
  newer base class). ``terminated`` is True when the episode ended for any reason, as
  PyMARL's runners read it; ``info["episode_limit"]`` is True when it ended at a time
  limit (truncation), so the trainer bootstraps it. The reward is the team's: by default
  the sum of the agents' rewards (float64, summed in agent order as Python's ``sum``);
  with ``team_reward="shared"``, the one reward every agent gets (SMAC's convention: the
  StarCraft II family gives each agent the team reward, which a sum would count n times).
- **The runner face** [`MarlVecRunner`][marl_vec.compat.pymarl.runner.MarlVecRunner]
  (``runner=marl_vec``): steps a marl_vec VecEnv of ``batch_size_run`` envs in the
  ``one_episode`` autoreset mode and fills the trainer's ``EpisodeBatch`` itself, in
  place of the ``episode`` / ``parallel`` runners and their Pipe-per-env workers.

``env_args`` (the trainer's config section, passed as keyword arguments):

- ``key``: the marl_vec config, a shipped name (``"lbf/8x8-2p-2f-coop"``), a YAML path
  or a config dict; called ``key`` as pymarlzooplus's own env_args, which it logs by.
- ``seed``: the env's seed (the trainer sets it; env i of a batch gets ``seed + i``,
  as the ``parallel`` runner seeds its envs); None: the config's ``vec.env_seed``.
- ``env_kwargs``: a dict over the config's ``env.kwargs``; ``state``: the state option
  (``auto``, ``env``, ``concat``); ``step_api``: ``"pymarl"`` or ``"epymarl"``;
  ``team_reward``: ``"sum"`` (default) or ``"shared"`` (every agent's reward is the team's:
  it is taken once, and a step whose agents' rewards differ raises ValueError);
  ``backend``, ``num_workers``: the runner face's VecEnv (the env face is in-process).
- ``time_limit``, ``render``: the keys of pymarlzooplus's ``--env-config=gymma``, taken so
  that its entry point runs: ``time_limit`` must be None or the config's own limit (set
  the limit in ``env_kwargs``), ``render`` False (the runners call ``render()`` themselves).

Example (the env face alone; ``register()`` makes it the trainer's ``env=marl_vec``):

    ```pycon
    >>> env = PyMARLEnv(key="lbf/8x8-2p-2f-coop", seed=0)
    >>> env.get_env_info()
    {'n_agents': 2, 'obs_shape': 12, 'state_shape': 24, 'n_actions': 6, 'episode_limit': 50}
    >>> obs, state = env.reset()
    >>> reward, terminated, info = env.step([0, 0])
    >>> reward, terminated, info
    (0.0, False, {})
    >>> env.close()
    ```
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from marl_vec.tools.config import load_config, make_from_config
from marl_vec.core.spec import DiscreteAction, EnvSpec
from marl_vec.vec.base import StepResult, VecEnv

INSTALL = "bash scripts/install/install_pymarl_venv.sh (it builds .venv-pymarl)"
STEP_APIS = ("pymarl", "epymarl")
TEAM_REWARDS = ("sum", "shared")
# env_args the faces take; the trainer adds ``seed``.
ENV_ARGS = ("key", "seed", "env_kwargs", "state", "step_api", "team_reward", "backend", "num_workers",
            "time_limit", "render")


def check_env_args(env_args: Mapping[str, Any], who: str) -> None:
    """Refuse env_args the faces do not know, naming the allowed ones."""
    unknown = sorted(set(env_args) - set(ENV_ARGS))
    if unknown:
        raise TypeError(f"{who}: unknown env_args {', '.join(unknown)}; allowed: {', '.join(ENV_ARGS)} "
                        "(env options go into env_kwargs, e.g. env_args.env_kwargs={'sight': 2})")
    if env_args.get("key") is None:
        raise ValueError(f"{who}: env_args.key names the marl_vec config, e.g. key='lbf/8x8-2p-2f-coop' "
                         "(a shipped config name, a YAML path or a config dict)")
    if env_args.get("render"):
        raise ValueError(f"{who}: env_args.render must be False; PyMARL's runners call render() when args.render")
    api = env_args.get("step_api", "pymarl")
    if api not in STEP_APIS:
        raise ValueError(f"{who}: step_api must be one of {', '.join(STEP_APIS)}, got {api!r}")
    mode = env_args.get("team_reward", "sum")
    if mode not in TEAM_REWARDS:
        raise ValueError(f"{who}: team_reward must be one of {', '.join(TEAM_REWARDS)}, got {mode!r} "
                         "('shared' where every agent gets the team reward, as SMAC's)")


def make_vec_from_env_args(env_args: Mapping[str, Any], num_envs: int, autoreset: str,
                           backend: str | None = None) -> VecEnv:
    """The VecEnv of ``env_args`` (see the module docstring): ``num_envs`` envs seeded
    ``seed + i``, float64 rewards (the team reward is then summed exactly as a native loop)."""
    overrides: dict[str, Any] = {"vec.num_envs": num_envs, "vec.autoreset": autoreset, "vec.reward_dtype": "float64"}
    if env_args.get("seed") is not None:
        overrides["vec.env_seed"] = int(env_args["seed"])
    for name in ("state", "num_workers"):
        if env_args.get(name) is not None:
            overrides[f"vec.{name}"] = env_args[name]
    backend = backend if backend is not None else env_args.get("backend")
    if backend is not None:
        overrides["vec.backend"] = backend
    for name, value in dict(env_args.get("env_kwargs") or {}).items():
        overrides[f"env.kwargs.{name}"] = value
    cfg = load_config(env_args["key"], overrides)
    venv = make_from_config(cfg)
    try:
        check_spec(venv.spec, env_args["key"], env_args.get("time_limit"))
    except BaseException:
        venv.close()
        raise
    return venv


def check_spec(spec: EnvSpec, key: Any, time_limit: int | None = None) -> None:
    """PyMARL's agents pick one discrete action each from flat observations; its batch is sized by the limit."""
    if not isinstance(spec.action, DiscreteAction):
        raise TypeError(f"{key}: PyMARL's trainers take one discrete action per agent; this env's action is "
                        f"{spec.single_agent_action_space}")
    if spec.obs_is_tree:
        raise TypeError(f"{key}: PyMARL's trainers take flat observations; this env's observation space is "
                        f"{spec.single_agent_observation_space} (flatten it in the config)")
    if spec.episode_limit is None:
        raise ValueError(f"{key}: the env declares no episode_limit, which PyMARL sizes its episode batch by: "
                         "set the env's step limit in env_kwargs (e.g. max_cycles / max_episode_steps)")
    if time_limit is not None and time_limit != spec.episode_limit:
        raise ValueError(f"{key}: env_args.time_limit={time_limit} differs from the env's episode_limit "
                         f"{spec.episode_limit}; set time_limit=None and the env's limit in env_kwargs "
                         "(e.g. max_cycles / max_episode_steps)")


def team_reward(row: np.ndarray, mode: str = "sum") -> float:
    """The team's reward of one env's step: ``"sum"``, the agents' rewards summed in order, in
    float64 (as ``float(sum(list))`` of a native wrapper); ``"shared"``, the reward every agent
    got, once (a step where they differ is refused: summing or picking one would be wrong)."""
    if mode == "shared":
        if (row != row[0]).any():
            raise ValueError(f"team_reward='shared', but the agents' rewards differ at this step: {row.tolist()}; "
                             "use team_reward='sum' for per-agent rewards")
        return float(row[0])
    return float(sum(row.tolist()))


def end_info(r: StepResult, e: int) -> dict[str, Any]:
    """The PyMARL info of env ``e``'s step: ``episode_limit`` at a time-limit end, and the
    numeric entries of the env's info and of its episode summary (e.g. SMAC's ``battle_won``),
    which the runners sum into their logged stats."""
    info: dict[str, Any] = {}
    raw = r.infos[e]
    episode = raw.get("episode") if isinstance(raw.get("episode"), Mapping) else {}
    for source in (raw, {k: v for k, v in episode.items() if k not in ("return", "length")}):
        for k, v in source.items():
            if isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)):
                info[k] = v.item() if isinstance(v, np.generic) else v
    if bool(r.done[e]) and not bool(r.terminated[e].all()):
        info["episode_limit"] = True
    return info


class PyMARLEnv:
    """One env of a marl_vec config as a PyMARL ``MultiAgentEnv`` (see the module docstring).

    It is stepped through a one-env in-process VecEnv (``autoreset="disabled"``), so it
    is seeded, validated and summarized exactly as marl_vec's batches: the first
    ``reset()`` seeds the env with ``seed``, the later ones go on with its own stream.
    An unavailable or out-of-range action raises ``ValueError`` (PyMARL's SMAC does too).
    """

    def __init__(self, **env_args: Any):
        check_env_args(env_args, "PyMARLEnv")
        self.env_args = dict(env_args)
        self.step_api = env_args.get("step_api", "pymarl")
        self.team_reward = env_args.get("team_reward", "sum")
        self.venv = make_vec_from_env_args(env_args, 1, "disabled", backend="dummy")
        self.spec = self.venv.spec
        self.n_agents = self.spec.n_agents
        self.episode_limit = int(self.spec.episode_limit)  # type: ignore[arg-type]
        self._start = self.spec.action.start  # type: ignore[union-attr]
        self._actions = np.zeros((1, self.n_agents), self.spec.action.dtype)
        self._last: StepResult | None = None
        self._avail_all = np.ones((self.n_agents, self.get_total_actions()), np.int32)

    # -- what the runners read --------------------------------------------------

    def get_env_info(self) -> dict[str, Any]:
        return self.venv.env_info()

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        """Start an episode: ``(obs, state)``; with ``step_api="epymarl"`` ``(obs, info)``.
        ``seed`` reseeds the env (as gymnasium's); without it the env's stream goes on."""
        self._last = self.venv.reset(seed=seed)
        if self.step_api == "epymarl":
            return self.get_obs(), {}
        return self.get_obs(), self.get_state()

    def step(self, actions: Any) -> tuple[Any, ...]:
        """Step with one action per agent (a list, numpy array or torch tensor)."""
        if self._last is None:
            raise RuntimeError("PyMARLEnv: call reset() before step()")
        if hasattr(actions, "detach"):  # a torch tensor, as the episode runner passes it
            actions = actions.detach().cpu().numpy()
        acts = np.asarray(actions).reshape(-1)
        if acts.shape[0] != self.n_agents:
            raise ValueError(f"PyMARLEnv.step needs one action per agent ({self.n_agents}), got {acts.shape[0]}")
        self._actions[0] = acts + self._start
        r = self._last = self.venv.step(self._actions)
        reward, ended, info = team_reward(r.reward[0], self.team_reward), bool(r.done[0]), end_info(r, 0)
        if self.step_api == "epymarl":
            truncated = bool(info.get("episode_limit", False))
            return self.get_obs(), reward, ended and not truncated, truncated, info
        return reward, ended, info

    def get_obs(self) -> list[np.ndarray]:
        """Each agent's observation, flat (float32 for PyMARL's batch)."""
        return list(self._result().obs[0].reshape(self.n_agents, -1))

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self.get_obs()[agent_id]

    def get_obs_size(self) -> int:
        return int(self.get_env_info()["obs_shape"])

    def get_state(self) -> np.ndarray:
        state = self._result().state
        if state is None:
            raise ValueError("PyMARLEnv: the config has state='none'; PyMARL's runners read get_state()")
        return state[0].reshape(-1)

    def get_state_size(self) -> int:
        return int(self.get_env_info()["state_shape"])

    def get_avail_actions(self) -> np.ndarray:
        """(n_agents, n_actions) ints: 1 where the agent may take the action."""
        avail = self._result().avail_actions
        return self._avail_all if avail is None else avail[0].astype(np.int32)

    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        return self.get_avail_actions()[agent_id]

    def get_total_actions(self) -> int:
        return int(self.spec.n_actions)  # type: ignore[arg-type]

    def get_stats(self) -> dict[str, Any]:
        """marl_vec's episode statistics (means over the recent episodes)."""
        return dict(self.venv.episode_statistics())

    def get_print_info(self) -> None:
        """pymarlzooplus's runners ask every step for a message to log; there is none."""
        return None

    def render(self) -> Any:
        return self.venv.render()[0]

    def save_replay(self) -> None:
        """PyMARL asks SC2 for a replay; marl_vec's envs keep none (``marl-vec render`` draws GIFs)."""

    def seed(self) -> int | None:
        return self.env_args.get("seed")

    def close(self) -> None:
        self.venv.close()

    def _result(self) -> StepResult:
        if self._last is None:
            raise RuntimeError("PyMARLEnv: call reset() first")
        return self._last

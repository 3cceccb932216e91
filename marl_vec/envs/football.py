"""Google Research Football (``gfootball``) as a fixed-shape multi-agent env.

One adapter wraps one ``gfootball.env.create_environment(...)`` env. Install the
engine with ``scripts/install/install_football.sh`` (it compiles from source).

Conventions (see docs/families/football.md):

- Agents: ``left_0 .. left_{n-1}`` (the left players the trainer controls), then
  ``right_0 ..`` when right players are controlled too. Right agents see the game
  mirrored, from their own side, and get the negated scoring reward.
- Observations: ``simple115v2`` (default; float32, ``(A, 115)``), ``simple115``,
  or ``extracted`` (the uint8 super-minimap, ``(A, 72, 96, 4)`` by default).
- Global state: the first left agent's observation with *every* controlled left
  player marked active (the ``active`` one-hot of simple115, the ``active`` plane
  of the minimap). Same shape and dtype as one observation; it describes the
  whole pitch, which every agent's observation already does but for who is active.
- 19 actions (gfootball's default action set), all always available.
- Rewards: ``scoring`` or ``scoring,checkpoints``, per agent, as gfootball gives them.
  ``info["score_reward"]`` is returned only on steps where a goal was scored.
- End of episode: at ``episode_limit`` steps (the scenario's ``game_duration``
  + 1: gfootball's last step is the one after that many frames) every agent is truncated; an earlier end (goal, ball out of play, lost possession in
  the academy scenarios) terminates every agent.
- Seeding: ``reset(seed=s)`` sets gfootball's ``game_engine_random_seed`` to ``s``
  (and ``reverse_team_processing`` as gfootball derives it, ``s % 2``), so the
  episode is the one a fresh ``create_environment(..., other_config_options=
  {"game_engine_random_seed": s})`` plays. gfootball itself would replay the same
  engine seed every episode; ``reset(seed=None)`` instead draws the next
  episode's engine seed from ``numpy.random.default_rng(s)``, so later episodes
  differ and are still reproducible. No env is recreated (engines are pooled).
- Episode stats (read from the game's score at the last step, not from rewards):
  ``goals_for``, ``goals_against`` (the left team's), ``score`` (their
  difference) and ``win`` (1.0 when the difference is > 0).
- ``autoreset="fast"`` restores a ``get_state()`` snapshot of the first reset
  instead of resetting (see docs/families/football.md for when that pays).
- ``render()`` returns an RGB frame drawn off-screen (EGL). gfootball allows one
  rendering env per process.

Examples:
    >>> env = make_football("academy_3_vs_1_with_keeper", left_agents=3)
    >>> env.spec.n_agents, env.spec.obs_shape, env.spec.n_actions, env.spec.episode_limit
    (3, (115,), 19, 401)
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pkgutil
import warnings
from typing import Any, Sequence

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.core.adapter import NativeEnvAdapter
from marl_vec.envs.extras import UnknownEnvError, require
from marl_vec.core.spec import DiscreteAction, EnvSpec

REPRESENTATIONS = ("simple115v2", "simple115", "extracted")
REWARDS = ("scoring", "scoring,checkpoints")
STATS = ("score", "win", "goals_for", "goals_against")
_ACTIVE = slice(97, 108)  # the left team's active-player one-hot in simple115(v2)
_MAX_SEED = 2**31  # the engine takes an unsigned int; gfootball draws below 2e9


def _n_actions(space: Any) -> int:
    # Discrete(19) for one player, MultiDiscrete([19] * n) for several.
    return int(space.n) if hasattr(space, "n") else int(space.nvec[0])


def _gfootball() -> Any:
    what = "Google Research Football (see scripts/install/install_football.sh)"
    # gfootball is built on the old gym, which prints a notice to migrate to
    # gymnasium on import: advice for gfootball, not for our users.
    with contextlib.redirect_stderr(io.StringIO()):
        require("gym", "football", what)
    return require("gfootball.env", "football", what)


def scenarios() -> list[str]:
    """Names of the scenarios this gfootball ships (``academy_*``, ``11_vs_11_*``, ``5_vs_5``, ...)."""
    _gfootball()
    import gfootball.scenarios

    return sorted(m.name for m in pkgutil.iter_modules(gfootball.scenarios.__path__) if not m.ispkg)


class FootballAdapter(NativeEnvAdapter):
    """Wraps one gfootball env; ``close()`` returns its engine to gfootball's
    per-process pool, where its memory stays for the next env to reuse.

    Args:
        scenario: a gfootball scenario name, e.g. ``academy_3_vs_1_with_keeper``.
        left_agents: left players the trainer controls (at least 1).
        right_agents: right players the trainer controls, as more agents.
        representation: ``simple115v2``, ``simple115`` or ``extracted``.
        rewards: ``scoring`` or ``scoring,checkpoints``.
        channel_dimensions: (width, height) of the ``extracted`` minimap.
        other_config_options: passed to gfootball's config as is.
    """

    def __init__(
        self,
        scenario: str,
        left_agents: int = 1,
        right_agents: int = 0,
        representation: str = "simple115v2",
        rewards: str = "scoring",
        channel_dimensions: Sequence[int] = (96, 72),
        other_config_options: dict[str, Any] | None = None,
    ):
        football = _gfootball()
        from gfootball.env import config as gf_config

        if representation not in REPRESENTATIONS:
            raise ValueError(f"unknown football representation {representation!r}; allowed: {', '.join(REPRESENTATIONS)}")
        if rewards not in REWARDS:
            raise ValueError(f"unknown football rewards {rewards!r}; allowed: {' or '.join(map(repr, REWARDS))}")
        # gfootball calls sys.exit(1) on an unknown scenario: check it here first.
        if not isinstance(scenario, str) or importlib.util.find_spec(f"gfootball.scenarios.{scenario}") is None:
            raise UnknownEnvError(f"unknown football scenario {scenario!r}; allowed: {', '.join(scenarios())}")
        scenario_cfg = gf_config.Config({"level": scenario}).ScenarioConfig()
        max_left, max_right = int(scenario_cfg.controllable_left_players), int(scenario_cfg.controllable_right_players)
        if not (isinstance(left_agents, int) and 1 <= left_agents <= max_left):
            raise ValueError(f"{scenario}: left_agents={left_agents!r}; allowed: 1 to {max_left} (its controllable left players)")
        if not (isinstance(right_agents, int) and 0 <= right_agents <= max_right):
            raise ValueError(f"{scenario}: right_agents={right_agents!r}; allowed: 0 to {max_right} (its controllable right players)")
        if scenario_cfg.control_all_players:
            raise ValueError(f"{scenario} makes the agent control all players at once; it is not supported")
        options = dict(other_config_options or {})
        self._user_reverse = "reverse_team_processing" in options
        self.scenario = scenario
        with warnings.catch_warnings():
            # gym 0.25 warns that gfootball's wrappers use the old step API: we expect it.
            warnings.filterwarnings("ignore", message=".*old step API.*")
            self.env = football.create_environment(
                env_name=scenario,
                representation=representation,
                rewards=rewards,
                number_of_left_players_agent_controls=left_agents,
                number_of_right_players_agent_controls=right_agents,
                channel_dimensions=tuple(channel_dimensions),
                other_config_options=options,
            )
        self.n_left, self.n_right = left_agents, right_agents
        self.representation = representation
        # The chain of wrappers, outermost first; restore() replays the
        # observation wrappers on the raw observation after set_state.
        self._chain = []
        env = self.env
        while hasattr(env, "env"):
            self._chain.append(env)
            env = env.env
        self._football = env  # gfootball's FootballEnv
        # gfootball has no public setter for the engine seed: its Config object
        # (read again at every reset) is the one place to put it.
        self._config = env._config
        obs_space = self.env.observation_space
        # gfootball drops the agent axis when it controls a single player.
        obs_shape = tuple(obs_space.shape)[1:] if self.n_agents > 1 else tuple(obs_space.shape)
        self._active_channel = None
        if representation == "extracted":
            from gfootball.env import observation_preprocessing

            self._active_channel = list(observation_preprocessing.get_smm_layers(self._config)).index("active")
        agents = [f"left_{i}" for i in range(left_agents)] + [f"right_{i}" for i in range(right_agents)]
        # gfootball ends an episode at the step after game_duration frames.
        self._episode_limit = int(scenario_cfg.game_duration) + 1
        self.spec = EnvSpec(
            agents=tuple(agents),
            obs_shape=obs_shape,
            obs_dtype=np.dtype(obs_space.dtype),
            state_shape=obs_shape,
            state_dtype=np.dtype(obs_space.dtype),
            action=DiscreteAction(_n_actions(self.env.action_space)),
            episode_limit=self._episode_limit,
            stats=STATS,
            snapshots=True,
        )
        self._engine_rng: np.random.Generator | None = None
        self._steps = 0
        self._score: tuple[int, ...] = (0, 0)

    @property
    def n_agents(self) -> int:
        return self.n_left + self.n_right

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        # One agent: gfootball drops the agent axis (obs (115,), scalar reward).
        self._obs_target = row.obs[0] if self.n_agents == 1 else row.obs
        row.agent_mask[:] = True
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        row.avail_actions[:] = True

    # -- seeding ------------------------------------------------------------------

    def _seed_engine(self, seed: int | None) -> None:
        if seed is not None:
            if not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < _MAX_SEED:
                raise ValueError(f"football seed must be an int in [0, 2**31), got {seed!r}")
            engine_seed = int(seed)
            self._engine_rng = np.random.default_rng(engine_seed)
            # As a fresh env: its first reset() is episode 2 (the constructor plays 1).
            self._config["episode_number"] = 1
        else:
            if self._engine_rng is None:
                self._engine_rng = np.random.default_rng()
            engine_seed = int(self._engine_rng.integers(_MAX_SEED))
        self._config["game_engine_random_seed"] = engine_seed
        if not self._user_reverse:
            # gfootball sets this once from the first seed; follow every new seed.
            self._config["reverse_team_processing"] = bool(engine_seed % 2)

    # -- writing results ----------------------------------------------------------

    def _write_obs(self, obs: np.ndarray) -> None:
        row = self.row
        self._obs_target[...] = obs
        # The state: agent 0's view with every controlled left player active.
        row.state[...] = row.obs[0]
        if self.n_left > 1:
            if self._active_channel is None:
                np.max(row.obs[: self.n_left, _ACTIVE], axis=0, out=row.state[_ACTIVE])
            else:
                c = self._active_channel
                np.max(row.obs[: self.n_left, ..., c], axis=0, out=row.state[..., c])

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        self._seed_engine(seed)
        obs = self.env.reset()
        self._steps = 0
        self._write_obs(obs)
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        action = int(actions[0]) if self.n_agents == 1 else actions
        obs, reward, done, info = self.env.step(action)
        self._steps += 1
        self._write_obs(obs)
        row = self.row
        row.reward[:] = reward
        cut = done and self._steps >= self._episode_limit
        row.terminated[:] = done and not cut
        row.truncated[:] = cut
        if done:
            self._score = tuple(int(g) for g in self._football.observation()[0]["score"])
        score_reward = info.get("score_reward", 0)
        # Infos cross process boundaries only when non-empty: report goals only.
        return {"score_reward": int(score_reward)} if score_reward else {}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        goals_for, goals_against = self._score
        diff = goals_for - goals_against
        return {"score": float(diff), "win": float(diff > 0), "goals_for": float(goals_for), "goals_against": float(goals_against)}

    # -- fast autoreset -------------------------------------------------------------

    def snapshot(self) -> Any:
        return self.env.get_state(), self._steps

    def restore(self, snapshot: Any) -> dict[str, Any]:
        state, steps = snapshot
        self.env.set_state(state)
        self._steps = steps
        # set_state gives no observation: replay the observation wrappers on the raw one.
        import gym

        obs = self._football.observation()
        for wrapper in reversed(self._chain):
            if isinstance(wrapper, gym.ObservationWrapper):
                obs = wrapper.observation(obs)
        self._write_obs(obs)
        return {}

    # -- the rest -----------------------------------------------------------------

    def render(self) -> np.ndarray:
        try:
            return self.env.render(mode="rgb_array")
        except AssertionError as exc:
            if "multiple rendering" in str(exc):
                raise RuntimeError(
                    "gfootball renders only one env per process; render a single env, or use "
                    "SubprocVecEnv with one env per worker"
                ) from exc
            raise


def make_football(env_id: str, **kwargs: Any) -> FootballAdapter:
    """The ``football`` family: ``env_id`` is a gfootball scenario name.

    Keyword arguments: ``left_agents``, ``right_agents``, ``representation``,
    ``rewards``, ``channel_dimensions``, ``other_config_options`` (see
    `FootballAdapter`).
    """
    allowed = ("left_agents", "right_agents", "representation", "rewards", "channel_dimensions", "other_config_options")
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"unknown football option(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    return FootballAdapter(env_id, **kwargs)

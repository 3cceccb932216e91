"""The StarCraft II adapter: a SMAC-style battle on pysc2's raw interface, step by step.

`StarCraft2Env` ties the parts of this package together: it resolves the
map (`maps`), runs the game (`game`), reads the units
(`units`), sends actions (`actions`), writes SMAC's features
(`features`) and reward (`reward`), and decides how an episode
ends. Imports: those modules, `marl_vec.core.adapter`, `marl_vec.core.spec`.

It drives ``pysc2.env.sc2_env.SC2Env`` (or any object with its interface, such
as pysc2's ``mock_sc2_env.SC2TestEnv``) and presents it the way SMAC does:

- agents: the controlled player's units, a fixed count per map (``MAPS``);
- per-agent observation: move feasibility (N, S, E, W); for each enemy
  ``[attackable, distance, rel x, rel y, health, (shield), (unit type one-hot)]``;
  for each other ally ``[visible, distance, rel x, rel y, health, (shield), (type),
  (last action)]``; own ``[health, (shield), (type), (agent id), (last action)]``.
  Distances and offsets are divided by the sight range; health by its maximum;
- state: per ally ``[health, cooldown or energy, rel x, rel y, (shield), (type)]``,
  per enemy ``[health, rel x, rel y, (shield), (type)]`` (positions relative to the
  map centre, over the map size), then optionally every agent's last action;
- actions ``[no-op, stop, move N, move S, move E, move W, attack enemy j...]``:
  a dead agent may only take no-op, a live one never; attack only enemies in
  shooting range;
- reward: SMAC's shaped team reward (damage and kills dealt, a win bonus,
  normalised so that a perfect episode sums to ``reward_scale_rate``), or the
  map's own score (``reward="game"``, the default on pysc2's mini-games);
- episode end: a won or lost battle is terminated; reaching ``episode_limit`` or
  the map's own timer is truncated (``info["episode_limit"] = True``); a crashed
  game is relaunched and its episode ends truncated with ``info["restarted"] = True``.

Example (with pysc2's mock game; a real game needs ``SC2PATH``)::

    from pysc2.env import mock_sc2_env
    env = StarCraft2Env("3m", game_factory=mock_sc2_env.SC2TestEnv)
    env.spec.n_agents, env.spec.n_actions      # (3, 9)
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from marl_vec.core.adapter import MultiAgentEnv
from marl_vec.envs.starcraft2.actions import raw_calls
from marl_vec.envs.starcraft2.features import SmacFeatures
from marl_vec.envs.starcraft2.game import BY_DIFFICULTY, GameSession, check_game
from marl_vec.envs.starcraft2.maps import MapInfo, resolve_map
from marl_vec.envs.starcraft2.reward import SmacReward
from marl_vec.envs.starcraft2.units import Roster
from marl_vec.core.spec import DiscreteAction, EnvSpec

_STATS = ("battle_won", "dead_allies", "dead_enemies")


def _import_factory(name: str) -> Callable[..., Any]:
    """The callable named ``"module:attr"`` (a game_factory given by name)."""
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"game_factory as a string must be 'module:name', got {name!r}")
    factory = getattr(importlib.import_module(module), attr, None)
    if not callable(factory):
        raise ValueError(f"game_factory {name!r}: module {module!r} has no callable {attr!r}")
    return factory


class StarCraft2Env(MultiAgentEnv):
    """A SMAC-style StarCraft II battle on pysc2's ``SC2Env`` (raw interface).

    Args:
        map_name: a key of ``MAPS``, or any map when ``map_info`` is given.
        map_info: a `MapInfo` (or dict of its fields) for maps not in ``MAPS``,
            or to override one (e.g. ``{"episode_limit": 100}``).
        game_factory: called with ``SC2Env``'s keyword arguments to launch a game; default
            ``pysc2.env.sc2_env.SC2Env`` after checking that the game and map are installed.
            Tests pass ``pysc2.env.mock_sc2_env.SC2TestEnv``. A ``"module:name"`` string is
            imported (YAML configs, PyMARL's env_args); ``mock.MOCK_3M`` is a toy 3m battle.
        step_mul: game steps per agent step. difficulty: the built-in bot's (SMAC maps), "1"-"A".
        reward: ``"smac"`` (shaped) or ``"game"`` (the map's score); default by map kind.
        reward_*: SMAC's reward parameters, same names and defaults.
        obs_last_action, obs_agent_id, state_last_action: optional features.
        sight_range, shoot_range, move_amount: SMAC's 9, 6 and 2 world units.
        raw_resolution: resolution of pysc2's raw positions (finer than a world unit).
        max_restarts: relaunches allowed for crashed games over the adapter's life.
    """

    def __init__(
        self,
        map_name: str = "3m",
        *,
        map_info: MapInfo | dict[str, Any] | None = None,
        game_factory: Callable[..., Any] | str | None = None,
        step_mul: int = 8,
        difficulty: str = "7",
        reward: str | None = None,
        reward_win: float = 200.0,
        reward_defeat: float = 0.0,
        reward_death_value: float = 10.0,
        reward_negative_scale: float = 0.5,
        reward_only_positive: bool = True,
        reward_scale: bool = True,
        reward_scale_rate: float = 20.0,
        obs_last_action: bool = False,
        obs_agent_id: bool = False,
        state_last_action: bool = True,
        sight_range: float = 9.0,
        shoot_range: float = 6.0,
        move_amount: float = 2.0,
        raw_resolution: int = 256,
        max_restarts: int = 10,
    ):
        info = resolve_map(map_name, map_info)
        if reward is None:
            reward = "smac" if info.smac else "game"
        if reward not in ("smac", "game"):
            raise ValueError(f"reward must be 'smac' or 'game', got {reward!r}")
        if str(difficulty) not in BY_DIFFICULTY:
            raise ValueError(f"difficulty must be one of {', '.join(BY_DIFFICULTY)}, got {difficulty!r}")
        if isinstance(game_factory, str):
            game_factory = _import_factory(game_factory)
        if game_factory is None:
            check_game(map_name, info.directory)
        self.map_name, self.info = map_name, info
        self.reward_mode = reward
        self.move_amount = move_amount
        self.game = GameSession(map_name, info, game_factory=game_factory, step_mul=step_mul,
                                difficulty=str(difficulty), raw_resolution=raw_resolution, max_restarts=max_restarts)
        self.features = SmacFeatures(info, obs_last_action=obs_last_action, obs_agent_id=obs_agent_id,
                                     state_last_action=state_last_action, sight_range=sight_range,
                                     shoot_range=shoot_range, move_amount=move_amount)
        self.smac_reward = SmacReward(info.n_agents, info.n_enemies, win=reward_win, defeat=reward_defeat,
                                 death_value=reward_death_value, negative_scale=reward_negative_scale,
                                 only_positive=reward_only_positive, scale_on=reward_scale, scale_rate=reward_scale_rate)
        self.n_agents, self.n_enemies, self.n_actions = info.n_agents, info.n_enemies, self.features.n_actions
        A = self.n_agents
        self.spec = EnvSpec(
            agents=tuple(f"agent_{i}" for i in range(A)),
            obs_shape=(self.features.obs_size,),
            obs_dtype=np.dtype(np.float32),
            state_shape=(self.features.state_size,),
            state_dtype=np.dtype(np.float32),
            action=DiscreteAction(self.n_actions),
            episode_limit=info.episode_limit,
            stats=_STATS,
        )
        self.roster = Roster(map_name, info)
        self.allies, self.enemies = self.roster.allies, self.roster.enemies
        self.last_action = np.zeros((A, self.n_actions), np.float32)
        self._needs_reset = True
        self._steps = 0
        self._won = False

    @property
    def restarts(self) -> int:
        """Crashed games relaunched so far."""
        return self.game.restarts

    @property
    def max_reward(self) -> float:
        """SMAC's reward normaliser, set at reset from the enemies on the map."""
        return self.smac_reward.max_reward

    @property
    def native(self) -> Any:
        """The adapter itself: the pysc2 game object is replaced on every relaunch."""
        return self

    def bind(self, row: Any) -> None:
        super().bind(row)
        self.features.bind(row)

    def _write_features(self) -> None:
        game = self.game
        self.features.write(self.row, self.allies, self.enemies, self.last_action,
                            map_size=(game.map_x, game.map_y), bounds=game.bounds)

    # -- reset and step -----------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        timestep = self.game.reset(seed)
        self._needs_reset = False
        self._steps = 0
        self._won = False
        self.last_action.fill(0)
        self.roster.clear()
        self.roster.read(timestep.observation, first=True, raw_scale=self.game.raw_scale, map_y=self.game.map_y)
        self.smac_reward.start(self.allies, self.enemies)
        self._write_features()
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        row, game = self.row, self.game
        if self._needs_reset:
            raise RuntimeError(f"StarCraft2Env({self.map_name!r}): step() after the episode ended; call reset()")
        calls = raw_calls(actions, self.allies, self.enemies, game.pysc2.actions.RAW_FUNCTIONS,
                          move_amount=self.move_amount, raw_scale=game.raw_scale, map_y=game.map_y)
        try:
            timestep = game.step(calls)
        except game.crash_errors() as exc:
            return self._restart(exc)
        self._steps += 1
        score = float(timestep.reward)
        dead_before_a, dead_before_e = ~self.allies.alive, ~self.enemies.alive
        self.roster.read(timestep.observation, first=False, raw_scale=game.raw_scale, map_y=game.map_y)
        shaped = self.reward_mode == "smac"
        reward = self.smac_reward.battle(self.allies, self.enemies, dead_before_a, dead_before_e) if shaped else score
        n_ally, n_enemy = int(self.allies.alive.sum()), int(self.enemies.alive.sum())
        info: dict[str, Any] = {}
        terminated = truncated = False
        if self.info.smac and (n_ally == 0 or n_enemy == 0):
            terminated = True
            if n_ally > 0:  # all enemies dead, some of ours alive
                self._won = True
                if shaped:
                    reward += self.smac_reward.win
            elif n_enemy > 0 and shaped:
                reward += self.smac_reward.defeat
        elif not self.info.smac and n_enemy == 0 and n_ally > 0:
            self._won = True  # a mini-game wave cleared; the map sends the next one
        if not terminated:
            if int(timestep.step_type) == 2:  # StepType.LAST: the map ended the game
                terminated = n_ally == 0
                truncated = not terminated
                if truncated:
                    info["episode_limit"] = True
            elif self._steps >= self.info.episode_limit:
                truncated = True
                info["episode_limit"] = True
        if shaped:
            reward = self.smac_reward.scale(reward)
        # SMAC's last action: what each agent did; a dead agent's (ignored) action counts as no-op.
        self.last_action.fill(0)
        for i, a in enumerate(actions):
            self.last_action[i, 0 if dead_before_a[i] else int(a)] = 1
        row.reward.fill(reward)
        # A dead agent's episode is over (terminated); the others end with the env.
        np.logical_not(self.allies.alive, out=row.terminated)
        if terminated:
            row.terminated.fill(True)
        row.truncated.fill(False)
        if truncated:
            np.logical_not(row.terminated, out=row.truncated)
        self._write_features()
        if terminated or truncated:
            self._needs_reset = True
            info.update(self._end_info())
        return info

    def _end_info(self) -> dict[str, Any]:
        return {
            "battle_won": self._won,
            "dead_allies": int(self.n_agents - self.allies.alive.sum()),
            "dead_enemies": int(self.n_enemies - self.enemies.alive.sum()),
        }

    def _restart(self, exc: BaseException) -> dict[str, Any]:
        """The game crashed: relaunch it and end this episode truncated."""
        self.game.relaunch(exc)
        self._needs_reset = True
        row = self.row
        # The last observation stays as it was; nothing happened in this step.
        row.reward.fill(0.0)
        row.truncated.fill(True)
        row.terminated.fill(False)
        return {"restarted": True, "error": f"{type(exc).__name__}: {exc}", "episode_limit": False, **self._end_info()}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {k: float(info[k]) for k in _STATS if k in info}

    def close(self) -> None:
        self.game.close()

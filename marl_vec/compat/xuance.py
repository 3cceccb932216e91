"""XuanCeVecEnv: a marl_vec VecEnv as XuanCe's multi-agent vector env.

XuanCe's multi-agent agents (IPPO, MAPPO, QMIX, VDN, MADDPG, ...) take their
envs in the constructor and drive them through ``DummyVecMultiAgentEnv``'s
interface (and, for its SC2 and Football runners, the ``_StarCraft2`` /
``_Football`` variants). This face gives any marl_vec VecEnv (every backend,
every family) that interface, so XuanCe's own training loop runs unchanged:

- ``num_envs``, ``agents``, ``num_agents``, ``observation_space`` /
  ``action_space`` (dicts agent -> Space), ``state_space``,
  ``max_episode_steps``, ``env_info``, ``groups_info``;
- ``buf_obs``, ``buf_state``, ``buf_avail_actions``: lists of E entries that
  ``step`` and ``reset`` fill in place and XuanCe's trainer writes into;
- ``reset() -> (E obs dicts, E info dicts)``;
  ``step(E dicts agent -> action) -> (obs dicts, reward dicts, terminated
  dicts, E truncated bools, E info dicts)``; every info holds ``state``,
  ``avail_actions``, ``agent_mask``, ``episode_step``, ``episode_score``, and at
  an episode's end ``reset_obs``, ``reset_state``, ``reset_avail_actions``.
  As in XuanCe, the observation returned at an episode's end is the episode's
  last one and the next episode starts from ``reset_*`` (marl_vec's same_step
  ``final_*`` arrays, mapped back);
- ``battles_game``, ``battles_won``, ``dead_allies_count``,
  ``dead_enemies_count``, ``num_enemies``, ``num_adversaries`` for XuanCe's
  SC2 and Football runners, counted from marl_vec's episode statistics.

Actions are copied out of XuanCe's dicts before the env sees them (XuanCe
stores the same arrays in its replay buffers; an env that changes actions in
place, as mpe2 does, would otherwise corrupt them), and continuous actions are
clipped to the action space, as XuanCe's own envs do.

Rewards are Python floats of float64 values, as XuanCe's own PettingZoo envs give
them: the VecEnv must have ``reward_dtype="float64"`` (float32 would round every
reward and episode score); [`XuanCeVecEnv.from_config`][marl_vec.compat.xuance.XuanCeVecEnv.from_config] builds one so by default.

The face imports neither XuanCe nor torch; it needs only gymnasium's spaces.
XuanCe 1.4.4 pins numpy<2 and gymnasium<1.3, so it lives in its own virtual
environment (``bash scripts/install/install_xuance_venv.sh``).

Examples:
    >>> import marl_vec as mv
    >>> from marl_vec.compat import XuanCeVecEnv
    >>> envs = XuanCeVecEnv.from_config("mpe/simple_spread", num_envs=2)  # float64 rewards
    >>> envs.num_envs, envs.agents, envs.max_episode_steps
    (2, ['agent_0', 'agent_1', 'agent_2'], 25)
    >>> obs, infos = envs.reset()
    >>> obs[0]["agent_0"].shape, sorted(infos[0])[:3]
    ((18,), ['agent_mask', 'avail_actions', 'episode_score'])
    >>> obs, rewards, terminated, truncated, infos = envs.step(
    ...     [{agent: 0 for agent in envs.agents} for _ in range(2)])
    >>> truncated, type(rewards[0]["agent_0"])
    ([False, False], <class 'float'>)
    >>> envs.close()
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from marl_vec.core.spec import ContinuousAction, DiscreteAction
from marl_vec.vec.base import StepResult, VecEnv


class XuanCeVecEnv:
    """XuanCe's ``DummyVecMultiAgentEnv`` interface over a marl_vec ``VecEnv``.

    Args:
        venv: any marl_vec VecEnv with ``autoreset="same_step"`` (XuanCe's own
            autoreset: the final observation is returned, the reset one in the
            infos) or ``"fast"``, plain-array observations and float64 rewards.
        max_episode_steps: XuanCe's episode length (the buffer length of its
            recurrent and episode-based learners). Default: the env's
            ``episode_limit``; required when the env declares none.
        num_enemies: what XuanCe's SC2 runner reads as ``envs.num_enemies``.
            Default: the StarCraft II adapter's enemy count, where there is one.
        num_adversaries: what XuanCe's Football runner reads as
            ``envs.num_adversaries`` (right-team players under the agent's
            control; XuanCe's academy configs use 0).

    The face resets ``venv`` once at construction, as XuanCe's envs reset
    themselves when made: a XuanCe agent reads ``buf_obs`` before its first
    ``reset()``, and the same env seeds then give the same episodes as XuanCe's
    own envs.
    """

    def __init__(
        self,
        venv: VecEnv,
        max_episode_steps: int | None = None,
        num_enemies: int | None = None,
        num_adversaries: int = 0,
    ):
        if not isinstance(venv, VecEnv):
            raise TypeError(f"XuanCeVecEnv needs a marl_vec VecEnv, got {type(venv).__name__}")
        if not venv.autoreset.keeps_final:
            raise ValueError(
                f"XuanCeVecEnv needs autoreset='same_step' (or 'fast'), got {venv.autoreset.value!r}: "
                "XuanCe's trainers expect the final observation from step() and the reset one in "
                "infos['reset_obs']"
            )
        spec = venv.spec
        limit = max_episode_steps if max_episode_steps is not None else spec.episode_limit
        if limit is None:
            raise ValueError(
                "the env declares no episode_limit; pass max_episode_steps= (XuanCe sizes its "
                "episode buffers by it)"
            )
        if spec.reward_dtype != np.dtype(np.float64):
            raise ValueError(
                f"XuanCeVecEnv needs float64 rewards (XuanCe's own envs give them unrounded), the VecEnv has "
                f"{spec.reward_dtype}; build it with reward_dtype='float64' (e.g. mv.make(config, "
                "reward_dtype='float64')), or use XuanCeVecEnv.from_config(config, ...), which does"
            )
        self.venv = venv
        self.spec = spec
        self.num_envs = venv.num_envs
        self.agents: list[str] = list(spec.agents)
        self.num_agents = spec.n_agents
        self.max_episode_steps = int(limit)
        self.observation_space: dict[str, spaces.Space] = {
            agent: spaces.Box(-np.inf, np.inf, spec.obs_shape, spec.obs_dtype) for agent in self.agents
        }
        self.action_space: dict[str, spaces.Space] = {
            agent: _action_space(spec.action, a, spec.n_agents) for a, agent in enumerate(self.agents)
        }
        self.state_space = spaces.Box(-np.inf, np.inf, spec.state_shape, spec.state_dtype)
        self.env_info: dict[str, Any] = {
            "state_space": self.state_space,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "agents": self.agents,
            "num_agents": self.num_agents,
            "max_episode_steps": self.max_episode_steps,
        }
        self.agent_groups: list[list[str]] = []
        self.groups_info: dict[str, Any] = {
            "num_groups": 0, "agent_groups": [], "observation_space_groups": [],
            "action_space_groups": [], "num_agents_groups": [],
        }
        self._num_enemies = num_enemies
        self.num_adversaries = num_adversaries
        E = self.num_envs
        # XuanCe's SC2 / Football runners read these counters.
        self.battles_game = np.zeros(E, np.int32)
        self.battles_won = np.zeros(E, np.int32)
        self.dead_allies_count = np.zeros(E, np.int32)
        self.dead_enemies_count = np.zeros(E, np.int32)

        self.buf_obs: list[dict[str, np.ndarray]] = [{} for _ in range(E)]
        self.buf_state: list[np.ndarray] = [np.zeros(spec.state_shape, spec.state_dtype) for _ in range(E)]
        self.buf_avail_actions: list[dict[str, np.ndarray] | None] = [{} for _ in range(E)]
        self.buf_info: list[dict[str, Any]] = [{} for _ in range(E)]
        self._episode_step = [0] * E
        self._episode_score: list[dict[str, float]] = [dict.fromkeys(self.agents, 0.0) for _ in range(E)]
        # Actions are copied into this array (and clipped, if continuous) before the env sees them.
        self._actions = np.zeros((E, self.num_agents, *spec.action_shape), spec.action.dtype)
        # Each agent's own bounds, (A, *shape): agents' Boxes may differ (see ContinuousAction.agent_bounds).
        self._clip = spec.action.agent_bounds(spec.n_agents) if isinstance(spec.action, ContinuousAction) else None
        self._pending = False
        self.closed = False
        self.reset()

    @classmethod
    def from_config(cls, source: Any, max_episode_steps: int | None = None, num_enemies: int | None = None,
                    num_adversaries: int = 0, **overrides: Any) -> "XuanCeVecEnv":
        """The face over ``marl_vec.make(source, **overrides)`` with float64 rewards (XuanCe's own)."""
        from marl_vec.tools.config import make

        overrides.setdefault("reward_dtype", "float64")
        return cls(make(source, **overrides), max_episode_steps, num_enemies, num_adversaries)

    # -- XuanCe's interface -------------------------------------------------------

    @property
    def num_enemies(self) -> int:
        """Enemy units (XuanCe's SC2 runner): given, or the StarCraft II adapter's count."""
        if self._num_enemies is None:
            try:
                self._num_enemies = int(self.venv.get_attr("n_enemies", indices=[0])[0])
            except AttributeError as exc:
                raise AttributeError(
                    "this env has no enemy count; pass XuanCeVecEnv(..., num_enemies=n)"
                ) from exc
        return self._num_enemies

    def reset(self) -> tuple[list[dict[str, np.ndarray]], list[dict[str, Any]]]:
        """Reset every env: (E obs dicts, E info dicts), as ``DummyVecMultiAgentEnv.reset``."""
        result = self.venv.reset()
        _check_plain(result)
        for e in range(self.num_envs):
            self._episode_step[e] = 0
            self._episode_score[e] = dict.fromkeys(self.agents, 0.0)
            obs, state, avail = self._rows(result.obs[e], result.state[e],
                                           None if result.avail_actions is None else result.avail_actions[e])
            self.buf_obs[e], self.buf_state[e], self.buf_avail_actions[e] = obs, state, avail
            self.buf_info[e] = {
                **result.infos[e],
                "episode_step": 0,
                "episode_score": self._episode_score[e],
                "agent_mask": self._mask(result.agent_mask[e]),
                "avail_actions": avail,
                "state": state,
            }
        return self.buf_obs.copy(), self.buf_info.copy()

    def step_async(self, actions: Sequence[dict[str, Any]]) -> None:
        """Copy E dicts agent -> action into the batch and start the step."""
        if self._pending:
            raise RuntimeError("step_async() called twice without step_wait()")
        if len(actions) != self.num_envs:
            raise ValueError(f"step() needs one dict of actions per env ({self.num_envs}), got {len(actions)}")
        out = self._actions
        for e, per_agent in enumerate(actions):
            for a, agent in enumerate(self.agents):
                try:
                    out[e, a] = per_agent[agent]
                except KeyError:
                    raise ValueError(
                        f"the actions of env {e} have no entry for agent {agent!r}; "
                        f"every agent of {self.agents} needs one"
                    ) from None
        if self._clip is not None:
            np.clip(out, self._clip[0], self._clip[1], out=out)
        self.venv.step_async(out)
        self._pending = True

    def step_wait(self) -> tuple[list, list, list, list[bool], list[dict[str, Any]]]:
        """Finish the step: obs, reward, terminated dicts, truncated bools and infos per env."""
        if not self._pending:
            raise RuntimeError("step_wait() called without step_async()")
        self._pending = False
        r = self.venv.step_wait()
        agents = self.agents
        rewards = r.reward.tolist()
        terminated = r.terminated.tolist()
        done = r.done.tolist()
        rew_dicts, term_dicts, truncated = [], [], []
        for e in range(self.num_envs):
            reward_e = dict(zip(agents, rewards[e]))
            term_e = dict(zip(agents, terminated[e]))
            score = self._episode_score[e]
            for agent, value in reward_e.items():
                score[agent] += value
            self._episode_step[e] += 1
            info: dict[str, Any] = {
                **r.infos[e],
                "episode_step": self._episode_step[e],
                "episode_score": score,
                "agent_mask": self._mask(r.agent_mask[e]),
            }
            avail_now = None if r.avail_actions is None else r.avail_actions[e]
            if done[e]:
                assert r.final_obs is not None and r.final_state is not None  # same_step / fast
                final_avail = None if r.final_avail_actions is None else r.final_avail_actions[e]
                obs, state, avail = self._rows(r.final_obs[e], r.final_state[e], final_avail)
                info["reset_obs"], info["reset_state"], info["reset_avail_actions"] = self._rows(
                    r.obs[e], r.state[e], avail_now)
                truncated.append(not all(terminated[e]))
                self._count_battle(e, r.infos[e].get("episode", {}))
                self._episode_step[e] = 0
                self._episode_score[e] = dict.fromkeys(agents, 0.0)
            else:
                obs, state, avail = self._rows(r.obs[e], r.state[e], avail_now)
                truncated.append(False)
            info["avail_actions"], info["state"] = avail, state
            self.buf_obs[e], self.buf_state[e], self.buf_avail_actions[e] = obs, state, avail
            self.buf_info[e] = info
            rew_dicts.append(reward_e)
            term_dicts.append(term_e)
        return self.buf_obs.copy(), rew_dicts, term_dicts, truncated, self.buf_info.copy()

    def step(self, actions: Sequence[dict[str, Any]]) -> tuple[list, list, list, list[bool], list[dict[str, Any]]]:
        self.step_async(actions)
        return self.step_wait()

    def render(self, mode: str | None = None) -> list[Any]:
        """One frame per env (the VecEnv's render mode decides; ``mode`` is XuanCe's and ignored)."""
        return self.venv.render()

    def close(self) -> None:
        self.closed = True
        self.venv.close()

    def close_extras(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"XuanCeVecEnv({self.venv!r})"

    # -- helpers ------------------------------------------------------------------

    def _rows(self, obs: np.ndarray, state: np.ndarray, avail: np.ndarray | None
              ) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray] | None]:
        """One env's rows as XuanCe's dicts (views of the VecEnv's fresh copies)."""
        obs_dict = dict(zip(self.agents, obs))
        avail_dict = None if avail is None else dict(zip(self.agents, avail))
        return obs_dict, state, avail_dict

    def _mask(self, mask: np.ndarray) -> dict[str, bool]:
        return dict(zip(self.agents, mask.tolist()))

    def _count_battle(self, e: int, episode: dict[str, Any]) -> None:
        """XuanCe's SC2 / Football counters, from marl_vec's episode summary."""
        self.battles_game[e] += 1
        if "battle_won" in episode:  # StarCraft II
            self.battles_won[e] += int(bool(episode["battle_won"]))
            self.dead_allies_count[e] += int(episode.get("dead_allies", 0))
            self.dead_enemies_count[e] += int(episode.get("dead_enemies", 0))
        elif "win" in episode:  # Football: the game's score, not the last step's reward
            self.battles_won[e] += int(bool(episode["win"]))


def _action_space(action: DiscreteAction | ContinuousAction, agent: int, n_agents: int) -> spaces.Space:
    """Agent ``agent``'s space: Discrete, or a Box of the padded shape within its own bounds."""
    if isinstance(action, DiscreteAction):
        return spaces.Discrete(action.n_actions)
    return action.agent_space(agent, n_agents)


def _check_plain(result: StepResult) -> None:
    if not isinstance(result.obs, np.ndarray):
        raise TypeError(
            f"XuanCeVecEnv needs plain-array observations, got {type(result.obs).__name__}: "
            "XuanCe's agents take one array per agent (flatten Dict/Tuple spaces first)"
        )

"""An RLlib ``MultiAgentEnv`` as a marl_vec adapter (extra ``rllib``).

RLlib's multi-agent envs (``ray.rllib.env.multi_agent_env.MultiAgentEnv``: RLlib's
``MultiAgentCartPole``, ``ParallelPettingZooEnv``, a user's own class) step with one
dict per env: observations of the agents that act next, rewards, ``terminateds`` and
``truncateds`` with ``"__all__"`` for the whole env, infos. Agents end independently:
an agent flagged terminated or truncated gives its last observation at that step and is
absent afterwards; the env's episode ends with ``"__all__"``.

[`RLlibAdapter`][marl_vec.envs.rllib.RLlibAdapter] shows such an env to the PettingZoo
parallel adapter through `ParallelView`, so dead
agents, masks, padding of per-agent spaces and the state are handled by the one code
that handles PettingZoo's (`marl_vec.envs.pettingzoo.parallel`):

- Agents are ``possible_agents`` (the env's own ids, ints included), in that order; a
  wrapper that keeps them in a set (``ParallelPettingZooEnv``) gives the order of the
  PettingZoo env it wraps.
- The agents alive after a reset or step are those in the observation dict that were
  not flagged done. With ``"__all__"`` every agent is out: one never flagged is
  truncated (the env cut it off).
- Simultaneous moves only: every live agent observes at every step, and rewards go to
  the agents that acted. An env that leaves a live agent out of the observation dict
  (turn-based, RLlib's ``PettingZooEnv``), or rewards an agent that did not act, is
  refused at that step with a message; for a turn-based PettingZoo game give marl_vec
  the AEC env itself.

Ray is imported only when an RLlib env is met (the registry looks for it in
``sys.modules`` first), and a missing ray names the ``rllib`` extra.

Examples:
    >>> from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    >>> adapter = RLlibAdapter(MultiAgentCartPole({"num_agents": 2}))
    >>> adapter.agent_ids, adapter.spec.agents, adapter.spec.n_actions
    ((0, 1), ('0', '1'), 2)
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym

from marl_vec.envs.extras import require
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter

ALL = "__all__"


def is_rllib_env(env: Any) -> bool:
    """Whether ``env`` is an RLlib ``MultiAgentEnv``; never imports ray (an RLlib env
    exists only where ray.rllib was imported)."""
    module = sys.modules.get("ray.rllib.env.multi_agent_env")
    return module is not None and isinstance(env, module.MultiAgentEnv)


def _agent_order(env: Any) -> list[Any]:
    """``possible_agents`` in a stable order (see the module docstring)."""
    agents = list(env.possible_agents or [])
    if not agents:
        raise ValueError(f"{type(env).__name__}: an RLlib MultiAgentEnv needs possible_agents (the ids of every "
                         "agent that may appear); set self.possible_agents in its __init__")
    inner = getattr(getattr(env, "par_env", None), "possible_agents", None)
    if inner is not None and len(inner) == len(agents) and set(inner) == set(agents):
        return list(inner)
    return agents


class ParallelView:
    """An RLlib ``MultiAgentEnv`` with PettingZoo's parallel API, as `PettingZooAdapter` reads it:
    ``possible_agents``, ``agents`` (alive now), ``observation_space(agent)``, ``action_space(agent)``,
    ``reset`` and ``step`` without ``"__all__"``."""

    def __init__(self, env: Any):
        self.env = env
        self.possible_agents = _agent_order(env)
        self.agents: list[Any] = []
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.metadata.setdefault("name", type(env).__name__)

    def observation_space(self, agent: Any) -> gym.Space:
        return self.env.get_observation_space(agent)

    def action_space(self, agent: Any) -> gym.Space:
        return self.env.get_action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        self.agents = self._ordered(obs)
        return obs, dict(infos or {})

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        before = self.agents
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        terms, truncs = dict(terms), dict(truncs)
        ended = bool(terms.pop(ALL, False)) | bool(truncs.pop(ALL, False))
        infos = {agent: info for agent, info in (infos or {}).items() if agent != ALL}
        unpaid = [a for a in rewards if a not in before and rewards[a]]
        if unpaid:
            # RLlib keeps such a reward for the agent's next step; a row has no place for it.
            raise ValueError(f"{type(self.env).__name__}: rewards {({a: rewards[a] for a in unpaid})} for agents "
                             "that did not act at this step; marl_vec takes rewards of the agents that acted only")
        if ended:
            self.agents = []
        else:
            self.agents = [a for a in self._ordered(obs) if not (terms.get(a) or truncs.get(a))]
            missing = [a for a in before if a not in obs and not (terms.get(a) or truncs.get(a))]
            if missing:
                raise ValueError(
                    f"{type(self.env).__name__}: agents {missing} acted, were not flagged done and have no "
                    "observation at this step; marl_vec takes RLlib envs whose live agents all move at every "
                    "step (for a turn-based PettingZoo game, pass the AEC env itself)")
        return obs, rewards, terms, truncs, infos

    def _ordered(self, obs: dict) -> list[Any]:
        unknown = [a for a in obs if a not in self.possible_agents]
        if unknown:
            raise ValueError(f"{type(self.env).__name__}: observations for agents {unknown} that are not in "
                             f"possible_agents {self.possible_agents}")
        return [a for a in self.possible_agents if a in obs]

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class RLlibAdapter(PettingZooAdapter):
    """Wraps an RLlib ``MultiAgentEnv`` (see the module docstring).

    ``native`` (``VecEnv.get_attr``/``call``) is the RLlib env itself.
    """

    def __init__(self, env: Any):
        require("ray.rllib", "rllib", "RLlib's MultiAgentEnv")
        if not is_rllib_env(env):
            raise TypeError(f"RLlibAdapter wraps an RLlib MultiAgentEnv, not {type(env).__name__}")
        self.rllib_env = env
        super().__init__(ParallelView(env))

    @property
    def native(self) -> Any:
        return self.rllib_env

"""Multi-Agent MuJoCo stepped by hand: the plain loop the ``mamujoco`` family must equal.

Each env is built by gymnasium-robotics itself (``mamujoco_v1.parallel_env``, with
none of marl_vec's construction code), seeded ``seed + i``, stepped with each
agent's own part of the padded actions, and reset unseeded at each episode's end,
as a trainer's loop does. Two cases need a hand: the library gives CoupledHalfCheetah
no way to set its time limit (built here from its classes, as the family does), and
it has no Ant 8x1 (the library's own Ant graph with one joint per agent). Pusher/3p's
observation order is fixed where the library leaves it to object ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np


@dataclass
class Case:
    env_id: str  # Scenario/agent_conf, as the family takes it
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.kwargs.items() if k != "max_episode_steps")
        return self.env_id + (f"[{extra}]" if extra else "")

    def native(self) -> Any:
        from gymnasium_robotics import mamujoco_v1

        scenario, _, conf = self.env_id.partition("/")
        kwargs = dict(self.kwargs)
        if scenario == "CoupledHalfCheetah":
            from gymnasium_robotics.envs.multiagent_mujoco.coupled_half_cheetah import CoupledHalfCheetahEnv

            limit = kwargs.pop("max_episode_steps", 1000)
            kwargs["gym_env"] = gym.wrappers.TimeLimit(CoupledHalfCheetahEnv(), max_episode_steps=limit)
        if self.env_id == "Ant/8x1":
            from gymnasium_robotics.envs.multiagent_mujoco.obsk import get_parts_and_edges

            parts, edges, globals_ = get_parts_and_edges("Ant", "4x2")
            kwargs["agent_factorization"] = {"partition": [(j,) for p in parts for j in p], "edges": edges,
                                             "globals": globals_}
        env = mamujoco_v1.parallel_env(scenario, conf or None, **kwargs)
        if scenario == "Pusher" and conf:
            # The library labels two joints alike and orders them by object id (see the family's
            # _order_label_ties): the shoulder pan joint (qpos 0) first, as the family does.
            for k_dict in env.k_dicts:
                for level, nodes in k_dict.items():
                    k_dict[level] = sorted(nodes, key=lambda n: (n.label, n.qpos_ids))
        return env


def padded(values: list[np.ndarray], width: int) -> np.ndarray:
    out = np.zeros((len(values), width), dtype=np.result_type(*values))
    for j, v in enumerate(values):
        out[j, :len(v)] = v
    return out


class Reference:
    """``num_envs`` native envs stepped side by side; each call returns what the batch must hold."""

    def __init__(self, case: Case, num_envs: int, seed: int, obs_width: int):
        self.envs = [case.native() for _ in range(num_envs)]
        self.agents = list(self.envs[0].possible_agents)
        self.sizes = [self.envs[0].action_space(a).shape[0] for a in self.agents]
        self.width = obs_width
        self.seed = seed

    def _obs(self, obs: dict) -> np.ndarray:
        return padded([obs[a] for a in self.agents], self.width)

    def reset(self) -> dict[str, np.ndarray]:
        rows = [env.reset(seed=self.seed + i)[0] for i, env in enumerate(self.envs)]
        return {"obs": np.stack([self._obs(o) for o in rows]), "state": np.stack([e.state() for e in self.envs])}

    def step_env(self, i: int, actions: np.ndarray) -> dict[str, Any]:
        """Env ``i`` stepped with its (A, padded width) actions."""
        env = self.envs[i]
        obs, rewards, terms, truncs, _ = env.step({a: actions[j, :n] for j, (a, n) in
                                                   enumerate(zip(self.agents, self.sizes))})
        out: dict[str, Any] = {
            "obs": self._obs(obs), "state": env.state(),
            "reward": np.array([rewards[a] for a in self.agents], dtype=np.float32),
            "terminated": np.array([terms[a] for a in self.agents]),
            "truncated": np.array([truncs[a] for a in self.agents]),
        }
        out["done"] = not env.agents
        if out["done"]:
            out["final_obs"], out["final_state"] = out["obs"], out["state"]
            obs, _ = env.reset()
            out["obs"], out["state"] = self._obs(obs), env.state()
        return out

    def step(self, actions: np.ndarray) -> list[dict[str, Any]]:
        return [self.step_env(i, a) for i, a in enumerate(actions)]

    def close(self) -> None:
        for env in self.envs:
            env.close()

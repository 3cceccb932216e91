"""MaMuJoCoAdapter: a ``mamujoco_v1`` env as the PettingZoo adapter, with what that adapter cannot read off it.

The state's space, the episode limit, a name per scenario, one order for joints that
share a label, and the step: through the library (``env.step``) or, where the split
allows, through `CompiledStep` (the same numbers, its maps planned once; see
docs/families/mamujoco.md#speed). ``compiled_step`` says which, ``compiled_why`` why not.

May import: numpy, gymnasium, ``marl_vec.envs.{mamujoco.compiled_step,pettingzoo}``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec.envs.mamujoco.compiled_step import CompiledStep
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter


def _time_limit(env: Any) -> int | None:
    """The max_episode_steps of the first TimeLimit in ``env``'s wrapper chain."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None


def _order_label_ties(env: Any) -> None:
    """Give joints of one label a fixed order in the agents' observations.

    Each agent's joints at each distance are sorted by label; where two share one
    (Pusher's shoulder pan and lift joints are both labelled ``r_wrist_roll_joint``
    in gymnasium-robotics 1.4.2), their order is a set's, by object id: it differs
    from one instance to the next, so agent_0's observation would swap qpos[0] and
    qpos[1] between envs of a batch. Ties are broken by the joint's qpos index.
    """
    changed = False
    for k_dict in env.k_dicts:
        for level, nodes in k_dict.items():
            if len({n.label for n in nodes}) < len(nodes):
                k_dict[level] = sorted(nodes, key=lambda n: (n.label, repr(n.qpos_ids)))
                changed = True
    if changed:
        env.observation_factorization = env.create_observation_mapping()


class MaMuJoCoAdapter(PettingZooAdapter):
    """A ``mamujoco_v1`` env: the PettingZoo adapter, with its state, episode limit, name and
    compiled step (``compiled=False``: every step through the library's ``env.step``)."""

    def __init__(self, env: Any, env_id: str, compiled: bool = True):
        # MAMuJoCo has state() but not PettingZoo's state_space: the full observation's space.
        env.state_space = env.single_agent_env.observation_space
        if env.agent_obsk is not None:
            _order_label_ties(env)
        super().__init__(env)
        self.name = f"MaMuJoCo {env_id}"
        self.spec = dataclasses.replace(self.spec, episode_limit=_time_limit(env.single_agent_env))
        self.compiled_step: CompiledStep | None = None
        self.compiled_why = "compiled=False was asked"
        if compiled:
            self.compiled_step, self.compiled_why = CompiledStep.plan(env, self.spec.obs_shape[0],
                                                                      self.spec.action.shape[0])
        self._stepped_state: np.ndarray | None = None  # the robot's observation of this step

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        infos = super().reset(seed)
        compiled = self.compiled_step
        if compiled is not None and not compiled.matches(self._row_obs):
            # The plan is checked against the library's own observations at every reset;
            # one disagreement (a library change the plan does not know) ends it for good.
            self.compiled_step = None
            self.compiled_why = "its observations differed from the library's at a reset"
            warnings.warn(f"{self.name}: the compiled step's observations differed from gymnasium-robotics' at a "
                          "reset; this env steps through the library from now on (same results, slower)",
                          RuntimeWarning, stacklevel=2)
        return infos

    def step(self, actions: Any) -> dict[str, Any]:
        compiled = self.compiled_step
        if compiled is None:
            return super().step(actions)
        acted, acted_array = self._live, self._live_array
        state, reward, terminated, truncated, info = compiled.step(actions, self._row_obs)
        agents = compiled.agents
        if self._call_state:
            self._stepped_state = state
        # The library's dicts: every agent gets the robot's reward, flags and info.
        return self._record_step(acted, acted_array, None, dict.fromkeys(agents, reward),
                                 dict.fromkeys(agents, terminated), dict.fromkeys(agents, truncated),
                                 dict.fromkeys(agents, info))

    def _write_state(self) -> bool:
        state = self._stepped_state
        if state is None:
            return super()._write_state()
        self._stepped_state = None
        assert self.row.state is not None  # _call_state implies a state row
        self.row.state[...] = state
        return True

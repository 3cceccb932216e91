"""The ``smac:<map>`` ids: the SMAC package's own env under marl_vec's conventions.

`SmacAdapter` wraps ``smac.env.StarCraft2Env`` (installed from
github.com/oxwhirl/smac, not the package index) and reads its observations,
state and available actions into the buffer row. It shares nothing with the
pysc2-based adapter but the conventions. Imports: `marl_vec.core.adapter`,
`marl_vec.envs.extras`, `marl_vec.core.spec` (SMAC only when constructed).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from marl_vec.core.adapter import MultiAgentEnv
from marl_vec.envs.extras import require
from marl_vec.core.spec import DiscreteAction, EnvSpec


class SmacAdapter(MultiAgentEnv):
    """The SMAC package's ``smac.env.StarCraft2Env``, with marl_vec's conventions.

    Time-outs (``info["episode_limit"]``) are truncated, not terminated; a dead
    agent (only no-op available) has mask False; ``reset(seed)`` relaunches the
    game with that seed (SMAC takes its seed at construction). SMAC is not on
    the package index: install it from its repository to use ``smac:<map>``.

    Example::

        env = SmacAdapter("3m")                  # needs smac and the game
    """

    def __init__(self, map_name: str, **kwargs: Any):
        self._smac_env_module = require("smac.env", "sc2", "smac:<map> (SMAC is installed from github.com/oxwhirl/smac)")
        self.map_name, self.kwargs = map_name, kwargs
        self._seed: int | None = kwargs.pop("seed", None)
        self.env = self._smac_env_module.StarCraft2Env(map_name=map_name, seed=self._seed, **kwargs)
        info = self.env.get_env_info()
        A = int(info["n_agents"])
        self.spec = EnvSpec(
            agents=tuple(f"agent_{i}" for i in range(A)),
            obs_shape=(int(info["obs_shape"]),), obs_dtype=np.dtype(np.float32),
            state_shape=(int(info["state_shape"]),), state_dtype=np.dtype(np.float32),
            action=DiscreteAction(int(info["n_actions"])),
            episode_limit=int(info["episode_limit"]),
            stats=("battle_won", "dead_allies", "dead_enemies"),
        )

    def _write(self) -> None:
        row = self.row
        row.obs[:] = np.asarray(self.env.get_obs(), dtype=np.float32)
        row.state[:] = np.asarray(self.env.get_state(), dtype=np.float32)
        avail = cast(np.ndarray, row.avail_actions)  # discrete actions: never None
        avail[:] = np.asarray(self.env.get_avail_actions()) != 0
        # SMAC: a dead agent may only take the no-op, a live one never.
        np.logical_not(avail[:, 0], out=row.agent_mask)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if seed is not None and seed != self._seed:
            self.env.close()
            self._seed = seed
            self.env = self._smac_env_module.StarCraft2Env(map_name=self.map_name, seed=seed, **self.kwargs)
        self.env.reset()
        self._write()
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        acts = [int(a) if m else 0 for a, m in zip(actions, self.row.agent_mask)]
        reward, terminated, info = self.env.step(acts)
        info = dict(info)
        self._write()
        row = self.row
        row.reward.fill(float(reward))
        np.logical_not(row.agent_mask, out=row.terminated)
        row.truncated.fill(False)
        if terminated:
            if info.get("episode_limit", False):
                np.logical_not(row.terminated, out=row.truncated)
            else:
                row.terminated.fill(True)
        return info

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {k: float(info[k]) for k in ("battle_won", "dead_allies", "dead_enemies") if k in info}

    def close(self) -> None:
        self.env.close()

    @property
    def native(self) -> Any:
        return self.env

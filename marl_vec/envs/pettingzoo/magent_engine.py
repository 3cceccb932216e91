"""MAgent2 envs stepped through their engine: the PettingZoo adapter's fast path.

magent2's ``ParallelEnv.step`` gets each group's observations from its engine as
one array, copies it, hands out one row per agent and builds five per-agent
dicts; ``state()`` copies a map and indexes it with ``zip(*positions)``, tuples
of numpy scalars (on gather, 2,767 agents and food: about a millisecond per
call). The adapter would then gather the rows back into its buffer.

`MAgentAdapter` makes the same engine calls in the same order and lands
each group's results in the batch row with one array write per group: the
engine's view buffer straight into the observation rows (in place of the env's
own copy), rewards and flags with one indexed write each, the state built in
its row with index arrays. Results are bit for bit those of the native env
(tests/families/test_breadth_pettingzoo.py compares them with a plain loop); the native
env's attributes the next step reads (``agents``, ``team_sizes``, ``frames``)
are kept as its own ``step`` keeps them.

Used for unwrapped magent2 envs whose ``step``, ``state`` and observation code
are magent2's own (every env magent2 ships); anything else, or a ``state()``
that raises (an empty group), takes the generic PettingZoo path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter

# The native env's methods the engine path replaces: a subclass that overrides one of
# them keeps the generic path.
_REPLACED = ("step", "state", "_compute_observations", "_compute_rewards", "_compute_terminates")


def engine_path_applies(env: Any) -> bool:
    """Whether ``env`` is a magent2 parallel env whose step the engine path reproduces."""
    try:
        from magent2.environments.magent_env import magent_parallel_env
        from magent2.gridworld import GridWorld
    except ImportError:
        return False
    if not isinstance(env, magent_parallel_env) or not isinstance(getattr(env, "env", None), GridWorld):
        return False
    cls = type(env)
    return all(getattr(cls, name, None) is getattr(magent_parallel_env, name) for name in _REPLACED)


class MAgentAdapter(PettingZooAdapter):
    """A magent2 env (see `engine_path_applies`); same results as `PettingZooAdapter`.

    Examples:
        >>> from magent2.environments import battle_v4
        >>> import marl_vec as mv
        >>> with mv.DummyVecEnv([lambda: battle_v4.parallel_env(map_size=15)]) as venv:
        ...     type(venv.group.adapters[0]).__name__, venv.reset().obs.shape
        ('MAgentAdapter', (1, 6, 13, 13, 5))
    """

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        env = self.env
        self._engine = env.env
        self._handles = list(env.handles)
        self._all_handles = list(env._all_handles)
        A = len(self.agent_ids)
        # Each group's window into an observation row: its view's channels, then its
        # features tiled over the view (minimap_mode / extra_features), as the env
        # concatenates them; padded groups (tiger_deer, adversarial_pursuit) in the
        # leading corner, as the generic path pads them.
        self._windows: list[tuple[tuple[slice, ...], tuple[slice, ...] | None]] = []
        for handle in self._handles:
            height, width, channels = (int(d) for d in self._engine.get_view_space(handle))
            features = int(self._engine.get_feature_space(handle)[0])
            if not env.extra_features:
                features = 2 if env.minimap_mode else 0
            view = (slice(0, height), slice(0, width), slice(0, channels))
            feat = (slice(0, height), slice(0, width), slice(channels, channels + features)) if features else None
            self._windows.append((view, feat))
        obs = row.obs
        self._engine_path = (isinstance(obs, np.ndarray) and obs.ndim == 4 and not self._env_masks
                             and not any(self._obs_has_mask) and self._discrete)
        # Rows that may hold a non-zero observation: zeroed once when their agent is
        # no longer reported (rows of the dead stay zero without being written).
        self._obs_dirty = np.ones(A, dtype=bool)
        self._reported = np.zeros(A, dtype=bool)  # this step's agents with an observation
        self._acted_mask = np.zeros(A, dtype=bool)
        self._dones = np.ones(A, dtype=bool)
        self._rewards = np.zeros(A, dtype=np.float64)  # the env's own reward array is float64
        self._actions32 = np.zeros(A, dtype=np.int32)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        info = super().reset(seed)
        self._obs_dirty.fill(True)  # the generic path wrote every row
        return info

    def step(self, actions: Any) -> dict[str, Any]:
        if not self._engine_path or self._env_masks:
            return super().step(actions)
        env, engine, row = self.env, self._engine, self.row
        acted, acted_array = self._live, self._live_array
        n_acted = len(acted_array)
        # The env's step: each live agent's action (in env.agents order), split by group.
        actions32 = self._actions32[:n_acted]
        if self._all_alive:
            np.copyto(actions32, actions, casting="unsafe")
        else:
            np.copyto(actions32, actions[acted_array], casting="unsafe")
        start = 0
        for handle, size in zip(self._handles, env.team_sizes):
            engine.set_action(handle, actions32[start:start + size])
            start += size
        env.frames += 1
        step_done = engine.step()
        truncated_now = env.frames >= env.max_cycles

        # Terminations (the env's _compute_terminates), rewards and observations, group by group.
        dones, rewards, reported = self._dones, self._rewards, self._reported
        dones.fill(True)
        rewards.fill(0.0)
        reported.fill(False)
        acted_mask = self._acted_mask
        if self._all_alive:
            acted_mask.fill(True)
        else:
            acted_mask.fill(False)
            acted_mask[acted_array] = True
        obs = row.obs
        for g, handle in enumerate(self._handles):
            ids = engine.get_agent_id(handle)
            if not step_done:
                alive = engine.get_alive(handle)
                dead = ~alive
                dones[ids] = dead
                env.team_sizes[g] = len(ids) - np.array(dones[ids]).sum()
            view, features = engine.get_observation(handle)
            rewards[ids] = engine.get_reward(handle)
            if not len(ids):
                continue
            # The env reports agents of env.agents only: engine agents outside it (none
            # in magent2's envs) keep a zero row, as on the generic path.
            if np.count_nonzero(acted_mask[ids]) != len(ids):
                keep = acted_mask[ids]
                ids, view, features = ids[keep], view[keep], features[keep]
            reported[ids] = True
            view_window, feature_window = self._windows[g]
            obs[(ids, *view_window)] = view
            if feature_window is not None:
                if env.minimap_mode and not env.extra_features:
                    features = features[:, -2:]
                obs[(ids, *feature_window)] = features[:, None, None, :]
        stale = self._obs_dirty & ~reported
        if np.count_nonzero(stale):
            obs[stale] = 0
        self._obs_dirty[...] = reported

        reward, terminated, truncated = row.reward, row.terminated, row.truncated
        if self._fresh_episode:
            self._fresh_episode = False
            terminated.fill(False)
            truncated.fill(False)
        if self._all_alive:
            reward[...] = rewards
            terminated[...] = dones
            truncated.fill(truncated_now)
        else:
            reward.fill(0.0)
            reward[acted_array] = rewards[acted_array]
            terminated[acted_array] = dones[acted_array]
            truncated[acted_array] = truncated_now
        engine.clear_dead()
        # env.agents as the env's step leaves it: those that acted and are neither
        # terminated nor truncated.
        if truncated_now:
            live: list[str] = []
        elif np.count_nonzero(dones[acted_array]):
            ids = self.agent_ids
            live = [ids[i] for i in acted_array[~dones[acted_array]].tolist()]
        else:
            live = acted
        if live is not acted:
            env.agents = live
            self._set_live(live)
            if not live:  # as the generic path: an agent the env never flagged was cut off (none here)
                np.logical_or(truncated, ~(terminated | truncated), out=truncated)
        if env.render_mode == "human":
            env.render()
        state_ok = self._write_state() if self._call_state else True
        return {} if state_ok else {"state_unavailable": True}

    def _write_state(self) -> bool:
        """The env's ``state()``, built in the state row; where a group is empty (its
        ``state()`` raises), the generic path calls it and handles the error."""
        if not self._engine_path:
            return super()._write_state()
        env, engine = self.env, self._engine
        positions = [engine.get_pos(handle) for handle in self._all_handles]
        if any(len(pos) == 0 for pos in positions):
            return super()._write_state()
        state = self.row.state
        state[...] = env.base_state
        n_teams = len(env.team_sizes)
        for handle, pos in zip(self._all_handles, positions):
            view, features = engine.get_observation(handle)
            pos_x, pos_y = pos[:, 0], pos[:, 1]
            channel = handle.value * 2
            state[pos_x, pos_y, 1 + channel] = 1
            state[pos_x, pos_y, 2 + channel] = view[:, view.shape[1] // 2, view.shape[2] // 2, 2]
            if env.extra_features:
                # As the env's state(): last actions (zero-padded) and last reward.
                minimap = env._minimap_features
                pad = np.zeros((features.shape[0],
                                state.shape[2] - (1 + n_teams * 2 + features.shape[1] - minimap)))
                last_reward = features[:, -1 - minimap].reshape(-1, 1)
                last_action = np.concatenate((features[:, : -1 - minimap], pad), axis=1)
                state[pos_x, pos_y, 1 + n_teams * 2:] = np.hstack((last_action, last_reward))
        return True

"""The single-agent Atari adapter: one gymnasium ALE chain as one agent.

One idea: `AtariAdapter` steps a chain from
`atari_gym_env`, stacks frames in place,
clips rewards while keeping the raw score, and snapshots/restores the emulator
and the wrappers' state for ``autoreset="fast"``.

May import: numpy, gymnasium (lazily), ``marl_vec.core.buffers``, ``marl_vec.core.spec``,
``marl_vec.core.adapter``, ``marl_vec.envs.atari.chain`` and ``.snapshot``.

Examples:
    >>> from marl_vec.envs.atari.chain import atari_gym_env
    >>> env, opts = atari_gym_env("ALE/Pong-v5", preprocess=True, stack_frames=False)
    >>> AtariAdapter(env, opts, frame_stack=opts.frame_stack).spec.obs_shape
    (4, 84, 84)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.chain import Preprocessing, chain_step_limit
from marl_vec.envs.atari.snapshot import stateless_wrappers, wrapper_savers
from marl_vec.core.adapter import NativeEnvAdapter, one_agent_spec
from marl_vec.core.spec import DiscreteAction


class AtariAdapter(NativeEnvAdapter):
    """One ALE game (a gymnasium env chain from `atari_gym_env`) as one agent.

    The state is the observation. ``clip_rewards`` writes the sign of the reward;
    ``infos[i]["episode"]["score"]`` is the raw game score either way.
    ``frame_stack`` > 1 stacks the chain's last frames (padded with the reset
    frame, as gymnasium's ``FrameStackObservation``).
    """

    def __init__(
        self, env: Any, preprocessing: Preprocessing | None = None, agent_id: str = "agent_0", frame_stack: int = 1
    ):
        import gymnasium

        self.env = env
        self.preprocessing = preprocessing
        self._clip = bool(preprocessing and preprocessing.clip_rewards)
        space = env.observation_space
        if not isinstance(space, gymnasium.spaces.Box):
            raise TypeError(f"Atari observation space {space} is not supported; allowed: Box (rgb, grayscale, ram)")
        self._ale = env.unwrapped.ale
        # Snapshot support: every wrapper of the chain must be known.
        savers, stateless = wrapper_savers(), stateless_wrappers()
        self._savers: list[tuple[Any, Any, Any]] = []
        snapshots, layer = True, env
        while isinstance(layer, gymnasium.Wrapper):
            if type(layer) in savers:
                self._savers.append((layer, *savers[type(layer)]))
            elif not isinstance(layer, stateless):
                snapshots = False
            layer = layer.env
        obs_shape = tuple(space.shape) if frame_stack == 1 else (frame_stack, *space.shape)
        # The stack lives here, not in the buffer row: a caller writing into a
        # copy=False result cannot corrupt the next observation.
        self._stack = np.zeros(obs_shape, dtype=space.dtype) if frame_stack > 1 else None
        self.spec = one_agent_spec(
            agent_id, obs_shape, space.dtype, DiscreteAction(int(env.action_space.n)),
            episode_limit=chain_step_limit(env, preprocessing),
            stats=("score",),
            snapshots=snapshots,
            reward_dtype=np.dtype(np.float64),  # a gymnasium env: its rewards as gymnasium's vector envs give them
        )
        self._score = 0.0

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        self._obs = row.obs[0]
        self._reward = row.reward
        self._terminated = row.terminated
        self._truncated = row.truncated
        row.agent_mask[:] = True
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        row.avail_actions[:] = True

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, info = self.env.reset(seed=seed)
        stack = self._stack
        if stack is not None:
            stack[...] = obs  # every slot holds the reset frame
            obs = stack
        self._obs[...] = obs
        self._score = 0.0
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        obs, reward, terminated, truncated, info = self.env.step(int(actions[0]))
        stack = self._stack
        if stack is not None:
            stack[:-1] = stack[1:]  # numpy buffers the overlapping shift
            stack[-1] = obs
            obs = stack
        self._obs[...] = obs
        self._score += reward
        # np.sign of a Python float, without allocating an array.
        self._reward[0] = (reward > 0) - (reward < 0) if self._clip else reward
        self._terminated[0] = terminated
        self._truncated[0] = truncated
        return info

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {"score": float(self._score)}

    def snapshot(self) -> Any:
        if not self.spec.snapshots:
            raise NotImplementedError(f"this Atari env chain has wrappers marl_vec cannot snapshot: {self.env}")
        # Without the RNG: sticky actions keep drawing from the env's own stream.
        return (
            self._ale.cloneState(),
            [save(w) for w, save, _ in self._savers],
            self._obs.copy(),
        )

    def restore(self, snapshot: Any) -> dict[str, Any]:
        ale_state, wrapper_states, obs = snapshot
        self._ale.restoreState(ale_state)
        for (w, _, load), state in zip(self._savers, wrapper_states):
            load(w, state)
        if self._stack is not None:
            self._stack[...] = obs
        self._obs[...] = obs
        self._score = 0.0
        return {}

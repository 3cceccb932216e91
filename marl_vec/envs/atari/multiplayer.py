"""PettingZoo's multi-player Atari as one agent per player.

One idea: `MultiAgentAtariAdapter` steps a ``ParallelAtariEnv`` with
frame skip and noop starts done here, the shared screen through
`FramePipeline`, players leaving the game
as dead agents, and snapshot/restore for ``autoreset="fast"``; and
`parallel_atari_env` builds the PettingZoo game with ale-py's ROMs.

May import: numpy, pettingzoo and multi-agent-ale-py (lazily, via ``require``),
``marl_vec.core.buffers``, ``marl_vec.core.spec``, ``marl_vec.core.adapter``,
``marl_vec.envs.registry``, ``marl_vec.envs.atari.chain`` and ``.frames``.

Examples:
    >>> env = parallel_atari_env("pettingzoo.atari.pong_v3", {"obs_type": "grayscale_image"})
    >>> MultiAgentAtariAdapter(env).spec.agents
    ('first_0', 'second_0')
"""

from __future__ import annotations

import pkgutil
import re
from typing import Any, cast

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.chain import Preprocessing, ale_rom_dir, steps_within
from marl_vec.envs.atari.frames import FramePipeline
from marl_vec.core.adapter import NativeEnvAdapter
from marl_vec.envs.extras import UnknownEnvError, require
from marl_vec.core.spec import DiscreteAction, EnvSpec


class MultiAgentAtariAdapter(NativeEnvAdapter):
    """A PettingZoo multi-player Atari game, one agent per player.

    Args:
        env: the ``ParallelAtariEnv`` of ``pettingzoo.atari`` (not its AEC wrapper).
        preprocessing: options as for single-agent games (``terminal_on_life_loss``
            is not supported: players' lives are per player).

    A player whose lives run out leaves the game: mask False, zero observation and
    reward, only action 0 available. Truncation comes from PettingZoo's ``max_cycles``,
    counted in emulator frames (``frame_skip`` per step) after the noop start, so
    ``spec.episode_limit`` is ``ceil(max_cycles / frame_skip)`` agent steps.
    """

    def __init__(self, env: Any, preprocessing: Preprocessing | None = None):
        self.env = env
        self.preprocessing = preprocessing
        if preprocessing is not None and preprocessing.terminal_on_life_loss:
            raise ValueError("terminal_on_life_loss is not supported for multi-player Atari; allowed: False")
        self._clip = bool(preprocessing and preprocessing.clip_rewards)
        self.agent_ids = tuple(env.possible_agents)
        n_actions = {int(env.action_space(a).n) for a in self.agent_ids}
        if len(n_actions) != 1:
            raise TypeError(f"players of {env.metadata.get('name')} have different action sets {n_actions}")
        self._ale = env.ale
        width, height = self._ale.getScreenDims()
        self._screen_hw = (int(height), int(width))
        if preprocessing is None:
            obs_shape = tuple(env.observation_space(self.agent_ids[0]).shape)
            if env.obs_type == "grayscale_image":
                obs_shape = obs_shape[:2]  # drop the channel axis of 1, as gymnasium's grayscale
            self._pipeline: FramePipeline | None = None
        else:
            obs_shape = preprocessing.obs_shape()
            self._pipeline = FramePipeline(preprocessing, self._screen_hw)
        self.spec = EnvSpec(
            agents=self.agent_ids,
            obs_shape=obs_shape,
            obs_dtype=np.dtype(np.uint8),
            state_shape=obs_shape,
            state_dtype=np.dtype(np.uint8),
            action=DiscreteAction(n_actions.pop()),
            # max_cycles counts emulator frames, frame_skip of them per agent step.
            episode_limit=steps_within(env.max_cycles, preprocessing.frame_skip if preprocessing else 1),
            stats=("score",),
            snapshots=True,
        )
        self._frame_skip = preprocessing.frame_skip if preprocessing else 1
        self._noop_max = preprocessing.noop_max if preprocessing else 0
        A = len(self.agent_ids)
        self._score = np.zeros(A, dtype=np.float64)
        self._native_actions = dict.fromkeys(self.agent_ids, 0)
        self._rng: np.random.Generator | None = None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        self._index = {a: i for i, a in enumerate(self.agent_ids)}
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        self._avail: np.ndarray = row.avail_actions

    def _grab(self, slot: int) -> None:
        pool = self._pipeline.pool[slot]  # type: ignore[union-attr]
        if self.preprocessing.grayscale:  # type: ignore[union-attr]
            self._ale.getScreenGrayscale(pool)
        else:
            self._ale.getScreenRGB(pool)

    def _write(self, screen: np.ndarray | None) -> None:
        row, live = self.row, self.env.agents
        # Without a pipeline, the caller always passes the screen.
        image = (self._pipeline.view() if self._pipeline is not None
                 else cast(np.ndarray, screen).reshape(self.spec.obs_shape))
        row.state[...] = image
        for i, agent in enumerate(self.agent_ids):
            alive = agent in live
            row.agent_mask[i] = alive
            if alive:
                row.obs[i] = image
                self._avail[i] = True
            else:
                row.obs[i] = 0
                self._avail[i] = False
                self._avail[i, 0] = True

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, _ = self.env.reset(seed=seed)
        screen = obs[self.agent_ids[0]]
        if seed is not None or self._rng is None:
            # Our own stream: PettingZoo's Atari reset(seed=None) reseeds its np_random
            # from the OS, which would make noop starts differ between identical runs.
            self._rng = np.random.default_rng(seed)
        if self._noop_max:
            noop = dict.fromkeys(self.agent_ids, 0)
            for _ in range(int(self._rng.integers(1, self._noop_max + 1))):
                obs = self.env.step(noop)[0]
                if not self.env.agents:
                    obs, _ = self.env.reset()
            screen = obs.get(self.agent_ids[0], screen)
            # Noops do not count towards max_cycles, as gymnasium's TimeLimit does not count them.
            self.env.frame = 0
        if self._pipeline is not None:
            self._grab(0)
            self._pipeline.push_reset()
        self._score.fill(0.0)
        self._write(screen)
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        row, index, env = self.row, self._index, self.env
        native = self._native_actions
        native.clear()
        for agent in env.agents:
            native[agent] = int(actions[index[agent]])
        acting = list(native)
        row.reward.fill(0.0)
        skip = self._frame_skip
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        obs: dict[str, np.ndarray] = {}
        ended = False
        for t in range(skip):
            obs, rewards, terms, truncs, _ = env.step(native)
            for agent, r in rewards.items():
                row.reward[index[agent]] += r
            if not env.agents or any(terms.values()) or any(truncs.values()):
                ended = True
                break
            if self._pipeline is not None and t >= skip - 2:
                self._grab(0 if t == skip - 1 else 1)
        screen = None
        if self._pipeline is not None:
            if ended:
                # The episode ended mid-skip: the current screen, not pooled with a stale one.
                self._grab(0)
                self._pipeline.pool[1][...] = self._pipeline.pool[0]
            self._pipeline.push()
        else:
            screen = next(iter(obs.values()))
        self._score += row.reward
        if self._clip:
            np.sign(row.reward, out=row.reward)
        for agent in acting:
            i = index[agent]
            row.terminated[i] = bool(terms.get(agent, False))
            row.truncated[i] = bool(truncs.get(agent, False))
        if not env.agents:
            # The game ended: a player it never flagged was cut off with it.
            np.logical_or(row.truncated, ~(row.terminated | row.truncated), out=row.truncated)
        self._write(screen)
        return {}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        stats = {"score": float(self._score.mean())}
        stats.update({f"score_{a}": float(s) for a, s in zip(self.agent_ids, self._score)})
        return stats

    def snapshot(self) -> Any:
        env = self.env
        pipe = self._pipeline
        return (
            self._ale.cloneState(),
            env.frame,
            list(env.agents),
            dict(env.terminations),
            None if pipe is None else ([p.copy() for p in pipe.pool], pipe.stack.copy()),
            self.row.obs.copy(),
            self.row.state.copy(),
            self.row.agent_mask.copy(),
            self._avail.copy(),
        )

    def restore(self, snapshot: Any) -> dict[str, Any]:
        ale_state, frame, agents, terminations, pipe_state, obs, state, mask, avail = snapshot
        env = self.env
        self._ale.restoreState(ale_state)
        env.frame, env.agents, env.terminations = frame, list(agents), dict(terminations)
        if pipe_state is not None:
            pipe = self._pipeline
            for p, saved in zip(pipe.pool, pipe_state[0]):  # type: ignore[union-attr]
                p[...] = saved
            pipe.stack[...] = pipe_state[1]  # type: ignore[union-attr]
        row = self.row
        row.obs[...] = obs
        row.state[...] = state
        row.agent_mask[...] = mask
        self._avail[...] = avail
        self._score.fill(0.0)
        return {}


def parallel_atari_env(module_name: str, kwargs: dict[str, Any]) -> Any:
    require("multi_agent_ale_py", "atari", "multi-player Atari (multi-agent-ale-py)")
    games_pkg = require("pettingzoo.atari", "atari", "multi-player Atari")
    # A misspelt game is a bad id, not a missing extra: name the games there are.
    games = sorted(m.name for m in pkgutil.iter_modules(games_pkg.__path__) if re.search(r"_v\d+$", m.name))
    game = module_name[len("pettingzoo.atari."):]
    if game not in games:
        raise UnknownEnvError(f"unknown PettingZoo Atari game {game!r}; allowed: {', '.join(games)}")
    module = require(module_name, "atari", f"the PettingZoo Atari game {module_name!r}")
    if not hasattr(module, "raw_env"):
        raise ValueError(f"{module_name!r} is not a PettingZoo Atari game module; e.g. pettingzoo.atari.pong_v3")
    kwargs.setdefault("auto_rom_install_path", ale_rom_dir())
    aec = module.raw_env(**kwargs)
    # raw_env is parallel_to_aec(ParallelAtariEnv): step the parallel env itself.
    return getattr(aec, "env", aec)

"""Which Atari engine runs what, and an engine's configuration (`EngineConfig`).

``engine: auto`` picks ``ale_vector`` where it takes the options
(`fastest_engine`), else ``python``; `engine_unsupported_reason` says
why an engine cannot run a set of options. `EngineConfig` is what a native
engine (ale-py's ``AtariVectorEnv`` or EnvPool) is built from; equal configs can
share one engine.

May import: numpy, ale-py, envpool and gymnasium (lazily, via ``require``),
``marl_vec.envs.extras``, ``marl_vec.envs.atari.chain``.

Examples:
    >>> envpool_task("space_invaders")
    'SpaceInvaders-v5'
    >>> engine_unsupported_reason("ALE/Pong-v5", False, {})
    'it always preprocesses; raw frames need preprocess=True off the engine'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from marl_vec.envs.atari.chain import Preprocessing, gymnasium_with_ale, steps_within
from marl_vec.envs.extras import require

ENGINES = ("python", "ale_vector", "envpool", "auto")

# gymnasium.make options the engine takes (besides the preprocessing options).
_ENGINE_KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode", "max_episode_steps")

SUPPORTED_AUTORESET = ("same_step", "disabled")


def engine_unsupported_reason(env_id: str, preprocess: bool, kwargs: dict[str, Any]) -> str | None:
    """Why the ``ale_vector`` engine cannot run these options (None: it can)."""
    if env_id.startswith("pettingzoo."):
        return "multi-player Atari runs on the PettingZoo path only"
    if not preprocess:
        return "it always preprocesses; raw frames need preprocess=True off the engine"
    if kwargs.get("terminal_on_life_loss"):
        return "terminal_on_life_loss resets the game at a life loss on the python path; the engine's episodic life does not"
    others = sorted(set(kwargs) - set(_ENGINE_KWARGS) - set(Preprocessing.__dataclass_fields__) - {"engine_threads"})
    if others:
        return f"it does not take the options {others}; it takes {sorted(_ENGINE_KWARGS)} and the preprocessing options"
    import importlib.util

    if importlib.util.find_spec("ale_py") is None or importlib.util.find_spec("ale_py.vector_env") is None:
        return "it needs ale-py >= 0.12 (ale_py.vector_env): pip install -U 'ale-py>=0.12'"
    if _game_of(env_id) is None:
        return f"{env_id!r} is not an ALE game id of gymnasium's registry"
    return None


def fastest_engine(env_id: str, preprocess: bool, kwargs: dict[str, Any]) -> str:
    """``engine: auto``'s choice (the default): ``ale_vector`` where it takes the options, else ``python``.

    ``envpool`` is never chosen: through a VecEnv, ale-py's engine steps faster
    (it autoresets within its threaded step, where EnvPool needs a partial reset
    after it; see docs/families/atari.md, "Engines"), it ships with ale-py, our Atari dependency, so
    the choice does not depend on what else is installed, and it reseeds single envs.

    The autoreset mode is the group's, unknown here: an engine adapter made by ``auto``
    falls back to the python path in a group whose mode the engine cannot serve."""
    if engine_unsupported_reason(env_id, preprocess, kwargs) is not None:
        return "python"
    return "ale_vector"


@functools.lru_cache(maxsize=None)
def _game_of(env_id: str) -> tuple[str, dict[str, Any]] | None:
    """ALE's ROM name of a gymnasium ALE id, and the id's registered kwargs (sticky actions, frame limit)."""
    gymnasium = gymnasium_with_ale()
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error:
        return None
    game = spec.kwargs.get("game")
    if not game or spec.kwargs.get("obs_type", "rgb") == "ram":
        return None
    return str(game), dict(spec.kwargs)


@functools.lru_cache(maxsize=None)
def _n_actions(game: str, full_action_space: bool) -> int:
    """The game's action count, from a throwaway ALE (the engine itself is built per group)."""
    ale_py = require("ale_py", "atari", "Atari games")
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return len(ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet())


@dataclass(frozen=True)
class EngineConfig:
    """What an `AtariVectorEnv` is built from; equal configs can share one engine."""

    game: str
    opts: Preprocessing
    repeat_action_probability: float
    full_action_space: bool
    max_num_frames_per_episode: int
    max_episode_steps: int | None
    threads: int
    kind: str = "ale_vector"  # or "envpool"

    def build(self, num_envs: int, seeds: list[int] | None = None) -> Any:
        if self.kind == "envpool":
            return self._build_envpool(num_envs, seeds or list(range(num_envs)))
        ale_py = require("ale_py", "atari", "Atari games")
        from ale_py.vector_env import AtariVectorEnv

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        opts = self.opts
        return AtariVectorEnv(
            self.game,
            num_envs,
            num_threads=self.threads,
            max_num_frames_per_episode=self.max_num_frames_per_episode,
            repeat_action_probability=self.repeat_action_probability,
            full_action_space=self.full_action_space,
            autoreset_mode="SameStep",
            img_height=opts.screen_size,
            img_width=opts.screen_size,
            grayscale=opts.grayscale,
            stack_num=opts.frame_stack,  # its zero padding of a reset stack is replaced (ale_vector_engine)
            frameskip=opts.frame_skip,
            maxpool=opts.frame_skip > 1,  # as AtariPreprocessing: no pooling without a skip
            noop_max=opts.noop_max,
            episodic_life=False,
            reward_clipping=False,  # clipped here, so that the raw score is kept
            use_fire_reset=False,  # as AtariPreprocessing
        )

    def step_limit(self) -> int | None:
        """The limit in agent steps (``spec.episode_limit``)."""
        limit = steps_within(self.max_num_frames_per_episode, self.opts.frame_skip) \
            if self.max_num_frames_per_episode > 0 else None
        if self.max_episode_steps is not None:
            limit = self.max_episode_steps if limit is None else min(limit, self.max_episode_steps)
        return limit

    def _build_envpool(self, num_envs: int, seeds: list[int]) -> Any:
        envpool = require("envpool", "envpool", "the envpool Atari engine")
        opts = self.opts
        limit = self.step_limit()
        return envpool.make(
            envpool_task(self.game),
            env_type="gymnasium",
            num_envs=num_envs,
            batch_size=num_envs,
            num_threads=self.threads,
            env_seed=seeds,
            # EnvPool counts agent steps, noops not included: the frame limit becomes a step limit.
            max_episode_steps=limit if limit is not None else 2**31 - 1,
            repeat_action_probability=self.repeat_action_probability,
            full_action_space=self.full_action_space,
            img_height=opts.screen_size,
            img_width=opts.screen_size,
            gray_scale=opts.grayscale,
            stack_num=opts.frame_stack,  # padded with the reset frame, as on the python path
            frame_skip=opts.frame_skip,
            noop_max=opts.noop_max,  # drawn in [1, noop_max] as AtariPreprocessing; 0 is refused (it crashes)
            episodic_life=False,
            reward_clip=False,
            use_fire_reset=False,
            use_inter_area_resize=True,
        )


def envpool_task(game: str) -> str:
    """EnvPool's id of an ALE ROM name: ``space_invaders`` -> ``SpaceInvaders-v5``."""
    return "".join(part.capitalize() for part in game.split("_")) + "-v5"

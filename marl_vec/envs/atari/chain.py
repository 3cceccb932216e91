"""The gymnasium env chain of an ALE game, and the preprocessing options.

One idea: turning ``make_atari``'s keyword arguments into validated
`Preprocessing` options and into the gymnasium chain
(``gymnasium.make`` -> ``AtariPreprocessing`` -> ``FrameStackObservation`` ->
``TimeLimit``) that a Python-path adapter steps. Also where the ROMs live.

May import: numpy, gymnasium and ale-py (lazily, via ``require``),
``marl_vec.envs.registry``. Nothing else of marl_vec: the adapters import this.

Examples:
    >>> env, opts = atari_gym_env("ALE/Pong-v5", preprocess=True)
    >>> opts.obs_shape()
    (4, 84, 84)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl_vec.envs.extras import require

# The standard DQN preprocessing (Mnih et al. 2015; Machado et al. 2018 for sticky actions).
PREPROCESS_DEFAULTS: dict[str, Any] = {
    "noop_max": 30,
    "frame_skip": 4,
    "screen_size": 84,
    "grayscale": True,
    "frame_stack": 4,
    "terminal_on_life_loss": False,
    "clip_rewards": True,
}


@dataclass(frozen=True)
class Preprocessing:
    """Validated preprocessing options; see `PREPROCESS_DEFAULTS`."""

    noop_max: int
    frame_skip: int
    screen_size: int
    grayscale: bool
    frame_stack: int
    terminal_on_life_loss: bool
    clip_rewards: bool

    @classmethod
    def from_kwargs(cls, preprocess: bool, kwargs: dict[str, Any]) -> "Preprocessing | None":
        """Pop the preprocessing options out of ``kwargs``; None when ``preprocess`` is False."""
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in PREPROCESS_DEFAULTS}
        if not preprocess:
            if given:
                raise ValueError(
                    f"atari options {sorted(given)} need preprocess=True; raw frames take none of "
                    f"{', '.join(PREPROCESS_DEFAULTS)}"
                )
            return None
        opts = cls(**{**PREPROCESS_DEFAULTS, **given})
        for name in ("frame_skip", "screen_size", "frame_stack"):
            value = getattr(opts, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"atari option {name} must be an integer >= 1, got {value!r}")
        if not isinstance(opts.noop_max, (int, np.integer)) or isinstance(opts.noop_max, bool) or opts.noop_max < 0:
            raise ValueError(f"atari option noop_max must be an integer >= 0, got {opts.noop_max!r}")
        return opts

    def frame_shape(self) -> tuple[int, ...]:
        size = (self.screen_size, self.screen_size)
        return size if self.grayscale else (*size, 3)

    def obs_shape(self) -> tuple[int, ...]:
        frame = self.frame_shape()
        return frame if self.frame_stack == 1 else (self.frame_stack, *frame)


def ale_rom_dir() -> str:
    """Where ale-py keeps its ROMs (multi-agent-ale-py ships none)."""
    ale_py = require("ale_py", "atari", "Atari games")
    assert ale_py.__file__ is not None  # a regular package, not a namespace one
    return os.path.join(os.path.dirname(ale_py.__file__), "roms")


def steps_within(max_frames: int, frames_per_step: int) -> int:
    """The most agent steps an emulator frame budget allows: ``ceil(max_frames / frames_per_step)``.

    ALE truncates an episode once its frame count reaches the budget (noop starts
    count as frames, so an episode may end sooner, never later); PettingZoo's
    ``max_cycles`` works the same way.

    ```pycon
    >>> steps_within(108000, 4), steps_within(10, 4)
    (27000, 3)
    ```
    """
    return -(-int(max_frames) // int(frames_per_step))


def chain_step_limit(env: Any, opts: Preprocessing | None) -> int | None:
    """The step limit a gymnasium ALE chain enforces, in agent steps; None when it has none.

    The smaller of the outermost ``TimeLimit`` (it counts this chain's steps) and
    the emulator's ``max_num_frames_per_episode`` (108000 frames in v5) divided
    by the fewest frames an agent step can take (the env's frameskip, its lower
    bound when stochastic, times the preprocessing's ``frame_skip``).
    """
    import gymnasium

    limit = None
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        if isinstance(layer, gymnasium.wrappers.TimeLimit):
            limit = int(layer._max_episode_steps)
            break
        layer = layer.env
    max_frames = int(env.unwrapped.ale.getInt("max_num_frames_per_episode"))
    if max_frames > 0:
        skip = env.unwrapped._frameskip
        fewest = int(skip if isinstance(skip, (int, np.integer)) else min(skip))
        frame_limit = steps_within(max_frames, fewest * (opts.frame_skip if opts else 1))
        limit = frame_limit if limit is None else min(limit, frame_limit)
    return limit


def gymnasium_with_ale() -> Any:
    import gymnasium

    ale_py = require("ale_py", "atari", "Atari games")
    gymnasium.register_envs(ale_py)
    return gymnasium


# -- single-agent: a gymnasium chain ---------------------------------------------


def atari_gym_env(
    env_id: str, preprocess: bool = False, stack_frames: bool = True, **kwargs: Any
) -> tuple[Any, Preprocessing | None]:
    """The gymnasium env chain of an ALE game, and its preprocessing options.

    With ``stack_frames`` False the chain leaves out ``FrameStackObservation``:
    `AtariAdapter` stacks frames itself, in place, without the wrapper's
    per-step concatenate and deepcopy.

    ``kwargs`` besides the preprocessing options go to ``gymnasium.make``
    (``repeat_action_probability`` for sticky actions, ``full_action_space``,
    ``render_mode``, ...). ``max_episode_steps`` counts agent steps: with
    preprocessing it wraps the whole chain, so frame skip and noops do not count.
    Reward clipping is done by the adapter, so that it can still report the raw
    game score.
    """
    gymnasium = gymnasium_with_ale()
    kwargs = dict(kwargs)
    opts = Preprocessing.from_kwargs(preprocess, kwargs)
    if opts is None:
        return gymnasium.make(env_id, **kwargs), None
    if opts.terminal_on_life_loss or opts.frame_skip > 1 or opts.screen_size != 210:
        require("cv2", "atari", "Atari preprocessing (opencv-python-headless)")
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    # AtariPreprocessing skips frames itself and reads the screen straight from ALE,
    # so the emulator env must not skip, and need not render RGB frames it throws away.
    # A time limit counts agent steps, outside the frame skip and noops (gymnasium.make
    # would count emulator frames, noops included).
    limit = kwargs.pop("max_episode_steps", None)
    for key in ("frameskip", "obs_type"):
        if key in kwargs:
            raise ValueError(f"atari option {key!r} is set by preprocess=True; use frame_skip / grayscale instead")
    env = gymnasium.make(env_id, frameskip=1, obs_type="grayscale" if opts.grayscale else "rgb", **kwargs)
    env = AtariPreprocessing(
        env,
        noop_max=opts.noop_max,
        frame_skip=opts.frame_skip,
        screen_size=opts.screen_size,
        terminal_on_life_loss=opts.terminal_on_life_loss,
        grayscale_obs=opts.grayscale,
    )
    if opts.frame_stack > 1 and stack_frames:
        env = FrameStackObservation(env, opts.frame_stack)
    if limit is not None:
        env = gymnasium.wrappers.TimeLimit(env, int(limit))
    return env, opts

"""The ``atari`` family: ALE games as one-agent envs, and PettingZoo's multi-player Atari.

``make_atari("ALE/Pong-v5")`` gives the raw emulator frames ``(210, 160, 3)``
uint8, exactly as ``gymnasium.make`` does. ``preprocess=True`` adds the
standard DQN pipeline, built on gymnasium's ``AtariPreprocessing`` and
``FrameStackObservation``: noop starts, frame skip with max-pooling of the
last two frames, grayscale, resize to 84x84, a stack of 4 frames, optional
loss-of-life terminals and reward clipping (sign). Observations stay uint8
from the emulator to the batch buffer; nothing in the step path converts to float.

``make_atari("pettingzoo.atari.pong_v3")`` gives a multi-player game (package
``multi-agent-ale-py``, whose ROMs come from ale-py) with one agent per player
and the same preprocessing options. Every player sees the same screen, so the
state is that screen once.

Both adapters can snapshot and restore the emulator and the preprocessing
state, for ``autoreset="fast"``: every episode after the first starts from the
exact state of the first reset (no random noops, no reset cost).

Examples:
    >>> env = make_atari("ALE/Pong-v5", preprocess=True)
    >>> env.spec.obs_shape, env.spec.obs_dtype, env.spec.n_actions
    ((4, 84, 84), dtype('uint8'), 6)
    >>> make_atari("pettingzoo.atari.pong_v3", preprocess=True).spec.agents
    ('first_0', 'second_0')

The package, one idea per file: ``chain`` (the gymnasium env chain and the
preprocessing options), ``snapshot`` (save/restore of wrapper state),
``frames`` (the multi-player frame pipeline), ``adapter`` (the single-agent
adapter), ``multiplayer`` (PettingZoo's Atari), ``engine`` (ale-py's C++
``AtariVectorEnv`` stepping a whole group). This module holds only the
family's factory, `make_atari`, and the public names; it may import its
own submodules and ``marl_vec.envs.registry``.
"""

from __future__ import annotations

import functools
from typing import Any

from marl_vec.envs.atari.adapter import AtariAdapter
from marl_vec.envs.atari.engine import (
    ENGINES,
    AleVectorAtariAdapter,
    engine_unsupported_reason,
    fastest_engine,
    make_ale_vector_atari,
)
from marl_vec.envs.atari.chain import PREPROCESS_DEFAULTS, Preprocessing, ale_rom_dir, atari_gym_env
from marl_vec.envs.atari import envpool_engine  # noqa: F401  (registers the envpool engine kind)
from marl_vec.envs.atari.multiplayer import MultiAgentAtariAdapter, parallel_atari_env
from marl_vec.core.adapter import MultiAgentEnv
from marl_vec.envs.extras import require


def make_atari(env_id: str, preprocess: bool = False, engine: str = "auto", **kwargs: Any) -> MultiAgentEnv:
    """The ``atari`` family.

    Args:
        env_id: a gymnasium ALE id (``ALE/Pong-v5``: one agent) or a PettingZoo Atari
            module (``pettingzoo.atari.pong_v3``: one agent per player).
        preprocess: apply the standard preprocessing; its options (``noop_max``,
            ``frame_skip``, ``screen_size``, ``grayscale``, ``frame_stack``,
            ``terminal_on_life_loss``, ``clip_rewards``) default to `PREPROCESS_DEFAULTS`.
        engine: ``auto`` (the default: the fastest that takes the options, ``ale_vector``,
            else python; in a group whose autoreset mode the engine cannot serve,
            ``next_step``, ``one_episode``, ``fast``, the envs run on the python path),
            ``python`` (gymnasium's chain, stepped env by env: frames and random streams
            bit-equal to gymnasium's ``AtariPreprocessing``), ``ale_vector`` (ale-py's C++
            ``AtariVectorEnv``: a group stepped in one native call, see
            `marl_vec.envs.atari.engine`; ``engine_threads`` sets its threads), or
            ``envpool`` (EnvPool's Atari, the same way; ``pip install 'marl_vec[envpool]'``).
        kwargs: the rest goes to ``gymnasium.make`` or the PettingZoo game
            (``repeat_action_probability``, ``full_action_space``, ``num_players``, ``max_cycles``, ...).
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown atari engine {engine!r}; allowed: {', '.join(ENGINES)}")
    fallback = None
    if engine == "auto":
        engine = fastest_engine(env_id, preprocess, kwargs)
        if engine != "python":  # the python path serves the autoreset modes the engine cannot
            python_kwargs = {k: v for k, v in kwargs.items() if k != "engine_threads"}
            fallback = functools.partial(make_atari, env_id, preprocess, "python", **python_kwargs)
    if engine in ("ale_vector", "envpool"):
        reason = engine_unsupported_reason(env_id, preprocess, kwargs)
        if reason is not None:
            raise ValueError(f"atari engine {engine!r} cannot run {env_id!r}: {reason}; use engine: python")
        return make_ale_vector_atari(env_id, engine=engine, fallback=fallback, **kwargs)
    if "engine_threads" in kwargs:
        raise ValueError("atari option 'engine_threads' needs engine: ale_vector, envpool or auto; the python engine has no threads")
    if env_id.startswith("pettingzoo.atari."):
        kwargs = dict(kwargs)
        opts = Preprocessing.from_kwargs(preprocess, kwargs)
        if opts is not None:
            require("cv2", "atari", "Atari preprocessing (opencv-python-headless)")
            if "obs_type" in kwargs:
                raise ValueError("atari option 'obs_type' is set by preprocess=True; use grayscale instead")
            kwargs["obs_type"] = "grayscale_image" if opts.grayscale else "rgb_image"
        return MultiAgentAtariAdapter(parallel_atari_env(env_id, kwargs), opts)
    if env_id.startswith("pettingzoo."):
        raise ValueError(f"{env_id!r} is not an Atari game; use the 'pettingzoo' family for other PettingZoo envs")
    env, opts = atari_gym_env(env_id, preprocess, stack_frames=False, **kwargs)
    return AtariAdapter(env, opts, frame_stack=opts.frame_stack if opts else 1)


__all__ = [
    "PREPROCESS_DEFAULTS",
    "Preprocessing",
    "AtariAdapter",
    "MultiAgentAtariAdapter",
    "AleVectorAtariAdapter",
    "atari_gym_env",
    "make_atari",
    "ale_rom_dir",
]

"""ale-py's C++ ``AtariVectorEnv`` as an engine: :class:`AleEngine` and its group stepper.

:class:`AleEngine` holds one ``AtariVectorEnv`` over a group's slots and the
per-slot state of our contract (scores, step counts, the frame stacks, kept
here because ale-py pads a reset stack with zeros); :class:`AleVectorStepper`
steps it whole (see :mod:`marl_vec.envs.atari.engine` for how our contract maps
onto it).

May import: numpy, ale-py (via the config's ``build``),
``marl_vec.envs.atari.engine_config``, ``marl_vec.envs.atari.engine_stepper``.

Example:
    >>> engine = AleEngine(config, k=8)  # doctest: +SKIP
    >>> engine.ring.shape  # k slots, frame_stack frames of 84 x 84  # doctest: +SKIP
    (8, 4, 84, 84)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.atari.engine_config import EngineConfig
from marl_vec.envs.atari.engine_stepper import ENGINE_KINDS, EngineStepper
from marl_vec.envs.base import MultiAgentEnv


class AleEngine:
    """One AtariVectorEnv over ``k`` slots, with the per-slot state of our contract."""

    envpool = False

    def __init__(self, config: EngineConfig, k: int):
        self.config = config
        self.env = config.build(k)
        self.ale = self.env.ale
        self.k = k
        self.score = np.zeros(k, dtype=np.float64)
        self.elapsed = np.zeros(k, dtype=np.int64)
        opts = config.opts
        frame = opts.frame_shape()
        # The frame stacks live here, not in the buffer rows: a caller writing into a
        # copy=False result cannot corrupt the next observation. (ale-py pads a reset
        # stack with zeros, the python path with the reset frame: the engine gives single frames.)
        # A ring: each step writes one frame per slot at ``newest`` instead of shifting the
        # whole stack (a shift of overlapping memory costs numpy a temporary copy).
        self.ring = np.zeros((k, opts.frame_stack, *frame), dtype=np.uint8)
        self.newest = opts.frame_stack - 1  # the ring position of every slot's newest frame
        self.reset_frame = np.zeros((k, *frame), dtype=np.uint8)  # an ended slot's reset frame
        self.has_reset_frame = np.zeros(k, dtype=bool)
        self.paddle = np.ones(k, dtype=np.float32)
        self._started = False

    def reset_slot(self, slot: int, seed: int | None, out: np.ndarray) -> None:
        """Write slot's reset observation into ``out``: from the frame the engine's
        autoreset made when the slot just ended and no seed is given, else from a
        native reset. The stack is padded with the reset frame."""
        ring = self.ring[slot]
        if seed is None and self.has_reset_frame[slot]:
            ring[...] = self.reset_frame[slot]
        else:
            ring[...] = self._native_reset(slot, seed)
        out[...] = ring.reshape(out.shape)  # every frame is the reset frame: the ring's order does not matter
        self.has_reset_frame[slot] = False
        self.score[slot] = 0.0
        self.elapsed[slot] = 0

    def _native_reset(self, slot: int, seed: int | None) -> np.ndarray:
        """Reset one slot in the engine; its reset frame."""
        if not self._started:  # the engine's partial resets need one full reset first
            self.ale.reset(np.arange(self.k, dtype=np.int64), np.full(self.k, -1, dtype=np.int64))
            self._started = True
        obs, info = self.ale.reset(np.array([slot], dtype=np.int64),
                                   np.array([-1 if seed is None else int(seed)], dtype=np.int64))
        return obs[int(np.flatnonzero(info["env_id"] == slot)[0]), 0]

    def close(self) -> None:
        self.env.close()


class AleVectorStepper(EngineStepper):
    """Steps a group's :class:`AleEngine` (ale-py's ``AtariVectorEnv``) whole."""

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: AleEngine | None = None):
        super().__init__(adapters, rows, block, engine)
        if self.on_python:
            return
        engine = self.engine
        self._send, self._recv = engine.ale.send, engine.ale.recv
        self._limit = engine.config.max_episode_steps
        self._action_buffer = np.zeros(engine.k, dtype=np.int32)
        self._done = np.zeros(engine.k, dtype=bool)
        self._at_limit = np.zeros(engine.k, dtype=bool)
        self._stack_size = engine.config.opts.frame_stack
        self._obs_stack = self._obs.reshape(engine.ring.shape)  # the rows with the stack axis
        assert np.shares_memory(self._obs_stack, self._obs), "the rows' stack view must not be a copy"

    def step_group(self, infos: list[dict[str, Any]]) -> None:
        engine = self.engine
        actions = self._action_buffer
        np.copyto(actions, self._actions, casting="unsafe")  # validated by the VecEnv: in range
        self._send(actions, engine.paddle)
        obs, reward, terminated, truncated, info = self._recv()
        frames, ring = obs[:, 0], engine.ring
        newest = engine.newest = (engine.newest + 1) % self._stack_size
        ring[:, newest] = frames
        engine.score += reward
        if self._clip:
            np.sign(reward, out=self._reward, casting="unsafe")
        else:
            self._reward[...] = reward
        self._terminated[...] = terminated
        done = self._done
        if self._limit is not None:
            engine.elapsed += 1
            np.greater_equal(engine.elapsed, self._limit, out=self._at_limit)
            np.logical_or(truncated, self._at_limit, out=self._truncated)
        else:
            self._truncated[...] = truncated
        np.logical_or(terminated, truncated, out=done)  # ale_vector reset these slots itself
        engine.has_reset_frame.fill(False)
        if np.count_nonzero(done):
            ended = np.flatnonzero(done)
            engine.reset_frame[ended] = frames[ended]
            engine.has_reset_frame[ended] = True
            ring[ended, newest] = info["final_obs"][ended, 0]  # the step's frame; the reset one waits for reset()
        # Oldest frame first: the ring after the newest, then the ring up to it.
        older = self._stack_size - 1 - newest
        self._obs_stack[:, :older] = ring[:, newest + 1:]
        self._obs_stack[:, older:] = ring[:, :newest + 1]
        infos[:] = map(dict, itertools.repeat((), engine.k))  # k fresh empty dicts, at C speed


ENGINE_KINDS["ale_vector"] = (AleEngine, AleVectorStepper)

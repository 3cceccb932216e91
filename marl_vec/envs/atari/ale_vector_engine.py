"""ale-py's C++ ``AtariVectorEnv`` as an engine: `AleEngine` and its group stepper.

`AleEngine` holds one ``AtariVectorEnv`` over a group's slots and the
per-slot state of our contract (scores, step counts, each episode's reset
frame); `AleVectorStepper` steps it whole (see
`marl_vec.envs.atari.engine` for how our contract maps onto it).

The engine keeps the frame stacks (``stack_num = frame_stack``): its threads
write each step's stacks, oldest frame first, into a fresh array, which
reaches the rows in one contiguous copy. ale-py pads a reset stack with zeros
where our contract (gymnasium's ``FrameStackObservation``, the python path)
pads with the reset frame: for the first ``frame_stack - 2`` steps of an
episode (`AleEngine.young`) the stepper writes the reset frame over the
padding, in the engine's array before the copy. A step where no episode is
young and none ended runs no per-env Python.

May import: numpy, ale-py (via the config's ``build``),
``marl_vec.envs.atari.engine_config``, ``marl_vec.envs.atari.engine_stepper``.

Examples:
    >>> engine = AleEngine(config, k=8)
    >>> engine.reset_frame.shape  # k slots, one 84 x 84 frame each
    (8, 84, 84)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.engine_config import EngineConfig
from marl_vec.envs.atari.engine_stepper import ENGINE_KINDS, EngineStepper
from marl_vec.core.adapter import MultiAgentEnv


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
        self.stack_size = opts.frame_stack
        # Each slot's reset frame of its current episode (the padding of its young stacks);
        # for a slot that just ended, the engine's autoreset frame until reset() takes it.
        self.reset_frame = np.zeros((k, *opts.frame_shape()), dtype=np.uint8)
        self.has_reset_frame = np.zeros(k, dtype=bool)  # the slot just ended: its reset frame waits
        # Slot -> agent steps since its reset, while the engine's stack still holds zero
        # padding (fewer than frame_stack - 1 steps); a stack of one frame is never padded.
        self.young: dict[int, int] = {}
        self.paddle = np.ones(k, dtype=np.float32)
        self._started = False

    def reset_slot(self, slot: int, seed: int | None, out: np.ndarray) -> None:
        """Write slot's reset observation into ``out``: from the frame the engine's
        autoreset made when the slot just ended and no seed is given, else from a
        native reset. The stack is padded with the reset frame."""
        if seed is None and self.has_reset_frame[slot]:
            frame = self.reset_frame[slot]
        else:
            frame = self.reset_frame[slot] = self._native_reset(slot, seed)
        out.reshape(self.stack_size, *frame.shape)[...] = frame  # every frame of the stack is the reset frame
        self.has_reset_frame[slot] = False
        self.score[slot] = 0.0
        self.elapsed[slot] = 0
        if self.stack_size > 2:  # with 2 frames the first step's stack has no padding left
            self.young[slot] = 0
        else:
            self.young.pop(slot, None)

    def _native_reset(self, slot: int, seed: int | None) -> np.ndarray:
        """Reset one slot in the engine; its reset frame."""
        if not self._started:  # the engine's partial resets need one full reset first
            self.ale.reset(np.arange(self.k, dtype=np.int64), np.full(self.k, -1, dtype=np.int64))
            self._started = True
        obs, info = self.ale.reset(np.array([slot], dtype=np.int64),
                                   np.array([-1 if seed is None else int(seed)], dtype=np.int64))
        return obs[int(np.flatnonzero(info["env_id"] == slot)[0]), -1]

    def pad_young(self, obs: np.ndarray) -> dict[int, int]:
        """One step passed: write each young slot's reset frame over the zero padding of
        its stack in ``obs`` (the engine's fresh array); returns slot -> padded frames."""
        padded: dict[int, int] = {}
        young, last = self.young, self.stack_size - 1
        for slot, age in list(young.items()):
            age += 1
            pad = last - age
            if pad > 0:
                obs[slot, :pad] = self.reset_frame[slot]
                young[slot] = age
            else:
                del young[slot]
            padded[slot] = pad
        return padded

    def close(self) -> None:
        self.env.close()


class AleVectorStepper(EngineStepper):
    """Steps a group's `AleEngine` (ale-py's ``AtariVectorEnv``) whole."""

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: AleEngine | None = None):
        super().__init__(adapters, rows, block, engine)
        if self.on_python:
            return
        engine = self.engine
        self._send, self._recv = engine.ale.send, engine.ale.recv
        self._limit = engine.config.max_episode_steps
        self._action_buffer = np.zeros(engine.k, dtype=np.int32)
        self._at_limit = np.zeros(engine.k, dtype=bool)
        self._stack_size = engine.stack_size
        self._obs_block_shape = block.obs.shape
        self._fresh: np.ndarray | None = None  # the last step's engine array, equal to the rows
        self._rows_obs = self._obs.reshape(engine.k, engine.stack_size, *engine.reset_frame.shape[1:])
        assert np.shares_memory(self._rows_obs, self._obs), "the rows' stack view must not be a copy"

    def step_group(self, infos: list[dict[str, Any]]) -> None:
        engine = self.engine
        actions = self._action_buffer
        self._fresh = None
        np.copyto(actions, self._actions, casting="unsafe")  # validated by the VecEnv: in range
        self._send(actions, engine.paddle)
        # While the engine's threads step: what does not need their results (the main
        # thread would wait in recv; work after it delays the next send, and the threads'
        # wake-up with it).
        infos[:] = map(dict, itertools.repeat((), engine.k))  # k fresh empty dicts, at C speed
        engine.has_reset_frame.fill(False)
        if self.while_stepping is not None:
            self.while_stepping()
        obs, reward, terminated, truncated, info = self._recv()
        padded = engine.pad_young(obs) if engine.young else None
        engine.score += reward
        if self._clip:
            np.sign(reward, out=self._reward, casting="unsafe")
        else:
            self._reward[...] = reward
        self._terminated[...] = terminated
        if self._limit is not None:
            engine.elapsed += 1
            np.greater_equal(engine.elapsed, self._limit, out=self._at_limit)
            np.logical_or(truncated, self._at_limit, out=self._truncated)
        else:
            self._truncated[...] = truncated
        if np.count_nonzero(terminated) or np.count_nonzero(truncated):  # ale_vector reset these slots itself
            self._ended(obs, np.flatnonzero(terminated | truncated), info["final_obs"], padded)
        self._rows_obs[...] = obs  # one contiguous copy of the stacks into the rows
        self._fresh = obs  # the engine's own fresh array: a copy=True result may take it (take_obs)

    def take_obs(self) -> np.ndarray | None:
        fresh, self._fresh = self._fresh, None
        return None if fresh is None else fresh.reshape(self._obs_block_shape)

    def _ended(self, obs: np.ndarray, ended: np.ndarray, final: np.ndarray, padded: dict[int, int] | None) -> None:
        """Slots the engine reset within the step: their row gets the episode's last stack
        (the engine's ``final_obs``, padded as a young one if the episode was short); the
        reset frame waits for the group's autoreset (`AleEngine.reset_slot`)."""
        engine = self.engine
        for slot in ended.tolist():
            pad = padded.get(slot, 0) if padded else 0
            if pad > 0:
                final[slot, :pad] = engine.reset_frame[slot]
            engine.reset_frame[slot] = obs[slot, -1]  # the engine's reset frame of the next episode
            obs[slot] = final[slot]
            engine.young.pop(slot, None)
        engine.has_reset_frame[ended] = True


ENGINE_KINDS["ale_vector"] = (AleEngine, AleVectorStepper)

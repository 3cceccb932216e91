"""The frame pipeline of multi-player Atari: max-pool, resize, stack one shared screen.

One idea: gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation`` frame
path, redone in place for a screen that PettingZoo's Atari envs do not
preprocess (cv2 INTER_AREA resize straight into the stack slot; the stack is
padded with the reset frame). Allocates nothing per step.

May import: numpy, cv2 (lazily), ``marl_vec.envs.atari.chain``.

Examples:
    >>> pipe = FramePipeline(opts, (210, 160)); pipe.push_reset(); pipe.view().shape
    (4, 84, 84)
"""

from __future__ import annotations

import numpy as np

from marl_vec.envs.atari.chain import Preprocessing


class FramePipeline:
    """AtariPreprocessing's frame path for one shared screen: max-pool, resize, stack.

    Mirrors gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation``
    (cv2 INTER_AREA resize; the stack is padded with the reset frame).
    """

    def __init__(self, opts: Preprocessing, screen_hw: tuple[int, int]):
        import cv2

        self._cv2 = cv2
        self.opts = opts
        raw = screen_hw if opts.grayscale else (*screen_hw, 3)
        self.pool = [np.zeros(raw, np.uint8), np.zeros(raw, np.uint8)]
        self.stack = np.zeros((opts.frame_stack, *opts.frame_shape()), np.uint8)
        self._size = (opts.screen_size, opts.screen_size)

    def _frame_into(self, out: np.ndarray) -> None:
        if self.opts.frame_skip > 1:
            np.maximum(self.pool[0], self.pool[1], out=self.pool[0])
        # dst: cv2 resizes straight into the stack slot, allocating nothing.
        self._cv2.resize(self.pool[0], self._size, dst=out, interpolation=self._cv2.INTER_AREA)

    def push_reset(self) -> None:
        self.pool[1].fill(0)
        self._frame_into(self.stack[-1])
        self.stack[:-1] = self.stack[-1]  # padded with the reset frame

    def push(self) -> None:
        # Shift by one (numpy buffers overlapping copies) and append the new frame.
        self.stack[:-1] = self.stack[1:]
        self._frame_into(self.stack[-1])

    def view(self) -> np.ndarray:
        return self.stack if self.opts.frame_stack > 1 else self.stack[0]

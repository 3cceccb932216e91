"""Snapshot and restore of the per-episode state of a gymnasium Atari chain's wrappers.

One idea: for ``autoreset="fast"``, which wrapper types hold per-episode state
(pooling buffers and lives, the frame stack, the time limit's step count), how
to save and load it, and which wrappers are known to hold none. A chain with a
wrapper listed in neither place cannot be snapshot (``spec.snapshots`` False).

May import: numpy, gymnasium (lazily), marl_vec.envs.gym.wrapper_chain (which wrappers only check).

Examples:
    >>> from gymnasium.wrappers import TimeLimit
    >>> save, load = wrapper_savers()[TimeLimit]
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np


def wrapper_savers() -> dict[type, tuple[Any, Any]]:
    """Wrapper type -> (save, load) of its per-episode state, for snapshots.

    Wrappers not listed here and not known to be stateless make the chain
    unsnapshottable (``spec.snapshots`` False) rather than silently wrong.
    """
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

    def save_pre(w: Any) -> Any:
        return ([b.copy() for b in w.obs_buffer], w.lives, w.game_over)

    def load_pre(w: Any, s: Any) -> None:
        for buf, saved in zip(w.obs_buffer, s[0]):
            buf[...] = saved
        w.lives, w.game_over = s[1], s[2]

    def save_stack(w: Any) -> Any:
        return [np.array(o, copy=True) for o in w.obs_queue]

    def load_stack(w: Any, s: Any) -> None:
        w.obs_queue = collections.deque((o.copy() for o in s), maxlen=w.stack_size)

    def save_limit(w: Any) -> Any:
        return w._elapsed_steps

    def load_limit(w: Any, s: Any) -> None:
        w._elapsed_steps = s

    return {
        AtariPreprocessing: (save_pre, load_pre),
        FrameStackObservation: (save_stack, load_stack),
        TimeLimit: (save_limit, load_limit),
    }


def stateless_wrappers() -> tuple[type, ...]:
    from marl_vec.envs.gym.wrapper_chain import check_only_wrappers  # they only check: no state to snapshot

    return check_only_wrappers()

"""The fuzzed block engine: a small numpy env whose group is stepped whole, through marl_vec/envs/block_engine.py.

:class:`Walk` is one env, plain: two agents walk on a line; at each reset it draws, from
``default_rng([seed, episode])`` (the seed it was last given, and the episodes since),
the episode's length (1 to 6 steps) and the agents' start; a step adds each agent's
action - 1 to its position; rewards ``action / 2 + agent / 4``; at the length the
episode ends, terminated when the length is odd, truncated when even.
:class:`WalkBlock` is the same arithmetic over a block of ``k`` envs in numpy (one
call a step), the engine that :class:`WalkStepper` (a ``BlockStepper``, the GroupStepper
path of VMAS and JaxMARL) owns: resets noted by ``reset_slot`` and done in ``flush``,
the envs that ended reset at once after a step and written when the group asks.

Example:
    >>> import marl_vec as mv
    >>> venv = mv.DummyVecEnv([walk] * 4, env_seed=0)
    >>> venv.reset().obs.shape
    (4, 2, 3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.core.spec import DiscreteAction, EnvSpec
from marl_vec.envs.block_engine import BlockSlotAdapter, BlockStepper

A, N_ACTIONS, MAX_LEN = 2, 3, 6
SPEC = EnvSpec(agents=("w0", "w1"), obs_shape=(3,), obs_dtype=np.dtype(np.float32), state_shape=(6,),
               state_dtype=np.dtype(np.float32), action=DiscreteAction(N_ACTIONS), state_is_obs=True)


class Walk:
    """One env, plain (the oracle's native env)."""

    def __init__(self) -> None:
        self.base: int | None = None
        self.episode = 0
        self.t = self.length = 0
        self.pos = np.zeros(A, np.float32)

    def reset(self, seed: int | None) -> np.ndarray:
        if seed is not None:
            self.base, self.episode = int(seed), 0
        assert self.base is not None, "the fuzzer always gives a first seed"
        rng = np.random.default_rng([self.base, self.episode])
        self.episode += 1
        self.length = int(rng.integers(1, MAX_LEN + 1))
        self.pos = rng.integers(-4, 5, A).astype(np.float32)
        self.t = 0
        return self.obs()

    def obs(self) -> np.ndarray:
        return np.stack([self.pos, np.full(A, self.t, np.float32), np.arange(A, dtype=np.float32)], axis=1)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        self.pos += actions.astype(np.float32) - 1
        self.t += 1
        reward = actions.astype(np.float32) / 2 + np.arange(A, dtype=np.float32) / 4
        end = self.t >= self.length
        return self.obs(), reward, end and self.length % 2 == 1, end and self.length % 2 == 0


@dataclasses.dataclass(frozen=True)
class Model:
    key: str = "walk"
    spec: EnvSpec = SPEC


class WalkBlock:
    """``k`` Walks as arrays, stepped in one numpy call."""

    def __init__(self, k: int, block: RowViews, rows: Sequence[RowViews]):
        self.k, self.block = k, block
        self.envs = [Walk() for _ in range(k)]  # each slot's seed chain and draws (resets are per env)
        self.pos = np.zeros((k, A), np.float32)
        self.t = np.zeros(k, np.int64)
        self.length = np.zeros(k, np.int64)
        self.pending = np.zeros(k, bool)
        self.fresh = np.zeros(k, bool)  # reset by the last step, waiting for the group to write them
        self.seeds: list[int | None] = [None] * k
        for row in rows:
            row.agent_mask[...] = True
            if row.avail_actions is not None:
                row.avail_actions[...] = True

    def _reset(self, slot: int, seed: int | None) -> np.ndarray:
        env = self.envs[slot]
        obs = env.reset(seed)
        self.pos[slot], self.t[slot], self.length[slot] = env.pos, 0, env.length
        return obs

    def reset_slot(self, slot: int, seed: int | None) -> None:
        if seed is None and self.fresh[slot]:
            self.fresh[slot] = False
            self._write(slot)
            return
        self.seeds[slot] = seed
        self.pending[slot] = True

    def flush(self) -> None:
        for slot in np.flatnonzero(self.pending).tolist():
            self._reset(slot, self.seeds[slot])
            self.fresh[slot] = False
            self._write(slot)
        self.pending[...] = False

    def _write(self, slot: int) -> None:
        self.block.obs[slot] = np.stack([self.pos[slot], np.full(A, self.t[slot], np.float32),
                                         np.arange(A, dtype=np.float32)], axis=1)

    def step(self) -> None:
        actions = self.block.actions.astype(np.float32)
        self.pos += actions - 1
        self.t += 1
        block = self.block
        block.obs[:, :, 0] = self.pos
        block.obs[:, :, 1] = self.t[:, None]
        block.obs[:, :, 2] = np.arange(A, dtype=np.float32)
        block.reward[...] = actions / 2 + np.arange(A, dtype=np.float32) / 4
        end = self.t >= self.length
        block.terminated[...] = (end & (self.length % 2 == 1))[:, None]
        block.truncated[...] = (end & (self.length % 2 == 0))[:, None]
        self.fresh[...] = False
        for slot in np.flatnonzero(end).tolist():  # reset at once; written when the group asks
            self._reset(slot, None)
            self.fresh[slot] = True


class WalkStepper(BlockStepper):
    family, env_noun, block_noun = "Walk", "env", "the Walk block"

    def make_engine(self, model: Any, k: int, block: RowViews, rows: Sequence[RowViews]) -> WalkBlock:
        return WalkBlock(k, block, rows)


class WalkAdapter(BlockSlotAdapter):
    stepper_class = WalkStepper


def walk() -> WalkAdapter:
    return WalkAdapter(Model())

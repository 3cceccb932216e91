"""Natively batched simulators: an adapter slot of a block, and the group stepper that owns the block.

One idea: what the JAX (JaxMARL) and torch (VMAS) engines share. A family whose
simulator steps a whole group in one native call gives each env an adapter
that is only a slot of the group's block (`BlockSlotAdapter`), and a
`BlockStepper` that builds the block (``make_engine``) and steps it
whole. The block (the family's engine) has three methods:

- ``reset_slot(slot, seed)``: reset one env now or note it (deferred);
- ``flush()``: reset every noted env in one native call and write their rows;
- ``step()``: step every env of the block, outputs into the block's arrays;
- optionally ``bind_device(outputs)`` and ``step_device()`` (`GroupStepper.bind_device`):
  the same, written into tensors on a device (VMAS), or made as JAX arrays there (JaxMARL,
  whose engine says ``device_framework = "jax"`` and has ``commit()``, which writes the
  reset views its ``reset_slot`` noted).

Autoreset modes: ``same_step`` and ``disabled`` only. ``next_step`` and
``one_episode`` leave finished envs out of a step, which one call over the
whole block does not do; ``fast`` needs per-env snapshots.

May import: numpy, ``marl_vec.core.buffers``, ``marl_vec.core.adapter``.

Example (a family's engine module)::

    class VmasStepper(BlockStepper):
        family, env_noun, block_noun = "VMAS", "scenario", "the VMAS batch"

        def make_engine(self, model, k, block, rows):
            return VmasBlock(model, k, block, rows)
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.core.adapter import GroupStepper, MultiAgentEnv

SUPPORTED_AUTORESET = ("same_step", "disabled")


class BlockSlotAdapter(MultiAgentEnv):
    """One slot of a group's block. Cheap to build (the block comes with the group's stepper),
    so a backend may build one to read the spec. Subclasses set ``stepper_class``."""

    stepper_class: type[BlockStepper]
    # Every slot shares the model (no episode state of its own): the block holds it.
    native_is_stateless = True

    def __init__(self, model: Any):
        self.model = model
        self.spec = model.spec
        self.block: Any = None
        self.slot = 0
        self._alone: BlockStepper | None = None  # used outside a group: a block of one

    @classmethod
    def group_stepper(cls, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews],
                      block: RowViews) -> GroupStepper:
        return cls.stepper_class(adapters, rows, block)

    def _attach(self, block: Any, slot: int) -> None:
        self.block, self.slot = block, slot

    def _alone_stepper(self) -> BlockStepper:
        """A block of one over this adapter's row (an adapter used outside a group)."""
        if self._alone is None:
            row = self.row
            block = RowViews(**{f.name: None if getattr(row, f.name) is None else getattr(row, f.name)[None]
                                for f in dataclasses.fields(RowViews)})
            self._alone = self.stepper_class([self], [row], block)
        return self._alone

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if self.block is None:
            self._alone_stepper()
        assert self.block is not None
        self.block.reset_slot(self.slot, seed)
        if self._alone is not None:
            self.block.flush()
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Only for an adapter outside a group (its block of one); a group steps its block whole."""
        if self._alone is None:
            raise RuntimeError(f"a {self.stepper_class.family} env is stepped by its group's stepper, "
                               "not one at a time")
        infos: list[dict[str, Any]] = [{}]
        self._alone.step(0, 1, infos)
        return infos[0]

    def close(self) -> None:
        self.block, self._alone = None, None


class BlockStepper(GroupStepper):
    """Owns a group's block (``make_engine``) and steps all its envs in one native call."""

    family = "batched"  # names the family in messages: "JaxMARL", "VMAS"
    env_noun = "env"  # what one model is: "env", "scenario"
    block_noun = "the block"  # "the JAX block", "the VMAS batch"

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews):
        super().__init__(adapters, rows, block)
        slots: list[BlockSlotAdapter] = list(adapters)  # type: ignore[arg-type]
        models = {a.model.key for a in slots}
        if len(models) != 1:
            raise ValueError(f"the envs of one {self.family} group must be the same {self.env_noun} with the same "
                             f"kwargs; got {len(models)} kinds: {sorted(models)}")
        self.k = len(slots)
        self.engine = self.make_engine(slots[0].model, self.k, block, rows)
        for j, adapter in enumerate(slots):
            adapter._attach(self.engine, j)

    def make_engine(self, model: Any, k: int, block: RowViews, rows: Sequence[RowViews]) -> Any:
        """The family's block of ``k`` envs of ``model`` over ``block`` (its rows: ``rows``)."""
        raise NotImplementedError

    def steps_single_envs(self) -> bool:
        return False

    def autoreset_error(self, mode: str) -> str | None:
        if mode in SUPPORTED_AUTORESET:
            return None
        why = (f"it needs per-env snapshots, which {self.block_noun} does not keep" if mode == "fast"
               else f"it leaves finished envs out of a step, and {self.block_noun} steps every env of its group "
                    "in one call")
        return (f"autoreset={mode!r} is not supported by the {self.family} family: {why}; "
                f"allowed: {', '.join(SUPPORTED_AUTORESET)}")

    def flush_resets(self) -> None:
        self.engine.flush()

    def supports_device(self) -> bool:
        return hasattr(self.engine, "step_device")

    def device_framework(self) -> str | None:
        return getattr(self.engine, "device_framework", "torch") if self.supports_device() else None

    def bind_device(self, outputs: Any) -> None:
        if not self.supports_device():
            super().bind_device(outputs)
        self.engine.bind_device(outputs)

    def step_device(self) -> list[int]:
        return self.engine.step_device()

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        if first != 0 or stop != self.k:
            self.failed_at = first
            raise RuntimeError(f"a {self.family} block steps its {self.k} envs together, not envs {first}..{stop - 1}")
        self.engine.step()
        infos[:] = map(dict, itertools.repeat((), self.k))  # k fresh empty dicts, at C speed

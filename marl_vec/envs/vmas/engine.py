"""VMAS on its own engine: a whole EnvGroup stepped by one batched torch call.

One idea: `VmasAdapter` is one env slot of a block, and
`VmasStepper` is the `GroupStepper` that owns
the group's `VmasBlock`: one ``vmas.Environment`` whose ``batch_dim`` is
the number of envs of the group padded up to a multiple of `PAD_ENVS` (the
padding envs are stepped, never reset one by one and never read), its private
random state and each slot's seed.
One group step is one ``Environment.step`` (every env of the block), then one
copy per output tensor into the batch buffers (``Tensor.numpy()`` is zero-copy
on the CPU; the buffers are never aliased to torch's memory). Nothing runs per
env in Python unless an episode ended. The step and the resets of the envs
that ended run on ONE swap of the block's random state (VMAS's undecorated
calls, `raw_calls`), where VMAS's public calls
swap it around each call (~0.3 ms each): what they compute is the same.

How our contract maps onto the block:

- Autoreset: where an episode ended, the step's outputs (its TRUE last
  observation) are in the row; the block then resets those envs at once, each
  with ``env.seed(episode_seed(...))`` and ``reset_at(i,
  return_observations=False)``, reads the observations of all of them in one
  ``get_from_scenario`` (TorchRL's VMAS idiom), and keeps them until the group,
  having kept the final observation in ``final_*``, calls the adapter's
  ``reset``, which writes that env's row.
- ``reset`` with a seed (or of an env that did not just end) is deferred: the
  group's ``reset`` ends with `VmasStepper.flush_resets`, which resets
  every waiting env the same way and reads their observations once; with the
  option ``batched_reset``, when every env of the block waits, in one
  ``env.reset(seed=batch_seed(...))`` instead.
- Autoreset modes: ``same_step`` and ``disabled`` are served exactly.
  ``next_step`` and ``one_episode`` leave finished envs out of a step, which
  one call over the whole block does not do; ``fast`` needs per-env snapshots.
  They raise ValueError at construction with the reason.

On a device (the option ``device``, `catalog.parse_device`): the block's
``vmas.Environment`` is built there. With ``DummyVecEnv(array_backend="torch")`` the
group binds the block to its `DeviceOutputs` (`VmasBlock.bind_device`) and steps it by
`VmasBlock.step_device`: actions read from the device tensor, every output written by
``Tensor.copy_`` into the preallocated device tensors, one read to the host (which
envs ended). Otherwise (numpy mode, or VMAS off the CPU under numpy mode) the outputs
go into the host buffers as above (``Tensor.cpu()`` first where VMAS is off the CPU).

May import: numpy, torch and vmas (lazily), ``marl_vec.core.buffers``, ``marl_vec.envs.block_engine``,
``marl_vec.envs.vmas.{catalog,model}``.

Examples:
    >>> import marl_vec as mv
    >>> fn = mv.envs.registry.make_env_fn("vmas", "balance", {"max_steps": 100})
    >>> venv = mv.DummyVecEnv([fn] * 64)            # one VMAS batch of 64
    >>> venv.reset().obs.shape
    (64, 3, 16)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.block_engine import BlockSlotAdapter, BlockStepper
from marl_vec.envs.vmas.catalog import batch_seed, episode_seed, parse_device
from marl_vec.envs.vmas.model import Model, RandomState, model_of, raw_calls, seed_installed

# The VMAS batch of a block of k envs is padded up to a multiple of this many envs. torch's CPU
# kernels run a contiguous array in blocks of 2 SIMD vectors (32 float32 with AVX-512, 16 with
# AVX2) and the tail past the last whole block in a scalar loop, which rounds differently
# (logaddexp, atan2, ...: tests/families/test_vmas_split.py has the plain-torch proof). Without
# padding, env i of a batch of 8 (a (8, 4) tensor: one whole block) and of a batch of 4 (all tail)
# take different roundings. With every batch a multiple of 32 wide, every per-env array is a
# multiple of 32 elements long, so each element takes the vector path whatever the batch.
PAD_ENVS = 32


def padded_width(k: int) -> int:
    """The width of the VMAS batch that serves ``k`` envs: ``k`` rounded up to a multiple of
    `PAD_ENVS` (the padding envs are stepped with zero actions and never read).

    Examples:
        >>> padded_width(1), padded_width(32), padded_width(33)
        (32, 32, 64)
    """
    return -(-k // PAD_ENVS) * PAD_ENVS


class VmasBlock:
    """The VMAS side of ``k`` slots: the native batch (``padded_width(k)`` envs wide, the ones
    past ``k`` padding), its random state, each slot's seed chain."""

    def __init__(self, model: Model, k: int, block: RowViews, rows: Sequence[RowViews]):
        import torch

        self.torch = torch
        self.model, self.k = model, k
        self.width = padded_width(k)
        self.device = parse_device(model.options["device"])  # checked here: where the envs step
        self.on_cpu = self.device == "cpu"
        self.random = RandomState(self.device)
        self.env = model.native(self.width, self.random)
        self.raw = raw_calls()  # VMAS's calls without their own random-state swap: ours is once a step
        # Each slot's seed and the number of episodes started from it (episode_seed's arguments).
        self.base: list[int | None] = [None] * k
        self.episode = [0] * k
        self.pending = np.zeros(k, dtype=bool)
        self.fresh = np.zeros(k, dtype=bool)  # slots reset by the last step, waiting for reset() to write
        self.reset_obs: list[Any] = []
        self.block, self.rows = block, list(rows)
        self.sizes = model.obs_sizes
        # Zero-copy numpy views of the block's actions, one per agent, in what VMAS takes:
        # (width, size) float32 for Box actions, (width, 1) int64 for Discrete ones.
        self._actions = block.actions
        # The padding envs' rows stay 0 (no force; Discrete action 0, VMAS's no-op).
        # _action_device: what VMAS reads, on its device (on the CPU: _action_buffer's memory).
        if model.continuous:
            self._action_buffer = np.zeros((self.width, len(model.action_sizes), max(model.action_sizes)), np.float32)
        else:
            self._action_buffer = np.zeros((self.width, len(model.action_sizes), 1), np.int64)
        self._action_device = torch.from_numpy(self._action_buffer)
        if not self.on_cpu:
            self._action_device = self._action_device.to(self.device)
        if model.continuous:
            self._agent_actions = [self._action_device[:, a, :size] for a, size in enumerate(model.action_sizes)]
        else:
            self._agent_actions = [self._action_device[:, a] for a in range(len(model.action_sizes))]
        avail = None
        if not model.continuous:
            avail = np.zeros((len(model.action_sizes), max(model.action_sizes)), dtype=bool)
            for a, n in enumerate(model.action_sizes):
                avail[a, :n] = True
        self._avail = avail
        for row in self.rows:  # fixed for the block's life: written once
            row.agent_mask[...] = True
            if avail is not None and row.avail_actions is not None:
                row.avail_actions[...] = avail
        self.out: Any = None  # the group's DeviceOutputs rows, once bound (bind_device)

    # -- reset ------------------------------------------------------------------

    def reset_slot(self, slot: int, seed: int | None) -> None:
        """Reset slot: from the last step's autoreset when it just ended and no seed is
        given (written at once), else deferred to `flush`."""
        if seed is None and self.fresh[slot]:
            self.fresh[slot] = False
            self._write_rows([slot], self.reset_obs)
            return
        if seed is not None:
            self.base[slot], self.episode[slot] = int(seed), 0
        self.pending[slot] = True

    def _reset_native(self, slots: list[int]) -> list[Any]:
        """Reset ``slots`` of the VMAS batch, each on its next episode seed; their observations
        (of every env: VMAS computes them for the whole batch), read once. Call it inside
        ``self.random.installed()``: ``env.seed(w); env.reset_at(i)`` for each, then
        ``env.get_from_scenario``, on one swap of the random state instead of 2k + 1."""
        env, raw = self.env, self.raw
        for slot in slots:
            self._ensure_base(slot)
            seed_installed(episode_seed(self.base[slot], self.episode[slot]), self.random.cuda)  # type: ignore[arg-type]
            self.episode[slot] += 1
            raw.reset_at(env, slot, return_observations=False)
        return raw.get_from_scenario(env, get_observations=True, get_rewards=False, get_infos=False,
                                     get_dones=False)[0]

    def flush(self) -> None:
        """Reset every pending slot and write their rows."""
        if not self.pending.any():
            return
        slots = np.flatnonzero(self.pending).tolist()
        whole = len(slots) == self.k and self.model.options["batched_reset"]
        self.pending[...] = False
        self.fresh[slots] = False
        with self.random.installed():
            obs = self._reset_whole() if whole else self._reset_native(slots)
        self._write_rows(slots, obs)

    def _reset_whole(self) -> list[Any]:
        """``batched_reset``: every env of the batch in one ``env.reset(seed=batch_seed(...))``
        (inside ``self.random.installed()``); each env's episode count goes on by one."""
        for slot in range(self.k):
            self._ensure_base(slot)
        word = batch_seed(self.base, self.episode)  # type: ignore[arg-type]
        self.episode = [n + 1 for n in self.episode]
        return self.raw.reset(self.env, seed=word)

    def _ensure_base(self, slot: int) -> None:
        if self.base[slot] is None:  # never seeded (env_seed=None): its own OS entropy
            self.base[slot] = int(np.random.SeedSequence().entropy) % 2**64  # type: ignore[operator]

    def _write_rows(self, slots: list[int], obs: list[Any]) -> None:
        if self.out is not None:
            self._write_device_rows(slots, obs)
            return
        target = self.block.obs
        for a, (size, tensor) in enumerate(zip(self.sizes, obs)):
            values = _host(tensor)
            if len(slots) == 1:
                target[slots[0], a, :size] = values[slots[0]]
            else:
                target[slots, a, :size] = values[slots]

    # -- step -------------------------------------------------------------------

    def step(self) -> None:
        """One VMAS step of every slot; its outputs copied into the block's arrays; the envs
        that ended reset at once (their rows keep the last step's views; see the module doc)."""
        if self.pending.any():  # a reset outside a group's reset() (an adapter used alone)
            self.flush()
        # Validated by the VecEnv (shape, range). The agents' tensors view _action_buffer.
        k, width = self.k, self.width
        if self.model.continuous:
            np.copyto(self._action_buffer[:k], self._actions, casting="unsafe")
        else:
            np.copyto(self._action_buffer[:k, :, 0], self._actions, casting="unsafe")
        if not self.on_cpu:  # VMAS on a device, results in host buffers: one copy each way
            self._action_device.copy_(torch_from_numpy(self._action_buffer))
        with self.random.installed():  # one swap for the step and the resets of the envs that ended
            obs, rewards, terminated, truncated, _infos = self.raw.step(self.env, list(self._agent_actions))
            block = self.block
            for a, (size, tensor) in enumerate(zip(self.sizes, obs)):
                np.copyto(block.obs[:, a, :size], _host(tensor)[:k])
            # Some scenarios give (width, 1) rewards or flags: a view of (width,), then the first k.
            for a, tensor in enumerate(rewards):
                np.copyto(block.reward[:, a], _host(tensor).reshape(width)[:k], casting="same_kind")
            ended = _host(terminated).reshape(width)[:k]
            cut = _host(truncated).reshape(width)[:k] & ~ended  # ended at the step limit: ended, not cut
            np.copyto(block.terminated, ended[:, None])
            np.copyto(block.truncated, cut[:, None])
            done = ended | cut
            self.fresh[...] = False
            if np.count_nonzero(done):
                slots = np.flatnonzero(done).tolist()
                self.reset_obs = self._reset_native(slots)
                self.fresh[slots] = True


    # -- on a device (DummyVecEnv(array_backend="torch")) ---------------------------------

    def bind_device(self, out: Any) -> None:
        """Write into ``out`` (the group's `DeviceOutputs` rows) from now on; the fixed fields now."""
        torch = self.torch
        self.out = out
        out.agent_mask.fill_(True)
        if self._avail is not None and out.avail_actions is not None:
            out.avail_actions.copy_(torch.from_numpy(self._avail))  # broadcast over the envs, once

    def _write_device_rows(self, slots: list[int], obs: list[Any]) -> None:
        target = self.out.obs
        for a, (size, tensor) in enumerate(zip(self.sizes, obs)):
            if len(slots) == 1:
                target[slots[0], a, :size].copy_(tensor[slots[0]])
            else:
                target[slots, a, :size] = tensor[slots].to(target.device)

    def step_device(self) -> list[int]:
        """`step` into the bound device tensors, actions read from ``out.actions`` (no host
        memory on the way); returns the slots that ended (already reset natively)."""
        if self.pending.any():
            self.flush()
        out, k, width = self.out, self.k, self.width
        if self.model.continuous:
            self._action_device[:k].copy_(out.actions)
        else:
            self._action_device[:k, :, 0].copy_(out.actions)
        with self.random.installed():
            obs, rewards, terminated, truncated, _infos = self.raw.step(self.env, list(self._agent_actions))
            for a, (size, tensor) in enumerate(zip(self.sizes, obs)):
                out.obs[:, a, :size].copy_(tensor[:k])
            for a, tensor in enumerate(rewards):
                out.reward[:, a].copy_(tensor.reshape(width)[:k])
            ended = terminated.reshape(width)[:k]
            cut = truncated.reshape(width)[:k] & ~ended
            out.terminated.copy_(ended[:, None])
            out.truncated.copy_(cut[:, None])
            done = ended | cut
            out.done.copy_(done)
            self.fresh[...] = False
            slots = done.nonzero().flatten().tolist()  # the step's one read to the host: which envs reset
            if slots:
                self.reset_obs = self._reset_native(slots)
                self.fresh[slots] = True
        return slots


def _host(tensor: Any) -> np.ndarray:
    """A VMAS output as numpy: zero-copy on the CPU, one copy from a device."""
    return tensor.numpy() if tensor.device.type == "cpu" else tensor.cpu().numpy()


def torch_from_numpy(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array)


class VmasStepper(BlockStepper):
    """Owns a group's `VmasBlock` and steps all its envs in one VMAS call."""

    family, env_noun, block_noun = "VMAS", "scenario", "the VMAS batch"

    def make_engine(self, model: Model, k: int, block: RowViews, rows: Sequence[RowViews]) -> VmasBlock:
        return VmasBlock(model, k, block, rows)


class VmasAdapter(BlockSlotAdapter):
    """One slot of a group's `VmasBlock` (see `BlockSlotAdapter`).

    Examples:
        >>> env = make_vmas("transport", max_steps=50)
        >>> env.spec.n_agents, env.spec.action.shape
        (4, (2,))
    """

    stepper_class = VmasStepper

    @property
    def native(self) -> Any:
        """The group's ``vmas.Environment`` (all envs of the block), once the group is built."""
        return self.block.env if self.block is not None else None


def make_vmas(env_id: str, **kwargs: Any) -> VmasAdapter:
    """One slot of a VMAS scenario (the family's factory): ``balance``, ``transport``,
    ``navigation``, ``wheel``, ``football``, ... (see `marl_vec.envs.vmas.catalog`);
    ``kwargs``: ``continuous_actions``, ``max_steps``, ``clamp_actions`` and the scenario's own."""
    return VmasAdapter(model_of(env_id, kwargs))

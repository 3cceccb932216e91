"""JaxMARL on a JAX engine: a whole EnvGroup stepped by one jitted, vmapped call.

One idea: `JaxMarlAdapter` is one env slot of a block, and
`JaxMarlStepper` is the `GroupStepper` that
owns the group's `JaxBlock`: the per-env keys, the batched JaxMARL state
and the two compiled functions of `marl_vec.envs.jaxmarl.kernels`. One
group step is one call of the compiled step, then one copy per output array
into the batch buffers (``np.asarray`` of a CPU jax array is zero-copy; the
buffers are never aliased to JAX's memory). Nothing runs per env in Python
unless an episode ended.

How our contract maps onto the block:

- Autoreset happens inside the jit. The step writes the TRUE last observation
  (and state, avail, mask) of an episode that ended into its row; the group
  keeps it in ``final_*`` and calls the adapter's ``reset``, which writes the
  reset outputs the same call made (no second call).
- ``reset`` with a seed (or of an env that did not just end) is deferred: the
  group's ``reset`` ends with `JaxMarlStepper.flush_resets`, which resets
  every waiting row in one call of the compiled reset.
- Seeds: env ``i``'s key is ``key_of_seed(env_seed + i)`` at its seeded reset;
  an unseeded first reset (``env_seed=None``) starts from OS entropy.
- Autoreset modes: ``same_step`` and ``disabled`` are served exactly.
  ``next_step`` and ``one_episode`` leave finished envs out of a step, which
  one call over the whole block does not do; ``fast`` needs per-env snapshots.
  Those raise ValueError at construction with the reason.

On a device (the option ``device``, `catalog.parse_device`): the block's keys, state and
compiled functions live there (checked when the block is built). With
``DummyVecEnv(array_backend="jax" or "torch")`` on that device the group binds the block
to its `marl_vec.core.jax_device.JaxOutputs` (`JaxBlock.bind_device`) and steps it by
`JaxBlock.step_device`: actions read from the device, the step's outputs merged into
the batch's JAX arrays by jitted functions there, one read to the host (which envs
ended; where some did, their stats). Resets write their rows the same way (`commit`).

May import: numpy, jax (lazily), ``marl_vec.core.buffers``, ``marl_vec.core.spec``, ``marl_vec.envs.block_engine``,
``marl_vec.core.adapter``, ``marl_vec.envs.extras``, ``marl_vec.envs.jaxmarl.{catalog,kernels,model,views}``.

Examples:
    >>> import marl_vec as mv
    >>> fn = mv.envs.registry.make_env_fn("jaxmarl", "smax/3m")
    >>> venv = mv.DummyVecEnv([fn] * 256)          # one block of 256, compiled here
    >>> venv.reset().obs.shape
    (256, 3, 75)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.block_engine import BlockSlotAdapter, BlockStepper
from marl_vec.envs.jaxmarl.catalog import jax_device
from marl_vec.envs.jaxmarl.kernels import build_kernels, key_of_seed
from marl_vec.envs.jaxmarl.model import Model, model_of
from marl_vec.core.spec import EnvSpec

__all__ = ["JaxBlock", "JaxMarlAdapter", "JaxMarlStepper", "Model", "make_jaxmarl", "model_of"]


class JaxBlock:
    """The JAX side of ``k`` slots: keys, batched state, compiled functions, last outputs."""

    def __init__(self, model: Model, k: int, block: RowViews, rows: Sequence[RowViews], spec: EnvSpec):
        import jax

        self.model, self.k = model, k
        # Checked here, where the envs step: a device JAX lacks is one line naming those it has.
        self.device = None if model.device is None else jax_device(model.device)
        self.kernels = build_kernels(model.view, k, model.label, device=self.device)
        self.state = self.kernels.state_zeros
        # Unseeded slots (env_seed=None) start from OS entropy, each its own.
        entropy = np.random.SeedSequence().generate_state(2 * k).reshape(k, 2)
        self.keys = jax.device_put(entropy.astype(np.uint32), self.device)
        self.out: Any = None  # the batch's JaxOutputs, once bound (bind_device): results stay on the device
        self._noted = np.zeros(k, dtype=bool)  # on the device path: rows that take reset_out at commit()
        self._applied = np.zeros(k, dtype=bool)  # rows whose reset views the last device step wrote
        self.seed_keys = np.zeros((k, 2), dtype=np.uint32)
        self.use_seed = np.zeros(k, dtype=bool)
        self.pending = np.zeros(k, dtype=bool)
        self.fresh = np.zeros(k, dtype=bool)  # slots whose reset outputs of the last step wait for reset()
        self.reset_out: tuple = ()
        self.stats = np.zeros((k, len(model.view.stats)), dtype=np.float32)
        self.block, self.rows = block, list(rows)
        view = model.view
        # The fields this batch keeps: the state only where it is the env's own.
        self.write_state = view.has_state and not spec.state_is_obs and spec.has_state and block.state is not None
        fixed_avail = view.fixed_avail() if view.action_dims is None else None
        for row in self.rows:
            if not view.has_avail and row.avail_actions is not None:
                row.avail_actions[...] = fixed_avail
            if not view.has_mask:
                row.agent_mask[...] = True
        self._actions = block.actions
        self._action_buffer = np.zeros(block.actions.shape,
                                       dtype=np.int32 if view.action_dims is None else np.float32)

    # -- reset ------------------------------------------------------------------

    def reset_slot(self, slot: int, seed: int | None) -> None:
        """Reset slot: from the last step's autoreset when it just ended and no seed is
        given (written at once), else deferred to `flush`."""
        if seed is None and self.fresh[slot]:
            self.fresh[slot] = False
            if self.out is not None:  # written with the others by commit(), in one call
                self._noted[slot] = not self._applied[slot]  # same_step: the step wrote it already
                return
            self._write_row(slot, self.reset_out)
            return
        self.pending[slot] = True
        self.use_seed[slot] = seed is not None
        if seed is not None:
            self.seed_keys[slot] = key_of_seed(seed)

    def flush(self) -> None:
        """Reset every pending slot in one call and write their rows."""
        if not self.pending.any():
            return
        # Copies: JAX may read a numpy argument in place, after the call returned (dispatch is
        # asynchronous), and these arrays change below.
        rows = self.pending.copy()
        self.keys, self.state, out = self.kernels.reset(self.keys, self.state, self.seed_keys.copy(),
                                                        self.use_seed.copy(), rows)
        self.pending[...] = False
        self.use_seed[...] = False
        self.fresh[rows] = False
        if self.out is not None:
            self.out.write_rows(self._views(out), rows)
            return
        idx = np.flatnonzero(rows)
        obs, world, avail, mask = (None if x is None else np.asarray(x) for x in out)
        block = self.block
        block.obs[idx] = obs[idx]
        if self.write_state:
            block.state[idx] = world[idx]
        if avail is not None and block.avail_actions is not None:
            block.avail_actions[idx] = avail[idx]
        if mask is not None:
            block.agent_mask[idx] = mask[idx]

    def _write_row(self, slot: int, out: tuple) -> None:
        obs, world, avail, mask = out
        row = self.rows[slot]
        row.obs[...] = np.asarray(obs)[slot]
        if self.write_state:
            row.state[...] = np.asarray(world)[slot]
        if avail is not None and row.avail_actions is not None:
            row.avail_actions[...] = np.asarray(avail)[slot]
        if mask is not None:
            row.agent_mask[...] = np.asarray(mask)[slot]

    # -- step -------------------------------------------------------------------

    def step(self) -> None:
        """One compiled step of every slot; its outputs copied into the block's arrays."""
        if self.pending.any():  # a reset outside a group's reset() (an adapter used alone)
            self.flush()
        # Validated by the VecEnv: in range. Reusing the buffer is safe: the last call's outputs
        # were read (np.asarray waits for them), so JAX is done with it.
        np.copyto(self._action_buffer, self._actions, casting="unsafe")
        self.keys, self.state, out, last = self.kernels.step(self.keys, self.state, self._action_buffer)
        obs, world, avail, mask, reward, terminated, truncated, done, stats = out
        block = self.block
        # What follows the step: the reset views where an episode ended, overwritten below.
        np.copyto(block.obs, np.asarray(obs))
        if self.write_state:
            np.copyto(block.state, np.asarray(world))
        if avail is not None and block.avail_actions is not None:
            np.copyto(block.avail_actions, np.asarray(avail))
        if mask is not None:
            np.copyto(block.agent_mask, np.asarray(mask))
        np.copyto(block.reward, np.asarray(reward), casting="same_kind")
        np.copyto(block.terminated, np.asarray(terminated))
        np.copyto(block.truncated, np.asarray(truncated))
        done = np.asarray(done)
        np.copyto(self.fresh, done)
        if np.count_nonzero(done):
            # The rows of the ended episodes get their true last views (the group keeps them in
            # final_*); the reset views wait for the adapters' reset().
            self.reset_out = (obs, world, avail, mask)
            for slot in np.flatnonzero(done).tolist():
                self._write_row(slot, last)
            if self.stats.shape[1]:
                np.copyto(self.stats, np.asarray(stats))


    # -- on a device (DummyVecEnv(array_backend="jax" or "torch")) ----------------------

    device_framework = "jax"

    def bind_device(self, out: Any) -> None:
        """Make results as JAX arrays in ``out`` (a `marl_vec.core.jax_device.JaxOutputs`) from now on."""
        self.out = out

    def _views(self, out: tuple) -> dict[str, Any]:
        """The views (obs, state, avail, mask) of a compiled call that this batch keeps, by field."""
        obs, world, avail, mask = out
        views = {"obs": obs}
        if self.write_state and not self.out.state_from_obs:  # else the batch's state is its obs (state="concat")
            views["state"] = world
        if avail is not None and self.block.avail_actions is not None:
            views["avail_actions"] = avail
        if mask is not None:
            views["agent_mask"] = mask
        return views

    def commit(self) -> None:
        """Write the reset views of the rows `reset_slot` noted (envs that just ended), in one call."""
        if self._noted.any():
            rows, self._noted = self._noted, np.zeros(self.k, dtype=bool)
            self.out.write_rows(self._views(self.reset_out), rows)

    def step_device(self) -> list[int]:
        """`step` with the actions and results on the device (``out``); returns the slots that
        ended. The step's one read to the host is which envs ended (a (2, k) bool array); where
        some did, their episode stats too."""
        if self.pending.any():
            self.flush()
        self.commit()
        self.keys, self.state, out, last = self.kernels.step(self.keys, self.state, self.out.actions)
        obs, world, avail, mask, reward, terminated, truncated, ended, stats = out
        self.reset_out = (obs, world, avail, mask)
        flags = np.asarray(self.out.step(self._views(self.reset_out), self._views(last), reward, terminated,
                                         truncated, ended))
        np.copyto(self.fresh, flags[1])
        np.logical_and(flags[0], flags[1], out=self._applied) if self.out.autoreset else self._applied.fill(False)
        if np.count_nonzero(flags[1]) and self.stats.shape[1]:
            np.copyto(self.stats, np.asarray(stats))
        return np.flatnonzero(flags[0]).tolist()


class JaxMarlStepper(BlockStepper):
    """Owns a group's `JaxBlock` and steps all its envs in one compiled call."""

    family, env_noun, block_noun = "JaxMARL", "env", "the JAX block"

    def make_engine(self, model: Model, k: int, block: RowViews, rows: Sequence[RowViews]) -> JaxBlock:
        # The slots' spec, not the model's: the state option (state="concat"/"none") changed it.
        return JaxBlock(model, k, block, rows, self.adapters[0].spec)


class JaxMarlAdapter(BlockSlotAdapter):
    """One slot of a group's `JaxBlock` (see `BlockSlotAdapter`).
    The JaxMARL env is functional (its state lives in the block), so every slot may share it.

    Examples:
        >>> env = make_jaxmarl("jax_mpe/simple_spread")
        >>> env.spec.n_agents, env.spec.n_actions
        (3, 5)
    """

    stepper_class = JaxMarlStepper

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        if not self.spec.stats or self.block is None:
            return {}
        values = self.block.stats[self.slot]
        return {name: float(value) for name, value in zip(self.spec.stats, values)}

    @property
    def native(self) -> Any:
        return self.model.env


def make_jaxmarl(env_id: str, **kwargs: Any) -> JaxMarlAdapter:
    """One slot of a JaxMARL env (the family's factory): ``smax/3m``, ``jax_mpe/simple_spread``,
    ``hanabi``, ``overcooked``, ... (see `marl_vec.envs.jaxmarl.catalog`); ``kwargs`` go to
    ``jaxmarl.make``."""
    return JaxMarlAdapter(model_of(env_id, kwargs))

"""Actions for a batch whose group steps on a device: torch tensors (JAX arrays) checked and kept on that device.

One idea: `DeviceActions`, what `DummyVecEnv` does with a step's actions when its
engine reads them from `marl_vec.core.device_outputs.DeviceOutputs` (the VMAS engine
with ``array_backend="torch"``). A tensor on the batch's device (or the CPU) is
checked there: its shape, its dtype, and (``validate``) its range: Discrete actions in
``[start, start + n)`` and available, Box actions within their bounds, for live
agents. The check is a few tensor operations and one read of one bool to the host;
where it fails, the numpy checks of `marl_vec.vec.actions` run on a host copy (the
error path only), so the messages are numpy mode's, word for word. Then the actions
are copied once into ``outputs.actions``. Numpy (or JAX) actions go through the numpy
checks into the host buffer, then one copy to the device. A tensor on another device
is refused, naming both. `JaxDeviceActions` does the same for a JAX engine (JaxMARL with
``array_backend="jax"`` or ``"torch"``): JAX arrays checked on its device by one jitted
function, kept there as the engine's step reads them.

May import: numpy, torch and jax (lazily), ``marl_vec.core.spec``, ``marl_vec.vec.{actions,device_arrays}``.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

import numpy as np

from marl_vec.core.spec import ContinuousAction, DiscreteAction
from marl_vec.vec.actions import ActionWriter
from marl_vec.vec.device_arrays import host_array


@contextlib.contextmanager
def device_masks_on_host(venv: Any, out: Any) -> Iterator[None]:
    """While the block runs, the host buffers' ``avail_actions`` and ``agent_mask`` hold the
    device's current ones, and numpy mode's checks read them; then the host rows are put back.

    The device path keeps the current masks on the device only: numpy actions checked against
    the host rows as they are would be judged by the masks of the last host write (a stale
    reset's), and an action unavailable now would pass.
    """
    if not venv.validate:
        yield
        return
    buffers = venv.buffers
    pairs = [(buffers.agent_mask, out.agent_mask)]
    if buffers.avail_actions is not None and out.avail_actions is not None:
        pairs.append((buffers.avail_actions, out.avail_actions))
    kept = [(host, host.copy()) for host, _ in pairs]
    try:
        for host, current in pairs:
            host[...] = host_array(current)
        yield
    finally:
        for host, value in kept:
            host[...] = value


class DeviceActions:
    """Writes actions into ``outputs.actions`` for ``venv`` (its `ActionWriter` checks and messages)."""

    def __init__(self, venv: Any, outputs: Any):
        import torch

        self.torch, self.venv, self.out = torch, venv, outputs
        self.device = outputs.device
        self.shape = tuple(outputs.actions.shape)
        action = venv.spec.action
        self.discrete = isinstance(action, DiscreteAction)
        if self.discrete:
            self.start, self.n = action.start, action.n_actions
        elif isinstance(action, ContinuousAction):
            check = venv._leaf_checks[0][1]
            self.low = torch.as_tensor(np.ascontiguousarray(check.low), device=self.device)
            self.high = torch.as_tensor(np.ascontiguousarray(check.high), device=self.device)
            self.checked = None if check.checked is None else torch.as_tensor(check.checked, device=self.device)
        else:
            raise ValueError(f"device actions serve Discrete and Box actions, not {type(action).__name__}")

    def write(self, actions: Any) -> None:
        torch, out = self.torch, self.out
        if not isinstance(actions, torch.Tensor):  # numpy or JAX: numpy's path, then one copy up
            venv = self.venv
            with device_masks_on_host(venv, out):
                ActionWriter._write_actions(venv, host_array(actions))
            self.upload(venv.buffers.actions)
            return
        if actions.device != self.device and actions.device.type != "cpu":
            raise ValueError(f"actions are on device {actions.device}, but this VecEnv steps on {self.device}; "
                             f"pass them on {self.device} (or on the CPU)")
        actions = actions.detach()
        if tuple(actions.shape) != self.shape:
            venv = self.venv
            raise venv._shape_error(types.SimpleNamespace(shape=tuple(actions.shape)), self.shape,
                                    venv._leaf_checks[0][1])
        if self.discrete and (actions.is_floating_point() or actions.is_complex() or actions.dtype == torch.bool):
            self._host_check(actions)  # numpy's message for a non-integer dtype
        if actions.device != self.device:
            actions = actions.to(self.device)
        if self.venv.validate and self._any_bad(actions):
            self._host_check(actions)
        out.actions.copy_(actions)

    def upload(self, actions: np.ndarray) -> None:
        """``actions`` (the host buffer's, checked already: numpy's path, or the async pool's
        ``send()``) to the device, where the engine reads them: one copy."""
        self.out.actions.copy_(self.torch.from_numpy(actions))

    def _any_bad(self, actions: Any) -> bool:
        """Whether some live agent's action is wrong (computed on the device; one bool read)."""
        out = self.out
        if self.discrete:
            index = actions.long() - self.start
            outside = (index < 0) | (index >= self.n)
            if out.avail_actions is not None:
                chosen = out.avail_actions.gather(2, index.clamp(0, self.n - 1).unsqueeze(-1)).squeeze(-1)
                outside |= ~chosen
            bad = outside & out.agent_mask
        else:
            outside = (actions < self.low) | (actions > self.high) | ~self.torch.isfinite(actions)
            if self.checked is not None:
                outside &= self.checked
            bad = outside.flatten(2).any(-1) & out.agent_mask
        return bool(bad.any())

    def _host_check(self, actions: Any) -> None:
        """numpy mode's checks on a host copy (the error path): they raise numpy's message."""
        venv = self.venv
        host = actions.cpu().resolve_conj().resolve_neg().numpy()
        if self.discrete and host.dtype.kind not in "iu":
            from marl_vec.vec.action_checks import refuse_non_integers

            refuse_non_integers(host, venv.spec.action)
        if venv.validate:
            venv._validate(host)


class JaxDeviceActions:
    """`DeviceActions` for a JAX engine (`marl_vec.core.jax_device.JaxOutputs`): JAX arrays (and torch
    tensors, taken by DLPack) checked on the device, then kept there in what the engine's step
    reads (int32 for Discrete actions, float32 for Box ones). The check is one jitted function
    and one read of one bool; a failing one runs numpy mode's checks on host copies (the error
    path only: the current avail and mask included), so the messages are numpy mode's."""

    def __init__(self, venv: Any, outputs: Any):
        import jax

        self.jax, self.venv, self.out = jax, venv, outputs
        self.device = outputs.device
        self.shape = tuple(venv.buffers.actions.shape)
        action = venv.spec.action
        self.discrete = isinstance(action, DiscreteAction)
        if self.discrete:
            self.start, self.n, self.dtype = action.start, action.n_actions, np.int32
        elif isinstance(action, ContinuousAction):
            check = venv._leaf_checks[0][1]
            self.dtype = np.float32
            self.low = jax.device_put(np.ascontiguousarray(check.low), self.device)
            self.high = jax.device_put(np.ascontiguousarray(check.high), self.device)
            self.checked = None if check.checked is None else jax.device_put(np.asarray(check.checked), self.device)
        else:
            raise ValueError(f"device actions serve Discrete and Box actions, not {type(action).__name__}")
        self._bad = jax.jit(self._any_bad)

    def write(self, actions: Any) -> None:
        jax = self.jax
        module = type(actions).__module__
        if module.startswith("torch"):  # torch mode: the same memory as a JAX array (DLPack), then as JAX's
            from marl_vec.vec.device_arrays import torch_to_jax

            actions = torch_to_jax(actions.detach().resolve_conj().resolve_neg().contiguous())
        elif not isinstance(actions, jax.Array):  # numpy: numpy's path, then one copy to the device
            venv = self.venv
            with device_masks_on_host(venv, self.out):
                ActionWriter._write_actions(venv, host_array(actions))
            self.upload(venv.buffers.actions)
            return
        devices = actions.devices()
        if self.device not in devices and any(d.platform != "cpu" for d in devices):
            there = ", ".join(str(d) for d in devices)
            raise ValueError(f"actions are on device {there}, but this VecEnv steps on {self.device}; "
                             f"pass them on {self.device} (or on the CPU)")
        if tuple(actions.shape) != self.shape:
            venv = self.venv
            raise venv._shape_error(types.SimpleNamespace(shape=tuple(actions.shape)), self.shape,
                                    venv._leaf_checks[0][1])
        if self.discrete and np.dtype(actions.dtype).kind not in "iu":
            self._host_check(actions)  # numpy's message for a non-integer dtype
        if self.device not in devices:
            actions = jax.device_put(actions, self.device)
        if self.venv.validate and bool(self._bad(actions, self.out.avail_actions, self.out.agent_mask)):
            self._host_check(actions)
        self.out.actions = actions if actions.dtype == self.dtype else actions.astype(self.dtype)

    def upload(self, actions: np.ndarray) -> None:
        """``actions`` (the host buffer's, checked already) to the device, in the dtype the engine's step reads."""
        self.out.actions = self.jax.device_put(actions.astype(self.dtype), self.device)

    def _any_bad(self, actions: Any, avail: Any, mask: Any) -> Any:
        """Whether some live agent's action is wrong (jitted: one bool on the device)."""
        import jax.numpy as jnp

        if self.discrete:
            index = actions.astype(jnp.int64 if actions.dtype.itemsize == 8 else jnp.int32) - self.start
            outside = (index < 0) | (index >= self.n)
            if avail is not None:
                clipped = jnp.clip(index, 0, self.n - 1).astype(jnp.int32)
                outside |= ~jnp.take_along_axis(avail, clipped[..., None], axis=-1)[..., 0]
            return jnp.any(outside & mask)
        outside = (actions < self.low) | (actions > self.high) | ~jnp.isfinite(actions)
        if self.checked is not None:
            outside &= self.checked
        return jnp.any(outside.reshape(*outside.shape[:2], -1).any(-1) & mask)

    def _host_check(self, actions: Any) -> None:
        """numpy mode's checks on host copies (the error path): they raise numpy's message. The host
        buffers' avail and mask get the device's current ones meanwhile (they are not kept there)."""
        venv, out = self.venv, self.out
        host = np.asarray(actions)
        if self.discrete and host.dtype.kind not in "iu":
            from marl_vec.vec.action_checks import refuse_non_integers

            refuse_non_integers(host, venv.spec.action)
        if not venv.validate:
            return
        with device_masks_on_host(venv, out):
            venv._validate(host)

"""Actions for a batch whose group steps on a device: torch tensors checked and kept on that device.

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
is refused, naming both.

May import: numpy, torch (lazily), ``marl_vec.core.spec``, ``marl_vec.vec.{actions,device_arrays}``.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from marl_vec.core.spec import ContinuousAction, DiscreteAction
from marl_vec.vec.actions import ActionWriter
from marl_vec.vec.device_arrays import host_array


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
            ActionWriter._write_actions(venv, host_array(actions))
            out.actions.copy_(torch.from_numpy(venv.buffers.actions))
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

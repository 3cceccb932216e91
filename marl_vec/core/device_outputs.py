"""DeviceOutputs: a batch's result fields as torch tensors on one device, preallocated once.

One idea: the device twin of `BatchBuffers` that a group whose stepper writes on a
device (`GroupStepper.supports_device`: the VMAS engine) fills instead of the host
buffers, so that a step's results never pass through host memory. Same
``(E, A, ...)`` layout and dtypes as the buffers; ``state`` (and ``final_state``) is a
view of ``obs`` (``final_obs``) where the state is the observations, as in the
buffers; ``acting`` is ``agent_mask`` (simultaneous-move envs only). ``actions`` holds
the step's actions on the device. Single-array observations only.

May import: numpy, torch (lazily), ``marl_vec.core.{buffers,devices}``.

Examples:
    >>> import numpy as np
    >>> from marl_vec.core.spec import EnvSpec, DiscreteAction
    >>> spec = EnvSpec(("a", "b"), (3,), np.float32, (6,), np.float32, DiscreteAction(4), state_is_obs=True)
    >>> out = DeviceOutputs.allocate(BatchBuffers(spec, 2), "cpu")
    >>> tuple(out.obs.shape), tuple(out.state.shape), out.state.data_ptr() == out.obs.data_ptr()
    ((2, 2, 3), (2, 6), True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.devices import torch_device

# The fields a stepper writes (with state, kept by the group), in StepResult's names.
FIELDS = ("actions", "obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
          "final_obs", "final_state", "final_avail_actions", "final_acting")


@dataclasses.dataclass
class DeviceOutputs:
    """The batch's fields on ``device`` (see the module doc); None where the batch has no such field."""

    device: Any  # a torch.device
    actions: Any
    obs: Any
    state: Any
    avail_actions: Any
    agent_mask: Any
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    final_obs: Any
    final_state: Any
    final_avail_actions: Any
    final_acting: Any

    @property
    def acting(self) -> Any:
        """The agents whose actions are read: ``agent_mask`` (simultaneous moves)."""
        return self.agent_mask

    @classmethod
    def allocate(cls, buffers: BatchBuffers, device: Any) -> "DeviceOutputs":
        """Zeros like each of ``buffers``' fields, on ``device``, made once."""
        import torch

        spec = buffers.spec
        if spec.turn_based or not isinstance(buffers.obs, np.ndarray) or not isinstance(buffers.actions, np.ndarray):
            raise ValueError("device outputs serve one observation array, array actions and simultaneous moves")
        device = torch_device(device)
        tensors: dict[str, Any] = {}
        for name in FIELDS:
            array = getattr(buffers, name)
            if array is None or (name in ("state", "final_state") and spec.state_is_obs):
                tensors[name] = None
                continue
            dtype = torch.from_numpy(np.zeros(0, array.dtype)).dtype
            tensors[name] = torch.zeros(array.shape, dtype=dtype, device=device)
        if spec.state_is_obs and buffers.state is not None:  # the same memory, as in the buffers
            tensors["state"] = tensors["obs"].view(buffers.state.shape)
            tensors["final_state"] = tensors["final_obs"].view(buffers.final_state.shape)
        return cls(device=device, **tensors)

    def rows(self, first: int, last: int) -> "DeviceOutputs":
        """Views of envs ``[first, last)`` (a group's share), leading env axis kept."""
        changes = {f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[first:last]
                   for f in dataclasses.fields(self) if f.name != "device"}
        return dataclasses.replace(self, **changes)

    def result_fields(self) -> dict[str, Any]:
        """StepResult's array fields (``acting`` included) that this batch has."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("device", "actions") and getattr(self, f.name) is not None}
        out["acting"] = self.acting
        return out

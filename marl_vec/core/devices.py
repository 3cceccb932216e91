"""Torch devices named as their tensors name them: ``"cuda"`` is ``cuda:<current device>``.

One idea: `torch_device`, the one parse of a torch device that every place comparing devices
uses (the batch's results, its actions' check, VMAS's engine, TorchRL's face), so that a
device given without an index equals the device its tensors report.

May import: torch (lazily).
"""

from __future__ import annotations

from typing import Any


def torch_device(device: Any) -> Any:
    """``device`` (None: the CPU, a string or a ``torch.device``) as a ``torch.device`` with its index,
    for an accelerator: ``"cuda"`` is ``cuda:<current device>``, as torch places a tensor made there.
    Tensors report their device with its index, and ``torch.device("cuda:0") != torch.device("cuda")``:
    a device kept without one would not equal the device of any tensor made on it.

    Examples:
        >>> torch_device(None), torch_device("cpu"), torch_device("meta")
        (device(type='cpu'), device(type='cpu'), device(type='meta'))
    """
    import torch

    parsed = torch.device("cpu" if device is None else device)
    if parsed.index is not None or parsed.type in ("cpu", "meta"):
        return parsed
    if parsed.type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    module = getattr(torch, parsed.type, None)  # mps, xpu, ...: their own current device where they say
    current = getattr(module, "current_device", None)
    return torch.device(parsed.type, current() if callable(current) else 0)

"""``device="cuda"`` without an index names the device its tensors report (``cuda:0``):
``torch.device("cuda:0") != torch.device("cuda")``, so a device kept as given refused every
CUDA action tensor, even one made from the batch's own results (issue 49 item 6).

No GPU is lent here: CUDA is made to look present (``torch.cuda.is_available`` and the
current device patched), the devices are parsed by the real code, and the actions' device
check runs on a CPU tensor that reports ``cuda:0``, as a tensor on the GPU would."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.core.devices import torch_device  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.vec.device_actions import DeviceActions  # noqa: E402
from marl_vec.vec.device_arrays import DeviceArrays  # noqa: E402


class OnCuda0(torch.Tensor):
    """A CPU tensor that reports ``cuda:0``, as every tensor made on the first GPU does."""

    @property
    def device(self):
        return torch.device("cuda:0")


@pytest.fixture
def cuda_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def _vmas(**kwargs):
    pytest.importorskip("vmas")
    fn = make_env_fn("vmas", "balance", {"max_steps": 7, "continuous_actions": False})
    return mv.DummyVecEnv([fn] * 2, env_seed=3, array_backend="torch", **kwargs)


def test_cuda_without_an_index_is_parsed_as_the_current_device(cuda_present):
    assert torch_device("cuda") == torch.device("cuda:0") == torch_device(torch.device("cuda"))
    assert torch_device("cuda:1") == torch.device("cuda:1") and torch_device(None) == torch.device("cpu")
    with _vmas() as venv:
        assert DeviceArrays(venv.buffers, "torch", "cuda").device == torch.device("cuda:0")
    from marl_vec.envs.vmas.catalog import parse_device

    assert parse_device("cuda") == "cuda:0"  # VMAS's engine steps there, and its spec says so
    assert parse_device("cuda", check=False) == "cuda"  # the spec read on the CPU checks nothing


def test_actions_on_cuda_0_are_taken_by_a_batch_built_with_device_cuda(cuda_present):
    with _vmas() as venv:
        r = venv.reset()
        # The batch's outputs as they would be on the GPU: its device parsed from "cuda".
        parsed = DeviceArrays(venv.buffers, "torch", "cuda").device
        outputs = dataclasses.replace(venv._device_group.out, device=parsed)
        writer = DeviceActions(venv, outputs)
        actions = torch.tensor([[1, 2, 0], [3, 4, 1]]).as_subclass(OnCuda0)
        assert actions.device == torch.device("cuda:0") and r.obs.shape[:2] == (2, 3)
        writer.write(actions)
        assert np.array_equal(outputs.actions.numpy(), [[1, 2, 0], [3, 4, 1]])
        on_another = torch.zeros((2, 3), dtype=torch.int64).as_subclass(OnCuda0)
        writer.device = torch.device("cuda:1")
        with pytest.raises(ValueError, match=r"actions are on device cuda:0, but this VecEnv steps on cuda:1"):
            writer.write(on_another)

"""scripts/train/cleanrl_ippo_vmas.py: an IPPO loop on VMAS balance's torch results learns exactly what
the same loop learns on numpy results, and its steps make no host copy of a tensor."""

from __future__ import annotations

import pytest

from tests.helpers.scripts import script_module

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ippo():
    with script_module("cleanrl_ippo_vmas", torch) as module:
        yield module


def small(ippo, array_backend):
    # 4 envs x 16 steps x 3 updates, episodes of 10 steps: every env times out (bootstrapped) 4 times.
    return ippo.Args(num_envs=4, num_steps=16, iterations=3, max_steps=10, array_backend=array_backend)


def test_torch_results_learn_bit_identical_parameters_to_numpy_results(ippo, monkeypatch):
    on_numpy = ippo.train(small(ippo, "numpy"))

    def refuse(self, *args, **kwargs):
        raise AssertionError("a tensor was read to the host on the torch path")

    for name in ("numpy", "__array__"):  # neither the loop nor the batch may call them
        monkeypatch.setattr(torch.Tensor, name, refuse)
    on_torch = ippo.train(small(ippo, "torch"))
    monkeypatch.undo()
    assert len(on_torch.episode_returns) == 16
    assert on_torch.episode_returns == on_numpy.episode_returns
    assert len(on_torch.parameters) == len(on_numpy.parameters) == 13
    for a, b in zip(on_torch.parameters, on_numpy.parameters):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(on_torch.parameters, _initial(ippo)))  # it did learn


def _initial(ippo):
    torch.manual_seed(1)
    return list(ippo.Agent(16, 2).parameters())

"""JaxMARL with ``array_backend="torch"`` and ``reward_dtype="float64"``: float64 reward tensors, the
values of numpy mode's float64 rewards (issue 49 item 5: they silently came back float32, while
numpy mode and ``spec.reward_dtype`` said float64). ``jax`` mode refuses the request with its message."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402


def _rewards(array_backend: str, copy: bool, steps: int = 60) -> tuple[list[np.ndarray], list, object]:
    rng = np.random.default_rng(3)
    fns = [make_env_fn("jaxmarl", "smax/3m", {"device": "cpu"})] * K
    with mv.DummyVecEnv(fns, env_seed=4, array_backend=array_backend, reward_dtype="float64", copy=copy) as venv:
        assert venv.spec.reward_dtype == np.float64
        r = venv.reset()
        rewards, returns = [], []
        for _ in range(steps):
            avail = np.asarray(r.avail_actions)
            actions = np.argmax(rng.random(avail.shape) * avail, axis=-1)
            r = venv.step(torch.from_numpy(actions) if array_backend == "torch" else actions)
            rewards.append(r.reward)
            returns += [info["episode"]["return"] for info in r.infos if "episode" in info]
        return [x.numpy().copy() if isinstance(x, torch.Tensor) else x for x in rewards], returns, r.reward.dtype


@pytest.mark.parametrize("copy", [True, False])
def test_torch_mode_keeps_float64_rewards(copy):
    expected, returns, dtype = _rewards("numpy", True)
    got, got_returns, got_dtype = _rewards("torch", copy)
    assert dtype == np.float64 and got_dtype == torch.float64
    assert all(g.dtype == np.float64 and np.array_equal(g, e) for g, e in zip(got, expected))
    assert got_returns == returns and any(np.any(e != 0) for e in expected)


def test_jax_mode_refuses_float64_without_x64():
    fns = [make_env_fn("jaxmarl", "smax/3m", {"device": "cpu"})] * K
    with pytest.raises(ValueError, match="reward are 64-bit, which JAX keeps only with jax_enable_x64"):
        mv.DummyVecEnv(fns, array_backend="jax", reward_dtype="float64")

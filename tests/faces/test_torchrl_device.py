"""TorchRLEnv over a torch-mode DummyVecEnv (VMAS's engine writing on the device): the same rollouts
as over numpy mode, tensors on the VecEnv's device, and no host transfer on a step."""

from __future__ import annotations

import pytest

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")
pytest.importorskip("torchrl")
torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.compat.torchrl import TorchRLEnv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402

K = 4


def _env(array_backend, continuous=False, copy=True, **face):
    fn = make_env_fn("vmas", "balance", {"max_steps": 6, "continuous_actions": continuous})
    return TorchRLEnv(mv.DummyVecEnv([fn] * K, env_seed=2, array_backend=array_backend, copy=copy), **face)


def _policy(continuous):
    """A fixed policy of the observation (so that the actions follow the rollout's numbers)."""
    def act(td):
        obs = td["agents", "observation"]
        if continuous:
            td["agents", "action"] = torch.tanh(obs[..., :2] * 3.0).to(torch.float32)
        else:
            td["agents", "action"] = (obs.abs().sum(-1) * 1000).long() % 9
        return td
    return act


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert torch.equal(x, y.to(x.device)), key


@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("copy", [True, False])
def test_rollouts_over_torch_mode_equal_numpy_mode(continuous, copy):
    rollouts = {}
    for mode in ("numpy", "torch"):
        env = _env(mode, continuous, copy=copy, agent_mask=True)
        assert env.device == torch.device("cpu")
        td = env.rollout(20, policy=_policy(continuous), break_when_any_done=False)
        assert td.device == env.device
        assert int(td["next", "done"].sum()) >= 2 * K  # episode ends (final observations, resets) included
        rollouts[mode] = td
        env.close()
    _assert_same(rollouts["numpy"], rollouts["torch"])


def test_a_step_passes_the_device_tensors_through_without_a_host_transfer(monkeypatch):
    env = _env("torch")
    td = env.reset()
    policy = _policy(False)

    def refuse(self, *args, **kwargs):
        raise AssertionError("a host transfer on the step path")

    for name in ("numpy", "__array__", "cpu"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    dones = 0
    for _ in range(8):  # max_steps 6: every env ends once on the way
        td = env.step(policy(td))
        assert td["next", "agents", "observation"].device == env.device
        dones += int(td["next", "done"].sum())
        td = td["next"].exclude("done", "terminated", "truncated", ("agents", "done"), ("agents", "terminated"),
                                ("agents", "truncated"), ("agents", "reward"))
    monkeypatch.undo()
    assert dones == K
    env.close()


def test_the_face_takes_the_vecenvs_device_and_refuses_another():
    fn = make_env_fn("vmas", "balance", {"max_steps": 6})
    venv = mv.DummyVecEnv([fn] * 2, array_backend="torch")
    with pytest.raises(ValueError, match=r"passes a torch-mode VecEnv's tensors through on its device cpu; "
                                         r"got device='meta'"):
        TorchRLEnv(venv, device="meta")
    env = TorchRLEnv(venv, device="cpu")
    assert env.device == venv.device == torch.device("cpu")
    env.close()

"""VMAS with ``device=`` and ``DummyVecEnv(array_backend="torch")``: the engine writes its results
on the device (marl_vec.core.device_group), bit-identical to numpy mode, with no host trip.

On the CPU here (device="cpu"); the CUDA test runs where torch has CUDA. Small batches (4 envs)
with short episodes, so that ~60 steps hold several episode ends of every env.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")
torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.envs.vmas.catalog import parse_device  # noqa: E402
from marl_vec.vec.device_arrays import FIELDS, HostOnlyError  # noqa: E402

K = 4
STEPS = 60
# (scenario, kwargs): Discrete balance; Box transport; Discrete simple_adversary, whose agents'
# observations differ in size (zero-padded) and whose episodes end all at once at max_steps.
CASES = {
    "balance_discrete": ("balance", {"max_steps": 9, "continuous_actions": False}),
    "transport_box": ("transport", {"max_steps": 7, "continuous_actions": True}),
    "adversary_discrete": ("simple_adversary", {"max_steps": 6, "continuous_actions": False}),
}
NO_CUDA = not torch.cuda.is_available()


def _fns(case, device="cpu"):
    scenario, kwargs = CASES[case]
    return [make_env_fn("vmas", scenario, {**kwargs, "device": device})] * K


def _actions(rng, spec, avail):
    if spec.discrete:
        return np.argmax(rng.random(avail.shape) * avail, axis=-1).astype(np.int64)
    low = np.broadcast_to(spec.action.low, (K, spec.n_agents, *spec.action.shape))
    high = np.broadcast_to(spec.action.high, low.shape)
    draw = rng.uniform(-1.0, 1.0, low.shape)
    finite = np.isfinite(low) & np.isfinite(high)
    return np.where(finite, np.clip(draw, np.where(finite, low, 0), np.where(finite, high, 0)), 0).astype(np.float32)


def _record(r):
    out = {}
    for name in FIELDS:
        value = getattr(r, name)
        if value is None:
            out[name] = None
        elif isinstance(value, torch.Tensor):
            out[name] = value.clone()
        else:
            out[name] = torch.from_numpy(value.copy())
    out["episodes"] = [(i, info["episode"]["return"], info["episode"]["length"], info["episode"]["agent_returns"].tolist())
                       for i, info in enumerate(r.infos) if "episode" in info]
    return out


def _run(fns, array_backend, autoreset, device=None, copy=True, steps=STEPS):
    """Every field of every result (reset ones too), actions from a seeded generator."""
    rng = np.random.default_rng(7)
    out = []
    kwargs = {} if device is None else {"device": device}
    with mv.DummyVecEnv(fns, env_seed=11, array_backend=array_backend, autoreset=autoreset, copy=copy,
                        **kwargs) as venv:
        if array_backend == "torch":
            assert venv._device_group is not None  # the engine's device path, not host buffers + copies
        r = venv.reset()
        out.append(_record(r))
        for t in range(steps):
            done = np.asarray(out[-1]["done"].cpu())
            if t == 4:  # env 1 alone: from now on its episodes end on steps of their own
                r = venv.reset(env_ids=[1])
            elif autoreset == "disabled" and done.any():
                r = venv.reset(env_ids=np.flatnonzero(done).tolist())
            else:
                avail = None if r.avail_actions is None else np.asarray(out[-1]["avail_actions"].cpu())
                actions = _actions(rng, venv.spec, avail)
                r = venv.step(torch.from_numpy(actions).to(venv.device) if array_backend == "torch" else actions)
            out.append(_record(r))
    return out


def _assert_same(numpy_run, torch_run, device="cpu"):
    assert len(numpy_run) == len(torch_run)
    ends = 0
    for t, (x, y) in enumerate(zip(numpy_run, torch_run)):
        assert x["episodes"] == y["episodes"], t
        ends += len(x["episodes"])
        for name in FIELDS:
            if x[name] is None:
                assert y[name] is None, (t, name)
                continue
            assert y[name].device == torch.device(device), (t, name)
            got = y[name].cpu()
            assert got.dtype == x[name].dtype and got.shape == x[name].shape, (t, name)
            assert torch.equal(got, x[name]), (t, name)
    assert ends >= 3 * K  # several episode ends of every env were compared


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("case", list(CASES))
def test_torch_results_written_on_the_device_equal_numpy_mode(case, autoreset):
    fns = _fns(case)
    _assert_same(_run(fns, "numpy", autoreset), _run(fns, "torch", autoreset))


def test_copy_false_gives_the_same_numbers_in_the_same_tensors_every_step():
    fns = _fns("balance_discrete")
    reference = _run(fns, "numpy", "same_step", copy=False)
    _assert_same(reference, _run(fns, "torch", "same_step", copy=False))
    rng = np.random.default_rng(0)
    with mv.DummyVecEnv(fns, array_backend="torch", copy=False) as venv:
        r = venv.reset()
        pointers = {name: getattr(r, name).data_ptr() for name in FIELDS if getattr(r, name) is not None}
        assert set(pointers) >= {"obs", "state", "reward", "done", "final_obs", "final_state", "avail_actions"}
        for _ in range(25):
            r = venv.step(torch.from_numpy(rng.integers(0, 9, (K, 3))))
            assert {name: getattr(r, name).data_ptr() for name in pointers} == pointers
        # Not the host buffers: those stay as the block's construction left them (no host trip).
        assert r.obs.data_ptr() != venv.buffers.obs.ctypes.data
        assert not venv.buffers.obs.any() and not venv.buffers.reward.any() and not venv.buffers.done.any()


def test_copy_true_hands_out_fresh_tensors_that_never_change():
    with mv.DummyVecEnv(_fns("balance_discrete"), array_backend="torch") as venv:
        first = venv.reset()
        kept = {name: getattr(first, name).clone() for name in FIELDS if getattr(first, name) is not None}
        later = venv.step(torch.ones((K, 3), dtype=torch.int64))
        assert first.obs.data_ptr() != later.obs.data_ptr()
        for _ in range(20):
            venv.step(torch.ones((K, 3), dtype=torch.int64))
        assert all(torch.equal(getattr(first, name), value) for name, value in kept.items())


@pytest.mark.parametrize("case", ["balance_discrete", "transport_box"])
def test_no_host_transfer_on_any_step(monkeypatch, case):
    """Tensor.numpy, __array__ and .cpu raise while stepping, episode ends included."""
    fns = _fns(case)
    with mv.DummyVecEnv(fns, array_backend="torch", copy=False) as venv:
        r = venv.reset()
        spec = venv.spec
        rng = np.random.default_rng(1)
        avail = None if r.avail_actions is None else r.avail_actions.numpy().copy()
        actions = [torch.from_numpy(_actions(rng, spec, avail)) for _ in range(30)]

        def refuse(self, *args, **kwargs):
            raise AssertionError("a host transfer on the step path")

        for name in ("numpy", "__array__", "cpu"):
            monkeypatch.setattr(torch.Tensor, name, refuse)
        ends = 0
        for a in actions:
            r = venv.step(a)
            ends += int(r.done.sum())
        monkeypatch.undo()
    assert ends >= K  # the episode ends (resets, final_*, summaries) ran without a host transfer too


def _message(venv, actions):
    with pytest.raises(ValueError) as info:
        venv.step(actions)
    return str(info.value)


def test_bad_actions_get_numpy_modes_messages_and_step_nothing():
    fns = _fns("balance_discrete")
    with mv.DummyVecEnv(fns, env_seed=0) as host, mv.DummyVecEnv(fns, env_seed=0, array_backend="torch") as dev:
        host.reset()
        dev.reset()
        good = np.zeros((K, 3), dtype=np.int64)
        bad = {"shape": np.zeros((K, 2), dtype=np.int64), "high": good.copy(), "negative": good.copy(),
               "float": good.astype(np.float32)}
        bad["high"][2, 1] = 9
        bad["negative"][0, 2] = -1
        for kind, actions in bad.items():
            expected = _message(host, actions)
            assert _message(dev, torch.from_numpy(actions)) == expected, kind
        assert "for env 2, agent 'agent_1' is out of range; allowed: 0..8" in _message(dev, torch.from_numpy(bad["high"]))
        with pytest.raises(ValueError, match=r"actions are on device meta, but this VecEnv steps on cpu"):
            dev.step(torch.zeros((K, 3), dtype=torch.int64, device="meta"))
        # The refused steps stepped nothing: both batches go on alike.
        assert torch.equal(dev.step(torch.from_numpy(good)).obs, torch.from_numpy(host.step(good).obs))


def test_bad_box_actions_get_numpy_modes_messages():
    fns = _fns("transport_box")
    with mv.DummyVecEnv(fns) as host, mv.DummyVecEnv(fns, array_backend="torch") as dev:
        host.reset(), dev.reset()
        shape = (K, host.spec.n_agents, *host.spec.action.shape)
        for value in (5.0, float("nan")):
            actions = np.zeros(shape, dtype=np.float32)
            actions[1, 3, 0] = value
            expected = _message(host, actions)
            assert "for env 1, agent 'agent_3'" in expected
            assert _message(dev, torch.from_numpy(actions)) == expected
        # numpy actions are taken too: numpy's checks, then one copy to the device
        ok = np.full(shape, 0.25, dtype=np.float32)
        assert torch.equal(dev.step(ok).obs, torch.from_numpy(host.step(ok).obs))


def test_parse_device():
    assert parse_device("cpu") == "cpu" and parse_device(torch.device("cpu")) == "cpu"
    assert parse_device("cuda:1", check=False) == "cuda:1"
    with pytest.raises(ValueError, match=r"VMAS device='gpu0' is not a torch device \(e.g. 'cpu', 'cuda', 'cuda:0'\)"):
        parse_device("gpu0")


@pytest.mark.skipif(not NO_CUDA, reason="this torch has CUDA")
def test_a_cuda_device_without_cuda_is_one_clear_error():
    message = r"VMAS device='cuda:0': torch \S+ has no CUDA here; available: cpu"
    with pytest.raises(ValueError, match=message):
        mv.DummyVecEnv(_fns("balance_discrete", device="cuda:0"), array_backend="torch")
    with pytest.raises(ValueError, match=message):  # vec.device reaches the env's device
        mv.make({"env": {"family": "vmas", "id": "balance"}, "vec": {"backend": "dummy", "array_backend": "torch",
                                                                      "device": "cuda:0"}}, num_envs=2)


def test_a_config_runs_vmas_on_vec_device():
    cfg = {"env": {"family": "vmas", "id": "balance", "kwargs": {"max_steps": 9, "continuous_actions": False}},
           "vec": {"backend": "dummy", "array_backend": "torch", "device": "cpu", "env_seed": 11}}
    with mv.make(cfg, num_envs=K) as venv:
        assert venv._device_group is not None and venv.device == torch.device("cpu")
        assert venv.group.adapters[0].model.options["device"] == "cpu"
        r = venv.reset()
    reference = _run(_fns("balance_discrete"), "numpy", "same_step", steps=0)
    assert torch.equal(r.obs, reference[0]["obs"])


def test_process_backends_refuse_envs_on_a_device_and_serve_the_cpu():
    with pytest.raises(HostOnlyError, match=r"^SubprocVecEnv keeps results in host memory, but the envs \(vmas/balance\) "
                                            r"compute on device 'cuda:0'; use DummyVecEnv\(array_backend='torch'\)"):
        mv.SubprocVecEnv(_fns("balance_discrete", device="cuda:0"), num_workers=2)
    with mv.SubprocVecEnv(_fns("balance_discrete"), num_workers=2, env_seed=11) as venv:
        r = venv.reset()
    assert isinstance(r.obs, np.ndarray)
    assert torch.equal(torch.from_numpy(r.obs), _run(_fns("balance_discrete"), "numpy", "same_step", steps=0)[0]["obs"])


def test_modes_and_options_the_device_path_does_not_serve_fall_back_to_the_host_path():
    fns = _fns("balance_discrete")
    with mv.DummyVecEnv(fns, array_backend="torch", restart_on_error=1) as venv:
        assert venv._device_group is None  # host buffers + one copy per field, as for every other family
        venv.reset()
        assert isinstance(venv.step(torch.zeros((K, 3), dtype=torch.int64)).obs, torch.Tensor)


@pytest.mark.skipif(NO_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("case", list(CASES))
def test_on_cuda_torch_results_equal_numpy_mode_of_the_same_device(case, autoreset):
    fns = _fns(case, device="cuda:0")  # numpy mode: VMAS on CUDA, results copied to the host buffers
    _assert_same(_run(fns, "numpy", autoreset), _run(fns, "torch", autoreset), device="cuda:0")

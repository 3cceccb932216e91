"""``array_backend="torch"`` / ``"jax"`` on the CPU: the same numbers as numpy mode, the buffers
handed out without a copy (copy=False), no host conversion on the hot path, clear refusals.

VMAS balance in a batch of 4 (max_steps 7: several episode ends) and SMAX 3m in blocks of 4
(the JaxMARL family tests' shape, so JAX's persistent cache compiles it once).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import Reference  # noqa: F401  # first: it sets XLA_FLAGS before JAX starts

torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.vec.device_arrays import FIELDS, jax_to_torch, torch_to_jax  # noqa: E402

K = 4


def _vmas(**kwargs):
    pytest.importorskip("vmas")
    fn = make_env_fn("vmas", "balance", {"max_steps": 7, "continuous_actions": False})
    return mv.DummyVecEnv([fn] * K, env_seed=3, **kwargs)


def _smax(**kwargs):
    pytest.importorskip("jaxmarl")
    return mv.DummyVecEnv([make_env_fn("jaxmarl", "smax/3m")] * K, env_seed=5, **kwargs)


def _as_numpy(value):
    if value is None or isinstance(value, list):
        return value
    if isinstance(value, torch.Tensor):
        return value.numpy().copy()
    return np.array(value)


def _run(make, array_backend, autoreset, steps, copy=True):
    """Every array field of every result, as numpy; actions drawn from the available ones."""
    rng = np.random.default_rng(0)
    out = []
    with make(array_backend=array_backend, autoreset=autoreset, copy=copy) as venv:
        r = venv.reset()
        for t in range(steps):
            out.append({name: _as_numpy(getattr(r, name)) for name in FIELDS})
            out[-1]["returns"] = [i["episode"]["return"] for i in r.infos if "episode" in i]
            avail = _as_numpy(r.avail_actions)
            if autoreset == "disabled" and _as_numpy(r.done).any():
                r = venv.reset(env_ids=np.flatnonzero(_as_numpy(r.done)).tolist())
                continue
            actions = np.argmax(rng.random(avail.shape) * avail, axis=-1)
            if array_backend == "torch":
                actions = torch.from_numpy(actions)
            elif array_backend == "jax":
                import jax.numpy as jnp

                actions = jnp.asarray(actions.astype(np.int32))
            r = venv.step(actions)
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    ends = 0
    for t, (x, y) in enumerate(zip(a, b)):
        for name in x:
            if x[name] is None:
                assert y[name] is None, (t, name)
            elif name == "returns":
                assert x[name] == y[name], (t, name)
            else:
                assert x[name].dtype == y[name].dtype and x[name].shape == y[name].shape, (t, name)
                assert np.array_equal(x[name], y[name]), (t, name)
        ends += int(x["done"].sum())
    assert ends >= 2  # several episode ends were compared


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("array_backend", ["torch", "jax"])
def test_vmas_torch_and_jax_results_equal_numpy_mode(array_backend, autoreset):
    _assert_same(_run(_vmas, "numpy", autoreset, 20), _run(_vmas, array_backend, autoreset, 20))


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
def test_jaxmarl_torch_and_jax_results_equal_numpy_mode(autoreset):
    reference = _run(_smax, "numpy", autoreset, 110)
    _assert_same(reference, _run(_smax, "jax", autoreset, 110))
    _assert_same(reference, _run(_smax, "torch", autoreset, 110))


@pytest.mark.parametrize("autoreset", ["same_step", "next_step", "disabled", "one_episode"])
def test_a_family_not_batched_gets_the_same_numbers_in_every_autoreset_mode(autoreset):
    import gymnasium as gym

    def make(**kwargs):
        return mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3, env_seed=1, reward_dtype="float32", **kwargs)

    if autoreset == "one_episode":
        steps = 60
    else:
        steps = 80
    reference = _run(make, "numpy", autoreset, steps)
    _assert_same(reference, _run(make, "torch", autoreset, steps))
    _assert_same(reference, _run(make, "jax", autoreset, steps))


def test_copy_false_hands_out_the_preallocated_buffers_at_every_step():
    with _vmas(array_backend="torch", copy=False) as venv:
        r = venv.reset()
        pointers = {name: getattr(r, name).data_ptr() for name in FIELDS if getattr(r, name) is not None}
        for _ in range(10):
            r = venv.step(torch.zeros((K, 3), dtype=torch.int64))
            assert {name: getattr(r, name).data_ptr() for name in pointers} == pointers
        # VMAS's engine writes torch results itself (tests/families/test_vmas_device.py), not the buffers.
        assert r.obs.data_ptr() != venv.buffers.obs.ctypes.data
    import gymnasium as gym

    with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * K, array_backend="torch", copy=False) as venv:
        r = venv.reset()
        pointer = r.obs.data_ptr()
        for _ in range(10):
            r = venv.step(torch.zeros((K, 1), dtype=torch.int64))
            assert r.obs.data_ptr() == pointer
        assert r.obs.data_ptr() == venv.buffers.obs.ctypes.data  # a family on the host: the batch buffer itself
    with _vmas(array_backend="jax", copy=False) as venv:
        r = venv.reset()
        pointers = {name: getattr(r, name).unsafe_buffer_pointer() for name in FIELDS if getattr(r, name) is not None}
        for _ in range(10):
            r = venv.step(np.zeros((K, 3), dtype=np.int64))
            assert {name: getattr(r, name).unsafe_buffer_pointer() for name in pointers} == pointers
        assert r.obs.unsafe_buffer_pointer() == venv.buffers.obs.ctypes.data


def test_copy_true_results_are_fresh_and_never_change():
    with _vmas(array_backend="torch") as venv:
        first = venv.reset()
        kept = first.obs.clone()
        second = venv.step(torch.ones((K, 3), dtype=torch.int64))
        assert first.obs.data_ptr() != second.obs.data_ptr() != venv.buffers.obs.ctypes.data
        venv.step(torch.ones((K, 3), dtype=torch.int64))
        assert torch.equal(first.obs, kept)


def test_the_hot_path_converts_nothing_through_numpys_array_protocol(monkeypatch):
    """Torch actions in, torch results out: ``Tensor.__array__`` (a host conversion) never runs."""
    calls = []
    original = torch.Tensor.__array__

    def counting(self, *args, **kwargs):
        calls.append(tuple(self.shape))
        return original(self, *args, **kwargs)

    with _vmas(array_backend="torch", copy=False) as venv:
        venv.reset()
        actions = torch.zeros((K, 3), dtype=torch.int64)
        monkeypatch.setattr(torch.Tensor, "__array__", counting)
        for _ in range(10):
            r = venv.step(actions)
        monkeypatch.undo()
    assert calls == [] and isinstance(r.reward, torch.Tensor)


def test_dlpack_moves_between_torch_and_jax_without_a_copy():
    pytest.importorskip("jax")
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    array = torch_to_jax(tensor)
    assert array.unsafe_buffer_pointer() == tensor.data_ptr()
    back = jax_to_torch(array)
    assert back.data_ptr() == tensor.data_ptr() and torch.equal(back, tensor)


def test_where_it_cannot_work_it_says_so():
    import gymnasium as gym

    fns = [lambda: gym.make("CartPole-v1")] * 2
    with pytest.raises(ValueError, match="array_backend must be one of numpy, torch, jax; got 'cupy'"):
        mv.DummyVecEnv(fns, array_backend="cupy")
    with pytest.raises(ValueError, match="needs array_backend='torch' or 'jax'"):
        mv.DummyVecEnv(fns, device="cuda:0")
    with pytest.raises(ValueError, match="reward are 64-bit.*reward_dtype='float32'"):
        mv.DummyVecEnv(fns, array_backend="jax")  # gymnasium's float64 reward
    for backend in ("subproc", "ray"):
        with pytest.raises(ValueError, match="use DummyVecEnv for torch or JAX results on a device"):
            mv.make_vec(fns, backend=backend, array_backend="torch", device="cuda:0")


def test_configs_take_vec_array_backend():
    pytest.importorskip("vmas")
    cfg = {"env": {"family": "vmas", "id": "balance", "kwargs": {"max_steps": 7}}}
    with mv.make(cfg, num_envs=2, array_backend="torch") as venv:
        assert isinstance(venv.reset().obs, torch.Tensor)
    with pytest.raises(Exception, match="DummyVecEnv"):
        mv.make(cfg, num_envs=2, backend="subproc", array_backend="torch")


def test_the_torchrl_face_takes_numpy_and_torch_modes_not_jax():
    pytest.importorskip("torchrl")
    pytest.importorskip("jax")
    import gymnasium as gym

    from marl_vec.compat.torchrl import TorchRLEnv

    venv = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, array_backend="jax", reward_dtype="float32")
    with pytest.raises(ValueError, match="TorchRLEnv takes a VecEnv with array_backend 'numpy' or 'torch', got 'jax'"):
        TorchRLEnv(venv)
    venv.close()
    env = TorchRLEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, array_backend="torch"))
    assert env.device == torch.device("cpu") and env.rollout(3)["next", "agents", "reward"].shape == (2, 3, 1, 1)
    env.close()

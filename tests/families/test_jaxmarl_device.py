"""JaxMARL with ``device=`` and ``DummyVecEnv(array_backend="jax" / "torch")``: the engine makes its
results on the device (marl_vec.core.jax_device), bit-identical to numpy mode, with no host trip.

On the CPU here (device="cpu"); the GPU test runs where JAX has one. Blocks of ``K`` = 4 envs of
SMAX 3m and MPE simple_spread, the shapes of the other JaxMARL tests (JAX's persistent cache
compiles each once), over enough steps for several episode ends of every env.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.envs.jaxmarl.catalog import jax_device, parse_device  # noqa: E402
from marl_vec.envs.jaxmarl.engine import make_jaxmarl  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.vec.device_arrays import FIELDS, HostOnlyError  # noqa: E402

# (id, kwargs, steps): SMAX's units die (agent_mask, avail change) and battles end at different
# steps; MPE's episodes end all at once at 25 steps (fixed avail, no state of its own).
CASES = {"smax_3m": ("smax/3m", {}, 110), "mpe_spread": ("jax_mpe/simple_spread", {}, 60)}
ROOT = str(Path(__file__).resolve().parents[2])  # the repository: a subprocess imports this marl_vec
BOX = ("jax_mpe/simple_spread", {"action_type": "Continuous"})  # tests/families/test_jaxmarl_box.py's shapes
try:
    GPU = jax.devices("gpu")
except RuntimeError:
    GPU = []


def _fns(case, device="cpu"):
    env_id, kwargs, _ = CASES[case]
    return [make_env_fn("jaxmarl", env_id, {**kwargs, "device": device})] * K


def _numpy(value):
    if value is None:
        return None
    return value.cpu().numpy().copy() if isinstance(value, torch.Tensor) else np.array(value)


def _record(r):
    out = {name: _numpy(getattr(r, name)) for name in FIELDS}
    out["types"] = {name: type(getattr(r, name)) for name in FIELDS if getattr(r, name) is not None}
    out["where"] = {name: (getattr(r, name).device.type if isinstance(getattr(r, name), torch.Tensor)
                           else next(iter(getattr(r, name).devices())).platform) for name in FIELDS
                    if getattr(r, name) is not None and not isinstance(getattr(r, name), np.ndarray)}
    out["episodes"] = [(i, info["episode"]["return"], info["episode"]["length"],
                        info["episode"]["agent_returns"].tolist(),
                        {key: value for key, value in info["episode"].items()
                         if key not in ("return", "length", "agent_returns")})
                       for i, info in enumerate(r.infos) if "episode" in info]
    return out


def _actions(rng, avail, array_backend):
    actions = np.argmax(rng.random(avail.shape) * avail, axis=-1)
    if array_backend == "jax":
        return jnp.asarray(actions.astype(np.int32))
    if array_backend == "torch":
        return torch.from_numpy(actions)
    return actions


def _run(fns, array_backend, autoreset, steps, copy=True):
    """Every field of every result (reset ones too), actions drawn from the available ones."""
    rng = np.random.default_rng(7)
    out = []
    with mv.DummyVecEnv(fns, env_seed=11, array_backend=array_backend, autoreset=autoreset, copy=copy) as venv:
        if array_backend != "numpy":
            assert venv._device_group is not None  # the engine's device path, not host buffers + copies
        r = venv.reset()
        out.append(_record(r))
        for t in range(steps):
            done = out[-1]["done"]
            if t == 4:  # env 1 alone: from now on its episodes end on steps of their own
                r = venv.reset(env_ids=[1])
            elif autoreset == "disabled" and done.any():
                r = venv.reset(env_ids=np.flatnonzero(done).tolist())
            else:
                r = venv.step(_actions(rng, out[-1]["avail_actions"], array_backend))
            out.append(_record(r))
    return out


def _assert_same(numpy_run, other, kind, where="cpu"):
    assert len(numpy_run) == len(other)
    ends = 0
    for t, (x, y) in enumerate(zip(numpy_run, other)):
        assert x["episodes"] == y["episodes"], t  # returns (float64 sums), lengths, SMAX's stats
        ends += len(x["episodes"])
        for name in FIELDS:
            if x[name] is None:
                assert y[name] is None, (t, name)
                continue
            assert issubclass(y["types"][name], kind) and y["where"][name] == where, (t, name)
            assert y[name].dtype == x[name].dtype and y[name].shape == x[name].shape, (t, name)
            assert np.array_equal(y[name], x[name]), (t, name)
    assert ends >= 2 * K  # several episode ends of every env were compared


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("case", list(CASES))
def test_jax_and_torch_results_made_on_the_device_equal_numpy_mode(case, autoreset):
    fns, steps = _fns(case), CASES[case][2]
    reference = _run(fns, "numpy", autoreset, steps)
    _assert_same(reference, _run(fns, "jax", autoreset, steps), jax.Array)
    _assert_same(reference, _run(fns, "torch", autoreset, steps), torch.Tensor)


def test_copy_false_hands_out_the_engines_own_arrays():
    fns = _fns("smax_3m")
    _assert_same(_run(fns, "numpy", "same_step", 110, copy=False), _run(fns, "jax", "same_step", 110, copy=False),
                 jax.Array)
    rng = np.random.default_rng(0)
    with mv.DummyVecEnv(fns, array_backend="jax", copy=False) as venv, \
            mv.DummyVecEnv(fns, array_backend="torch", copy=False) as tvenv:
        r, tr = venv.reset(), tvenv.reset()
        for _ in range(12):
            own = venv._device_group.out.arrays
            # The engine's current arrays themselves (JAX arrays are never changed in place: each
            # step makes new ones, and nothing is donated, so a result held stays valid).
            assert all(getattr(r, name) is own[name] for name in own)
            assert r.acting is own["agent_mask"]
            # torch: tensors over the engine's memory (DLPack), no copy
            town = tvenv._device_group.out.arrays
            assert all(getattr(tr, name).data_ptr() == town[name].unsafe_buffer_pointer() for name in town)
            actions = _actions(rng, np.array(r.avail_actions), "jax")
            r, tr = venv.step(actions), tvenv.step(torch.from_numpy(np.array(actions)))
        # Not the host buffers: those stay as the block's construction left them (no host trip).
        assert not venv.buffers.obs.any() and not venv.buffers.reward.any() and not venv.buffers.done.any()


def test_copy_true_results_share_memory_with_nothing_the_engine_keeps():
    rng = np.random.default_rng(0)
    for array_backend in ("jax", "torch"):
        with mv.DummyVecEnv(_fns("smax_3m"), array_backend=array_backend) as venv:
            first = venv.reset()
            kept = {name: _numpy(getattr(first, name)) for name in FIELDS if getattr(first, name) is not None}
            for _ in range(30):
                r = venv.step(_actions(rng, _numpy(first.avail_actions), array_backend))
                own = {a.unsafe_buffer_pointer() for a in venv._device_group.out.arrays.values()}
                ptrs = [(getattr(r, n).data_ptr() if array_backend == "torch" else getattr(r, n).unsafe_buffer_pointer())
                        for n in kept]
                assert len(set(ptrs)) == len(ptrs) and not own & set(ptrs)  # one fresh array per field
            assert all(np.array_equal(_numpy(getattr(first, name)), value) for name, value in kept.items())


def _spy_host_reads(monkeypatch):
    """Every distinct JAX array read to the host, as (shape, dtype): through ``ArrayImpl._value``
    (``__array__``, ``jax.device_get``, ``bool``, ``tolist``, ``item``) or given to numpy's
    converters (on the CPU, ``numpy.asarray`` reads a JAX array by the buffer protocol, which no
    Python hook sees: the converters are watched instead)."""
    from jax._src.array import ArrayImpl

    seen: dict[int, tuple] = {}
    kept = []  # the arrays read, alive: their ids stay theirs

    def record(value):
        if isinstance(value, jax.Array) and id(value) not in seen:
            seen[id(value)] = (tuple(value.shape), np.dtype(value.dtype))
            kept.append(value)

    original = ArrayImpl._value

    def value(self):
        record(self)
        return original.fget(self)

    monkeypatch.setattr(ArrayImpl, "_value", property(value))
    for name in ("asarray", "array", "asanyarray", "ascontiguousarray", "copyto", "from_dlpack"):
        def spy(*args, _convert=getattr(np, name), **kwargs):
            for arg in args:
                record(arg)
            return _convert(*args, **kwargs)

        monkeypatch.setattr(np, name, spy)
    return seen


@pytest.mark.parametrize("validate", [True, False])
def test_no_result_field_goes_to_the_host(monkeypatch, validate):
    """Per step: one read of the (2, K) ended flags, and with validate one of one bool (the action
    check). Where episodes end: their rewards (float64 returns are summed on the host) and SMAX's
    stats. Never an observation, state, avail or mask, torch's host conversions neither."""
    rng = np.random.default_rng(1)
    with mv.DummyVecEnv(_fns("smax_3m"), array_backend="jax", copy=False, validate=validate, env_seed=2) as venv:
        r = venv.reset()
        n_agents = venv.spec.n_agents
        dones = []
        reads = _spy_host_reads(monkeypatch)
        for _ in range(100):
            # Available actions chosen on the device: the test itself moves nothing to the host.
            key = jax.random.PRNGKey(len(dones))
            actions = jnp.argmax(jax.random.uniform(key, r.avail_actions.shape) * r.avail_actions, -1).astype(jnp.int32)
            r = venv.step(actions)
            dones.append(r.done)
        monkeypatch.undo()
    ends = int(np.array(jnp.stack(dones)).sum())
    assert ends >= K
    reads = list(reads.values())
    flags, checks = ((2, K), np.dtype(bool)), ((), np.dtype(bool))
    assert reads.count(flags) == 100 and reads.count(checks) == (100 if validate else 0)
    others = [read for read in reads if read not in (flags, checks)]
    assert set(others) <= {((K, n_agents), np.dtype(np.float32)), ((K, 3), np.dtype(np.float32))}
    assert others  # the episode ends' rewards and stats


def _message(venv, actions):
    with pytest.raises(ValueError) as info:
        venv.step(actions)
    return str(info.value)


def test_bad_jax_actions_get_numpy_modes_messages_and_step_nothing():
    fns = _fns("smax_3m")
    with mv.DummyVecEnv(fns, env_seed=0) as host, mv.DummyVecEnv(fns, env_seed=0, array_backend="jax") as dev:
        r = host.reset()
        dev.reset()
        stop = np.full((K, 3), 4, dtype=np.int32)  # SMAX's "stop": always available
        host.step(stop), dev.step(jnp.asarray(stop))
        r = host.step(stop)
        dev.step(jnp.asarray(stop))
        unavailable = stop.copy()
        env, agent = map(int, np.argwhere(r.agent_mask)[0])
        unavailable[env, agent] = int(np.flatnonzero(~r.avail_actions[env, agent])[0])
        bad = {"shape": np.zeros((K, 2), dtype=np.int32), "high": stop.copy(), "negative": stop.copy(),
               "float": stop.astype(np.float32), "unavailable": unavailable}
        bad["high"][2, 1] = 8
        bad["negative"][0, 2] = -1
        for kind, actions in bad.items():
            expected = _message(host, actions)
            assert _message(dev, jnp.asarray(actions)) == expected, kind
            assert _message(dev, torch.from_numpy(actions)) == expected, kind  # torch in jax mode: numpy's path
        assert "for env 2, agent 'ally_1' is out of range; allowed: 0..7" in _message(dev, jnp.asarray(bad["high"]))
        # The refused steps stepped nothing: both batches go on alike.
        np.testing.assert_array_equal(np.array(dev.step(jnp.asarray(stop)).obs), host.step(stop).obs)


def test_bad_box_actions_get_numpy_modes_messages():
    fns = [make_env_fn("jaxmarl", BOX[0], {**BOX[1], "device": "cpu"})] * K
    with mv.DummyVecEnv(fns) as host, mv.DummyVecEnv(fns, array_backend="jax") as dev:
        host.reset(), dev.reset()
        shape = (K, host.spec.n_agents, *host.spec.action.shape)
        for value in (5.0, float("nan")):
            actions = np.zeros(shape, dtype=np.float32)
            actions[1, 2, 0] = value
            expected = _message(host, actions)
            assert "for env 1, agent 'agent_2'" in expected
            assert _message(dev, jnp.asarray(actions)) == expected
        ok = np.full(shape, 0.25, dtype=np.float32)
        np.testing.assert_array_equal(np.array(dev.step(jnp.asarray(ok)).obs), host.step(ok).obs)


def test_device_names():
    assert parse_device("cpu") == parse_device("cpu:0") == parse_device(jax.devices("cpu")[0]) == "cpu"
    assert parse_device("gpu") == parse_device("cuda") == "cuda:0" and parse_device("gpu:1") == "cuda:1"
    assert parse_device(None) is None and jax_device("cpu") == jax.devices("cpu")[0]
    with pytest.raises(ValueError, match=r"^JaxMARL device='gpu0' is not a JAX device; allowed: 'cpu', 'gpu', "
                                         r"'cuda', 'cuda:<i>', 'gpu:<i>', 'tpu', 'tpu:<i>' or a jax.Device$"):
        make_jaxmarl("jax_mpe/simple_spread", device="gpu0")


@pytest.mark.skipif(bool(GPU), reason="JAX has a GPU here")
def test_a_device_jax_does_not_have_is_one_clear_line_before_compiling():
    message = rf"^JaxMARL device='cuda:0': JAX {jax.__version__} has no such device here; it sees: cpu:0$"
    with pytest.raises(ValueError, match=message):
        mv.DummyVecEnv(_fns("mpe_spread", device="gpu"), array_backend="jax")
    with pytest.raises(ValueError, match=message):  # vec.device reaches the env's device
        mv.make({"env": {"family": "jaxmarl", "id": "jax_mpe/simple_spread"},
                 "vec": {"backend": "dummy", "array_backend": "jax", "device": "cuda:0"}}, num_envs=K)


def test_a_config_runs_jaxmarl_on_vec_device():
    for array_backend in ("jax", "torch"):
        cfg = {"env": {"family": "jaxmarl", "id": "jax_mpe/simple_spread"},
               "vec": {"backend": "dummy", "array_backend": array_backend, "device": "cpu", "env_seed": 11}}
        with mv.make(cfg, num_envs=K) as venv:
            assert venv._device_group is not None and venv.group.adapters[0].model.device == "cpu"
            r = venv.reset()
        assert np.array_equal(_numpy(r.obs), _run(_fns("mpe_spread"), "numpy", "same_step", 0)[0]["obs"])


def test_process_backends_refuse_jaxmarl_on_a_device_and_serve_the_cpu():
    expected = (r"^SubprocVecEnv keeps results in host memory, but the envs \(jaxmarl/jax_mpe/simple_spread\) "
                r"compute on device 'cuda:0'; use DummyVecEnv\(array_backend='torch'\) for device results "
                r"\(or 'jax', for a JAX engine: JaxMARL\)")
    with pytest.raises(HostOnlyError, match=expected):
        mv.SubprocVecEnv(_fns("mpe_spread", device="cuda:0"), num_workers=2)
    with mv.SubprocVecEnv(_fns("mpe_spread"), num_workers=2, env_seed=11) as venv:
        r = venv.reset()
    assert isinstance(r.obs, np.ndarray)
    assert np.array_equal(r.obs, _run(_fns("mpe_spread"), "numpy", "same_step", 0)[0]["obs"])


# Slow (~17 s): test_process_backends_refuse_jaxmarl_on_a_device_and_serve_the_cpu covers the refusal
# by a process backend, tests/backends/test_ray.py::test_envs_on_a_device_are_refused_naming_dummyvecenv Ray's.
@pytest.mark.slow
def test_ray_refuses_jaxmarl_on_a_device():
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from marl_vec.vec.ray import RayVecEnv

    with pytest.raises(HostOnlyError, match=r"^RayVecEnv keeps results in host memory, but the envs "
                                            r"\(jaxmarl/jax_mpe/simple_spread\) compute on device 'cuda:0'"):
        RayVecEnv(_fns("mpe_spread", device="cuda:0")[:2], ray_config={"num_workers": 1})


def test_modes_the_device_path_does_not_serve_fall_back_to_the_host_path():
    with mv.DummyVecEnv(_fns("mpe_spread"), array_backend="jax", restart_on_error=1) as venv:
        assert venv._device_group is None  # host buffers + one copy per field, as for every other family
        venv.reset()
        assert isinstance(venv.step(jnp.zeros((K, 3), dtype=jnp.int32)).obs, jax.Array)


@pytest.mark.skipif(not GPU, reason="needs JAX with a GPU")
@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("case", list(CASES))
def test_on_a_gpu_results_equal_numpy_mode_of_the_same_device(case, autoreset):
    fns, steps = _fns(case, device="gpu"), CASES[case][2]  # numpy mode: JaxMARL on the GPU, results to the host
    reference = _run(fns, "numpy", autoreset, steps)
    for array_backend, kind, where in (("jax", jax.Array, "gpu"), ("torch", torch.Tensor, "cuda")):
        _assert_same(reference, _run(fns, array_backend, autoreset, steps), kind, where)


OFF_DEFAULT = """
import numpy as np, jax, jax.numpy as jnp
import marl_vec as mv
from marl_vec.envs.registry import make_env_fn
from marl_vec.vec.device_arrays import FIELDS
K = 4
fns = [make_env_fn("jaxmarl", "jax_mpe/simple_spread", {"device": "cpu:1"})] * K
second = jax.devices("cpu")[1]
def run(ab):
    rng = np.random.default_rng(3); out = []
    with mv.DummyVecEnv(fns, env_seed=1, array_backend=ab) as venv:
        assert all(leaf.devices() == {second} for leaf in jax.tree.leaves(venv.group._stepper.engine.state))
        r = venv.reset()
        for t in range(55):
            if ab == "jax":
                assert venv.device == second and all(
                    getattr(r, n).devices() == {second} for n in FIELDS if getattr(r, n) is not None)
            out.append({n: None if getattr(r, n) is None else np.array(getattr(r, n)) for n in FIELDS})
            a = np.argmax(rng.random(out[-1]["avail_actions"].shape) * out[-1]["avail_actions"], -1).astype(np.int32)
            r = venv.step(jnp.asarray(a) if ab == "jax" else a)  # jax: made on cpu:0, JAX's default device
    return out
x, y = run("numpy"), run("jax")
assert all(a[n].dtype == b[n].dtype and np.array_equal(a[n], b[n]) for a, b in zip(x, y) for n in FIELDS
           if a[n] is not None)
print("episode ends", sum(int(a["done"].sum()) for a in x))
"""


def test_a_device_other_than_jaxs_default_holds_the_block_and_the_results():
    """What a GPU would exercise, on a second CPU device (XLA's forced host device count, in a process
    of its own): the kernels compiled for that device, the state there, JAX results there, actions
    from the default device moved there, all equal to numpy mode on that device."""
    import os
    import subprocess
    import sys

    from tests.helpers.jaxmarl_reference import EXACT_FLAG, NO_FMA_FLAG

    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {EXACT_FLAG} {NO_FMA_FLAG}",
           "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", OFF_DEFAULT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 2 * K


@pytest.mark.parametrize("array_backend", ["jax", "torch"])
def test_numpy_actions_are_checked_against_the_devices_current_avail(array_backend):
    """numpy actions on the device path meet the masks of now, not the host rows (which the device
    path does not keep): an unavailable action of a live agent is refused with numpy mode's message,
    at the reset and after steps; a legal one goes through. (They were taken silently.)"""
    fns = _fns("smax_3m")
    rng = np.random.default_rng(0)
    with mv.DummyVecEnv(fns, env_seed=0) as host, mv.DummyVecEnv(fns, env_seed=0, array_backend=array_backend) as dev:
        r = host.reset()
        dev.reset()
        for step in range(12):
            legal = np.array([[rng.choice(np.flatnonzero(a)) for a in env] for env in r.avail_actions])
            if step % 4 == 0:
                env, agent = map(int, np.argwhere(r.agent_mask & ~r.avail_actions.all(-1))[0])
                bad = legal.copy()
                bad[env, agent] = int(np.flatnonzero(~r.avail_actions[env, agent])[0])
                expected = _message(host, bad)
                assert "available" in expected, expected
                assert _message(dev, bad) == expected
            r, d = host.step(legal), dev.step(legal)
            np.testing.assert_array_equal(_numpy(d.obs), r.obs)  # a refused step stepped nothing

"""DummyVecEnv's async pool over natively batched families (VMAS, JaxMARL: their group steps as
one block) and with torch / JAX results: every row ``recv()`` returns equals the synchronous
step's, in the batch's array type (issue 49 items 1 and 2: on the device path ``recv()`` handed
out zeros as numpy arrays, the host path numpy arrays, and ``send()`` of a block failed).

VMAS balance (4 envs, max_steps 7: several episode ends), JaxMARL SMAX 3m (blocks of 4, as the
other JaxMARL tests, so JAX's persistent cache compiles it once) and CartPole."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

torch = pytest.importorskip("torch")

import marl_vec as mv  # noqa: E402
from marl_vec.core.errors import PoolNotReadyError  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.vec.device_arrays import FIELDS  # noqa: E402

KINDS = {"numpy": np.ndarray, "torch": torch.Tensor}


def _vmas(**kwargs):
    pytest.importorskip("vmas")
    fn = make_env_fn("vmas", "balance", {"max_steps": 7, "continuous_actions": False})
    return mv.DummyVecEnv([fn] * K, env_seed=3, **kwargs)


def _smax(**kwargs):
    pytest.importorskip("jaxmarl")
    return mv.DummyVecEnv([make_env_fn("jaxmarl", "smax/3m", {"device": "cpu"})] * K, env_seed=5, **kwargs)


def _cartpole(**kwargs):
    import gymnasium as gym

    return mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * K, env_seed=1, reward_dtype="float32", **kwargs)


def _host(value):
    if value is None or isinstance(value, list):
        return value
    if isinstance(value, torch.Tensor):
        return value.numpy().copy()
    return np.array(value)


def _as(array_backend, actions):
    if array_backend == "torch":
        return torch.from_numpy(actions)
    if array_backend == "jax":
        import jax.numpy as jnp

        return jnp.asarray(actions.astype(np.int32))
    return actions


def _rows(result, order=None):
    """Every field of ``result`` on the host (rows in env order where ``order`` is given)."""
    out = {}
    for name in FIELDS:
        value = _host(getattr(result, name))
        out[name] = value if value is None or order is None else value[order]
    infos = result.infos if order is None else [result.infos[k] for k in order]
    out["returns"] = [(i, info["episode"]["return"]) for i, info in enumerate(infos) if "episode" in info]
    return out


def _trajectories(make, array_backend, steps, pool, autoreset="same_step"):
    """Each step's rows in env order, stepped by step() or by send()/recv() of every env (sent in
    a shuffled order); actions drawn from the available ones, the same in both."""
    rng, shuffle = np.random.default_rng(0), np.random.default_rng(1)
    out = []
    with make(array_backend=array_backend, autoreset=autoreset) as venv:
        r = venv.reset()
        if pool:
            r = venv.recv()
            assert r.env_ids.tolist() == list(range(K))
        for _ in range(steps):
            order = None if not pool else np.argsort(r.env_ids)
            rows = _rows(r, order)
            rows["kind"] = {name: type(getattr(r, name)) for name in FIELDS if getattr(r, name) is not None}
            out.append(rows)
            if autoreset == "disabled" and rows["done"].any():
                r = venv.reset(env_ids=np.flatnonzero(rows["done"]).tolist())
                if pool:
                    r = venv.recv()
                continue
            avail = rows["avail_actions"]
            shape = (K, venv.spec.n_agents)
            actions = np.argmax(rng.random(avail.shape) * avail, axis=-1) if avail is not None else \
                rng.integers(0, venv.spec.action.n_actions, shape)
            if not pool:
                r = venv.step(_as(array_backend, actions))
                continue
            ids = shuffle.permutation(K)
            venv.send(_as(array_backend, actions[ids]), ids)
            r = venv.recv()
        stats = venv.episode_statistics()
    return out, stats


def _assert_same(expected, got, kind):
    assert len(expected) == len(got)
    ends = 0
    for t, (x, y) in enumerate(zip(expected, got)):
        assert x["returns"] == y["returns"], t
        ends += len(x["returns"])
        for name in FIELDS:
            if x[name] is None:
                assert y[name] is None, (t, name)
                continue
            assert issubclass(y["kind"][name], kind), (t, name, y["kind"][name])
            assert x[name].dtype == y[name].dtype and x[name].shape == y[name].shape, (t, name)
            assert np.array_equal(x[name], y[name]), (t, name)
    assert ends >= 2  # episode ends were compared


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("array_backend", ["numpy", "torch", "jax"])
def test_vmas_pool_rows_equal_the_synchronous_steps(array_backend, autoreset):
    expected, stats = _trajectories(_vmas, array_backend, 20, False, autoreset)
    got, pool_stats = _trajectories(_vmas, array_backend, 20, True, autoreset)
    if array_backend == "jax":
        import jax

        kind = jax.Array
    else:
        kind = KINDS[array_backend]
    _assert_same(expected, got, kind)
    assert pool_stats == stats and stats["episodes"] >= 2
    assert np.abs(got[0]["obs"]).sum() > 0  # the reset rows: not zeros


@pytest.mark.parametrize("array_backend", ["numpy", "torch", "jax"])
def test_jaxmarl_pool_rows_equal_the_synchronous_steps(array_backend):
    expected, stats = _trajectories(_smax, array_backend, 60, False)
    got, pool_stats = _trajectories(_smax, array_backend, 60, True)
    if array_backend == "jax":
        import jax

        kind = jax.Array
    else:
        kind = KINDS[array_backend]
    _assert_same(expected, got, kind)
    assert pool_stats == stats


@pytest.mark.parametrize("array_backend", ["torch", "jax"])
def test_a_family_on_the_host_gets_pool_rows_in_the_batch_array_type(array_backend):
    import jax

    expected, _ = _trajectories(_cartpole, array_backend, 30, False)
    got, _ = _trajectories(_cartpole, array_backend, 30, True)
    _assert_same(expected, got, torch.Tensor if array_backend == "torch" else jax.Array)


def test_a_block_steps_once_every_env_is_sent_and_batches_are_the_block():
    with pytest.raises(ValueError, match=r"batch_size must be num_envs=4.*steps the whole batch in one call.*"
                                         r"got batch_size=2"):
        _vmas(array_backend="torch", batch_size=2)
    with _vmas(array_backend="torch") as venv:
        venv.reset()
        r = venv.recv()
        venv.send(torch.zeros((2, 3), dtype=torch.int64), [3, 1])  # held: the block waits for envs 0 and 2
        with pytest.raises(PoolNotReadyError, match="2 were sent and wait for the rest of their worker's block"):
            venv.recv()
        venv.send(torch.ones((2, 3), dtype=torch.int64), [0, 2])
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [0, 1, 2, 3] and isinstance(r.obs, torch.Tensor)
        step = _vmas(array_backend="torch")
        with step:
            step.reset()
            s = step.step(torch.tensor([[1] * 3, [0] * 3, [1] * 3, [0] * 3]))
        order = np.argsort(r.env_ids)
        assert torch.equal(r.obs[order], s.obs) and torch.equal(r.reward[order], s.reward)


def test_disabled_refuses_to_send_an_env_whose_episode_ended_in_a_synchronous_step():
    with _vmas(array_backend="torch", autoreset="disabled") as venv:
        venv.reset()
        for _ in range(7):  # max_steps 7: every episode ends
            r = venv.step(torch.zeros((K, 3), dtype=torch.int64))
        assert bool(r.done.all())
        r = venv.recv()
        assert bool(r.done.all()) and isinstance(r.done, torch.Tensor)
        with pytest.raises(PoolNotReadyError, match=r"envs \[0, 1, 2, 3\] finished their episode and "
                                                    r"autoreset='disabled': call reset\(env_ids=\[0, 1, 2, 3\]\) first"):
            venv.send(torch.zeros((K, 3), dtype=torch.int64), r.env_ids)
        venv.reset()
        r = venv.recv()
        venv.send(torch.zeros((K, 3), dtype=torch.int64), r.env_ids)
        assert not bool(venv.recv().done.any())

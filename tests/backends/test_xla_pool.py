"""`VecEnv.xla()`'s ``recv``/``send``: the async pool (first-ready batches of ``batch_size``)
inside ``jax.jit`` + ``lax.scan``, on DummyVecEnv, SubprocVecEnv and RayVecEnv.

Which envs a ``recv`` returns depends on timing on the process backends, so each env's
rows are checked on their own: env i's received rows and sent actions, in order, equal
a single env seeded as env i stepped from Python with the same actions.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
import jax.numpy as jnp  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.vec.xla_layout import XlaResult  # noqa: E402
from tests.helpers.backends import ray_cluster  # noqa: E402,F401
from tests.helpers.xla_rollouts import expected_field, pick  # noqa: E402

SEED, NUM_ENVS, BATCH, STEPS = 5, 4, 2, 40  # 40 recvs of 2: ~20 steps an env, past MPE's 10-step episodes


def make(backend: str, request: pytest.FixtureRequest, num_envs: int) -> mv.VecEnv:
    kwargs: dict = {"batch_size": BATCH} if num_envs > 1 else {}
    if backend == "subproc" and num_envs > 1:
        kwargs.update(num_workers=2, start_method="forkserver")
    elif backend == "ray" and num_envs > 1:
        request.getfixturevalue("ray_cluster")
        kwargs.update(num_workers=2)
    spread = {"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3",
                      "kwargs": {"N": 3, "max_cycles": 10, "continuous_actions": False}}}
    backend = backend if num_envs > 1 else "dummy"
    return mv.make(spread, num_envs=num_envs, backend=backend, env_seed=0, **kwargs)


@pytest.mark.parametrize("backend", ["dummy", "subproc", "ray"])
def test_recv_send_in_scan_equal_each_env_stepped_from_python(backend, request):
    with make(backend, request, NUM_ENVS) as venv:
        venv.reset(seed=SEED)
        fns = venv.xla()
        assert fns.handle is fns[0] and fns.recv is fns[1] and fns.send is fns[2] and fns.step is fns[3]

        def body(handle, key):
            handle, r = fns.recv(handle)
            actions = pick(key, r.avail_actions)
            return fns.send(handle, actions, r.env_ids), (r, actions)

        keys = jax.random.split(jax.random.PRNGKey(SEED), STEPS)
        _, (rs, actions) = jax.jit(lambda h, k: jax.lax.scan(body, h, k))(fns.handle, keys)
    rs = jax.tree_util.tree_map(np.asarray, rs)
    actions = np.asarray(actions)
    assert rs.env_ids.shape == (STEPS, BATCH) and rs.obs.shape == (STEPS, BATCH, 3, 18)
    ends = 0
    for env in range(NUM_ENVS):
        rows = [(t, k) for t in range(STEPS) for k in range(BATCH) if rs.env_ids[t, k] == env]
        assert rows  # every env came back (how often depends on timing)
        with make(backend, request, 1) as ref:
            expected = ref.reset(seed=SEED + env)
            for n, (t, k) in enumerate(rows):
                if n:
                    pt, pk = rows[n - 1]
                    expected = ref.step(actions[pt, pk][None])
                    ends += int(expected.done[0])
                for name in XlaResult._fields:
                    if name == "env_ids":
                        continue
                    want = expected_field(expected, name, single=False)
                    got = getattr(rs, name)
                    if want is None:
                        assert got is None, name
                        continue
                    np.testing.assert_array_equal(got[t, k], want[0], err_msg=f"env {env}, row {n}, field {name}")
    assert ends > 0


def test_step_with_env_ids_is_recv_of_send():
    """EnvPool's ``step(handle, actions, env_ids)``: ``recv(send(...))``, rows of ``batch_size``."""
    with mv.make("gym/cartpole", num_envs=4, batch_size=2, env_seed=0) as venv:
        venv.reset(seed=1)
        fns = venv.xla()
        handle, r = jax.jit(fns.recv)(fns.handle)
        assert np.asarray(r.env_ids).tolist() == [0, 1] and r.obs.shape == (2, 4)
        handle, r2 = jax.jit(fns.step)(handle, jnp.ones(2, jnp.int32), r.env_ids)
        assert np.asarray(r2.env_ids).tolist() == [2, 3]  # the reset rows still waiting come first
        with mv.make("gym/cartpole", num_envs=4, env_seed=0) as ref:
            np.testing.assert_array_equal(np.asarray(r2.obs), ref.reset(seed=1).obs[2:, 0])


def test_send_of_envs_not_received_is_refused():
    with mv.make("gym/cartpole", num_envs=2, env_seed=0) as venv:
        venv.reset()
        fns = venv.xla()
        with pytest.raises(mv.PoolNotReadyError, match="recv\\(\\) has not returned it yet"):
            with fns.errors():
                jax.jit(fns.send)(fns.handle, jnp.ones(2, jnp.int32), jnp.arange(2))

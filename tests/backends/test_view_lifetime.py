"""copy=False results stay readable after close() and after the VecEnv is collected
(the shared mapping lives while a view does), and nothing is left in /dev/shm.

Each case runs in a fresh interpreter: a segfault fails the test instead of killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import gc, os, sys, numpy as np
    import marl_vec as mv
    from marl_vec.envs import make_env_fn

    backend, how = sys.argv[1], sys.argv[2]
    fns = [make_env_fn("gym", "CartPole-v1")] * 2
    if backend.startswith("ray"):
        import ray
        ray.init(num_cpus=2, include_dashboard=False)
        venv = mv.RayVecEnv(fns, env_seed=0, num_workers=2, copy=False, transport=backend.split("-")[1])
    else:
        venv = mv.make_vec(fns, backend=backend, env_seed=0, copy=False)
    with mv.DummyVecEnv(fns, env_seed=0) as ref:
        ref.reset()
        expected = ref.step(np.ones((2, 1), dtype=np.int64))
    first = venv.reset()
    r = venv.step(np.ones((2, 1), dtype=np.int64))
    name = venv.buffers.shm_name
    if how == "close":
        venv.close()
    else:
        del venv
        gc.collect()
    gc.collect()
    for field in ("obs", "state", "agent_mask", "reward", "terminated", "truncated", "done", "final_obs"):
        np.testing.assert_array_equal(getattr(r, field), getattr(expected, field))
    r.obs[0, 0, 0] = 7.0  # still writable: the caller's memory now
    assert first.obs[0, 0, 0] == 7.0  # copy=False: every result is the same view
    assert name is None or not os.path.exists("/dev/shm/" + name), name
    del r, first
    gc.collect()
    print("ok", name is not None)
    """
)


@pytest.mark.parametrize("how", ["close", "collected"])
@pytest.mark.parametrize("backend", ["dummy", "subproc", "ray-auto"])
def test_copy_false_result_outlives_its_vecenv(backend, how):
    if backend.startswith("ray"):
        pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
    out = subprocess.run([sys.executable, "-c", SCRIPT, backend, how], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode} (-11 is a segfault)\n{out.stderr[-3000:]}"
    shared = backend != "dummy"
    assert out.stdout.strip().splitlines()[-1] == f"ok {shared}"
    assert "Exception ignored" not in out.stderr and "BufferError" not in out.stderr, out.stderr[-3000:]

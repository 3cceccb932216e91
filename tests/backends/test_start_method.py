"""SubprocVecEnv's default start method beside native threads (issue 23).

``fork`` unless threads other than the main one run: Python threads, and native ones
(JAX, torch's pool, ale-py's AtariVectorEnv, EnvPool), counted in ``/proc/self/task``;
then ``forkserver``. OpenBLAS's idle workers (numpy and scipy start them at import)
are not counted: they fork safely, and counting them made every process pick
forkserver, which broke scripts without an ``if __name__ == "__main__":`` guard.

Each case runs in a fresh interpreter: this test process has threads of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(code: str, tmp_path, guard: bool = True, then: str = "") -> str:
    """Run ``code``, then ``then``, as a script (under a main guard, unless not ``guard``); its stdout."""
    body = textwrap.dedent(code) + textwrap.dedent(then)
    if guard:
        body = 'if __name__ == "__main__":\n' + textwrap.indent(body, "    ")
    script = tmp_path / "script.py"
    script.write_text(body)
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


STEP_ONE = """
import functools, gymnasium as gym, numpy as np
import marl_vec as mv
from marl_vec.vec.native_threads import threads_beside_main
with mv.SubprocVecEnv([functools.partial(gym.make, "CartPole-v1")] * 2, num_workers=2) as venv:
    venv.reset()
    venv.step(np.zeros((2, 1), np.int64))
    print(venv.start_method, threads_beside_main())
"""


def test_numpy_and_scipy_blas_pools_keep_fork_and_a_script_without_a_main_guard_runs(tmp_path):
    pytest.importorskip("scipy")
    code = "import numpy, scipy.linalg\nscipy.linalg.inv(numpy.eye(200) + 1)\n" + STEP_ONE
    assert run(code, tmp_path, guard=False).split() == ["fork", "0"]


def test_openblas_pool_shut_down_by_a_fork_is_not_miscounted(tmp_path):
    # After a fork OpenBLAS's pool is down until the next BLAS call: a torch thread must
    # still be seen then (its workers are not subtracted while they do not run).
    pytest.importorskip("torch")
    code = """
    import os, numpy, torch
    from marl_vec.vec.native_threads import openblas_workers, threads_beside_main
    from marl_vec.vec.subproc.vec_env import default_start_method
    before = openblas_workers()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    torch.set_num_threads(2)
    torch.ones(300, 300) @ torch.ones(300, 300)
    print(before, openblas_workers(), threads_beside_main() > 0, default_start_method())
    """
    before, after, threaded, method = run(code, tmp_path).split()
    assert int(before) >= 0 and after == "0" and threaded == "True" and method == "forkserver"


def test_torch_threads_make_the_default_forkserver(tmp_path):
    pytest.importorskip("torch")
    code = "import torch\ntorch.set_num_threads(2)\ntorch.ones(300, 300) @ torch.ones(300, 300)\n" + STEP_ONE
    method, threads = run(code, tmp_path).split()
    assert method == "forkserver" and int(threads) >= 1


def test_ale_vector_env_threads_make_the_default_forkserver(tmp_path):
    pytest.importorskip("ale_py")
    code = """
    import numpy as np
    from ale_py.vector_env import AtariVectorEnv
    engine = AtariVectorEnv(game="breakout", num_envs=2, num_threads=2)
    engine.reset(seed=0)
    """
    method, threads = run(code, tmp_path, then=STEP_ONE).split()
    assert method == "forkserver" and int(threads) >= 2


def test_a_python_thread_makes_the_default_forkserver(tmp_path):
    code = """
    import threading
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
    """
    assert run(code, tmp_path, then=STEP_ONE + "stop.set()\n").split()[0] == "forkserver"


def test_jax_threads_make_the_default_forkserver(tmp_path):
    pytest.importorskip("jax")
    code = "import jax.numpy as jnp\njnp.ones(3).sum().block_until_ready()\n"
    method, threads = run(code, tmp_path, then=STEP_ONE).split()
    assert method == "forkserver" and int(threads) >= 8


def test_a_script_without_a_main_guard_under_forkserver_is_told_why(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import threading\nstop = threading.Event()\n"
                      "threading.Thread(target=stop.wait, daemon=True).start()\n" + textwrap.dedent(STEP_ONE))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=tmp_path)
    assert done.returncode != 0
    assert ("marl_vec: the workers start by 'forkserver' (the default here: this process runs other threads) "
            "and import the main script: guard its code with `if __name__ == \"__main__\":`, or pass "
            "start_method='fork'") in done.stderr

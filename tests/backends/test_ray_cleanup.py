"""A local cluster that RayVecEnv starts itself is shut down by close(): no Ray
process outlives it, and its files stay in the folder the user chose.

Runs in a fresh interpreter, so that no other test's Ray session is reused.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
psutil = pytest.importorskip("psutil")

SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, psutil, ray
    import marl_vec as mv
    from marl_vec.envs import make_env_fn

    temp_dir = sys.argv[1]
    fn = make_env_fn("pettingzoo", "mpe2.simple_spread_v3", {"N": 2, "max_cycles": 5})
    venv = mv.make_vec([fn] * 3, backend="ray", env_seed=0, num_workers=2, temp_dir=temp_dir)
    venv.reset()
    for _ in range(7):
        venv.step(np.zeros((3, 2), dtype=np.int64))
    mine = [p for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])]
    assert any("raylet" in " ".join(p.info["cmdline"]) for p in mine), "the local cluster did not start in temp_dir"
    venv.close()
    venv.close()  # twice is fine
    assert not ray.is_initialized()
    print("ok")
    """
)


def _ray_processes(temp_dir: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if temp_dir in cmd:
            found.append(f"{proc.info['pid']}: {cmd[:120]}")
    return found


@pytest.fixture
def short_dir():
    # Ray's unix socket paths under temp_dir must stay under 107 bytes: pytest's tmp_path is too long.
    path = tempfile.mkdtemp(prefix="mvray", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_close_shuts_down_the_cluster_it_started(short_dir):
    temp_dir = os.path.join(short_dir, "ray")
    out = subprocess.run([sys.executable, "-c", SCRIPT, temp_dir], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
    # raylet, gcs_server, workers and log monitors all carry the session folder in their command line.
    assert _ray_processes(temp_dir) == []
    assert os.path.exists(os.path.join(temp_dir, "session_latest"))


def test_too_long_temp_dir_is_refused_before_ray_starts():
    from marl_vec.vec.ray.vec_env import RayVecEnv

    with pytest.raises(ValueError, match=r"is 130 bytes long; allowed: at most 4\d \(Ray's socket paths"):
        RayVecEnv([lambda: None], temp_dir="/tmp/" + "x" * 125)


CONNECT = textwrap.dedent(
    """
    import sys, numpy as np, ray
    import marl_vec as mv
    from marl_vec.envs import make_env_fn

    fn = make_env_fn("gym", "CartPole-v1")
    venv = mv.make_vec([fn] * 2, backend="ray", num_workers=2, address=sys.argv[1])
    venv.reset()
    venv.step(np.zeros((2, 1), dtype=np.int64))
    venv.close()
    assert not ray.is_initialized()  # disconnected from the cluster...
    print("ok")
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connects_to_a_running_cluster_and_leaves_it_running(short_dir):
    """The multi-machine recipe of the README, on one machine: ``ray start --head``, then ``address=``."""
    temp_dir = os.path.join(short_dir, "ray")
    port = _free_port()
    ports = [f"--{name}={_free_port()}" for name in (
        "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
        "runtime-env-agent-port", "metrics-export-port")]
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    # Ray >= 2.59 authenticates cluster clients with a token: the same one for the head and the driver.
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    start = subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", f"--temp-dir={temp_dir}",
                            "--include-dashboard=false", "--disable-usage-stats", *ports],
                           capture_output=True, text=True, timeout=120, env=env)
    try:
        assert start.returncode == 0, start.stderr[-3000:]
        out = subprocess.run([sys.executable, "-c", CONNECT, f"127.0.0.1:{port}"], capture_output=True, text=True,
                             timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().endswith("ok")
        # ...but the cluster that marl_vec did not start is still there.
        assert any("raylet" in cmd for cmd in _ray_processes(temp_dir))
    finally:
        _stop_cluster(temp_dir)
    assert _ray_processes(temp_dir) == []


def _stop_cluster(temp_dir: str) -> None:
    """Stop only this cluster's processes, by pid (`ray stop` would stop every cluster on the machine).

    A few rounds: Ray's processes may start children while the first ones stop.
    """
    for _ in range(5):
        procs = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if temp_dir in " ".join(proc.info["cmdline"] or []):
                    procs.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not procs:
            return
        for proc in procs:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=10)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass

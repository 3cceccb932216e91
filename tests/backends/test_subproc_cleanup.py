"""Nothing outlives a SubprocVecEnv: no worker process and no shared-memory block after
close(), garbage collection, an exception, a KeyboardInterrupt, interpreter exit, or the
death of the parent itself."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers.scripted_envs import DyingAgentEnv
from tests.helpers.sigint import default_sigint

REPO = Path(__file__).resolve().parents[2]
SHM = Path("/dev/shm")


def gone(pids: list[int], shm_name: str, wait: float = 0.0) -> tuple[list[int], bool]:
    """Pids still running (zombies count as gone) and whether the block still exists, after up to ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        alive = [p for p in pids if _running(p)]
        shm_left = (SHM / shm_name).exists()
        if (not alive and not shm_left) or time.monotonic() >= deadline:
            return alive, shm_left
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def our_children() -> list[psutil.Process]:
    """Children of this process except multiprocessing's own singletons (resource tracker, fork server).

    A worker the fork server started is its child and carries its command line, so only the
    singletons themselves (this process's direct children) are left out, not what they started.
    """
    out = []
    me = os.getpid()
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            singleton = p.ppid() == me and ("resource_tracker" in cmd or "forkserver" in cmd)
        except psutil.NoSuchProcess:
            continue
        if not singleton:
            out.append(p)
    return out


def available(result):
    return result.avail_actions.argmax(axis=2).astype(np.int64)


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_close_leaves_no_process_and_no_shared_memory(start_method):
    before = {p.pid for p in our_children()}
    venv = SubprocVecEnv([DyingAgentEnv] * 4, num_workers=2, start_method=start_method)
    name, pids = venv.buffers.shm_name, venv.worker_pids
    assert (SHM / name).exists() and all(_running(p) for p in pids)
    venv.step(available(venv.reset()))
    venv.close()
    assert gone(pids, name) == ([], False)
    assert {p.pid for p in our_children()} <= before
    venv.close()  # twice is fine
    with pytest.raises(mv.ClosedEnvError, match="SubprocVecEnv is closed"):
        venv.reset()


def test_context_manager_closes_on_exception():
    with pytest.raises(ZeroDivisionError):
        with SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2) as venv:
            name, pids = venv.buffers.shm_name, venv.worker_pids
            venv.reset()
            1 / 0
    assert gone(pids, name) == ([], False)


def test_garbage_collection_closes():
    venv = SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2)
    name, pids = venv.buffers.shm_name, venv.worker_pids
    venv.reset()
    del venv
    gc.collect()
    assert gone(pids, name, wait=5.0) == ([], False)


def test_close_after_a_worker_was_killed_and_after_an_env_error():
    from tests.helpers.scripted_envs import FailingEnv

    venv = SubprocVecEnv([DyingAgentEnv, FailingEnv, DyingAgentEnv], num_workers=3)
    name, pids = venv.buffers.shm_name, venv.worker_pids
    r = venv.step(available(venv.reset()))
    with pytest.raises(WorkerError):
        venv.step(available(r))
    os.kill(pids[2], signal.SIGKILL)
    venv.close()
    assert gone(pids, name) == ([], False)


def test_close_with_a_step_in_flight():
    venv = SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2)
    name, pids = venv.buffers.shm_name, venv.worker_pids
    venv.step_async(available(venv.reset()))
    venv.close()  # no step_wait(): the workers finish the step, then read "close"
    assert gone(pids, name) == ([], False)


def test_copy_false_views_do_not_block_close():
    venv = SubprocVecEnv([DyingAgentEnv] * 2, num_workers=2, copy=False)
    name, pids = venv.buffers.shm_name, venv.worker_pids
    kept = venv.reset()  # views into the shared block, still referenced
    venv.close()
    assert gone(pids, name) == ([], False)
    del kept


SCRIPT = """
import os, signal, sys, threading, time
import numpy as np
sys.path.insert(0, {repo!r})
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers.scripted_envs import DyingAgentEnv

class SlowEnv(DyingAgentEnv):
    def step(self, actions):
        time.sleep(3.0)
        return super().step(actions)

def die_before_attach(self, data, command="start"):
    # The block exists; the workers have not been told its name yet: killed here.
    print(self.buffers.shm_name, *[p.pid for p in self._procs], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    how = sys.argv[1]
    if how == "sigkill_before_attach":
        SubprocVecEnv._send_all = die_before_attach
    venv = SubprocVecEnv([DyingAgentEnv, SlowEnv], num_workers=2, start_method=sys.argv[2])
    r = venv.reset()
    print(venv.buffers.shm_name, *venv.worker_pids, flush=True)
    if how == "exit":
        sys.exit(0)                      # no close()
    if how == "exception":
        raise RuntimeError("trainer crashed")
    if how == "interrupt":               # Ctrl-C while waiting for the slow worker
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        venv.step(r.avail_actions.argmax(axis=2))
    if how == "sigkill":                 # the parent dies without any cleanup of its own
        time.sleep(60)
"""


def run_script(tmp_path, how: str, start_method: str) -> tuple[subprocess.Popen, list[str]]:
    path = tmp_path / "trainer.py"
    path.write_text(textwrap.dedent(SCRIPT.format(repo=str(REPO))))
    proc = subprocess.Popen([sys.executable, str(path), how, start_method], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # its Ctrl-C works however pytest was started
    first = proc.stdout.readline().split()
    assert first, proc.communicate(timeout=30)
    return proc, first


@pytest.mark.parametrize("how, start_method", [
    ("exit", "fork"), ("exit", "spawn"), ("exception", "fork"), ("interrupt", "fork"), ("interrupt", "spawn"),
])
def test_interpreter_exit_without_close_cleans_up(tmp_path, how, start_method):
    proc, (name, *pids) = run_script(tmp_path, how, start_method)
    _, err = proc.communicate(timeout=60)
    assert gone([int(p) for p in pids], name, wait=5.0) == ([], False)
    if how == "exception":
        assert "RuntimeError: trainer crashed" in err
    if how == "interrupt":
        assert "KeyboardInterrupt" in err
    # No complaint from multiprocessing about leaked blocks or semaphores.
    assert "leaked" not in err and "resource_tracker" not in err, err


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_parent_killed_by_sigkill_leaves_nothing(tmp_path, start_method):
    # Also checks that workers attach without touching the owner's resource-tracker
    # registration: the tracker must still know the block to remove it.
    proc, (name, *pids) = run_script(tmp_path, "sigkill", start_method)
    proc.kill()
    proc.communicate(timeout=30)
    # Workers read EOF on their pipes and exit; the resource tracker unlinks the block.
    assert gone([int(p) for p in pids], name, wait=15.0) == ([], False)


def test_parent_killed_between_block_and_attach_leaves_nothing(tmp_path):
    # Forked workers are given the block's name when they start, before it exists: a
    # parent killed after making it, before the message that names it, leaves no block.
    proc, (name, *pids) = run_script(tmp_path, "sigkill_before_attach", "fork")
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert name.startswith("mvb_")
    assert gone([int(p) for p in pids], name, wait=15.0) == ([], False)

"""Ctrl-C in `marl-vec run`, `bench` and `render`: one line, what ran, nothing left behind, exit 130.

Each test starts the real command in a new process group, waits until it reports
progress (its plain progress lines: stderr is a pipe here, not a terminal), then
sends SIGINT as a terminal's Ctrl-C does: to the whole group (the CLI and its
worker processes), or to the CLI alone. It checks the exit code, the report, that
no traceback was printed, that every process the command started is gone, and
that the shared-memory blocks it had mapped are unlinked. The command starts with
SIGINT at its default, whatever pytest was started with (tests/helpers/sigint.py).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.sigint import default_sigint

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[2]
WAIT = 180  # seconds for a command to start, report progress, or end (generous: the machine may be loaded)


class Command:
    """A `marl-vec` command running in its own process group, its output read as it comes."""

    def __init__(self, args: list[str], cwd: Path):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "marl_vec.tools.cli", *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=default_sigint)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s, out), daemon=True)
                         for s, out in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)

    def wait_for(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for line in self.stderr + self.stdout:
                if m := re.search(pattern, line):
                    return m
            assert self.proc.poll() is None, f"ended before printing {pattern!r}:\n{self.output()}"
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} after {WAIT} s:\n{self.output()}")

    def descendants(self) -> list:
        return psutil.Process(self.proc.pid).children(recursive=True)

    def shared_memory(self) -> set[str]:
        """The /dev/shm files the CLI process has mapped (its step buffers)."""
        return {m.path for m in psutil.Process(self.proc.pid).memory_maps() if m.path.startswith("/dev/shm/")}

    def interrupt(self, group: bool) -> None:
        if group:
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGINT)

    def finish(self) -> int:
        code = self.proc.wait(WAIT)
        for reader in self._readers:
            reader.join(10)
        return code

    def output(self) -> str:
        return "".join(self.stdout) + "\n--- stderr ---\n" + "".join(self.stderr)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def _gone(processes: list) -> list:
    """The processes of ``processes`` still running (zombies count as gone: nothing runs)."""
    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def _interrupt_and_check(cmd: Command, group: bool, workers: int) -> tuple[int, str]:
    """Send SIGINT, wait for the end; returns (steps reported, stdout) after the checks every command shares."""
    children = cmd.descendants()
    if workers:
        assert len(children) >= workers, f"expected {workers} worker processes, found {children}"
    blocks = cmd.shared_memory()
    cmd.interrupt(group)
    code = cmd.finish()
    out = "".join(cmd.stdout)
    assert code == 130, f"exit code {code}:\n{cmd.output()}"
    assert "Traceback" not in cmd.output(), cmd.output()
    lines = re.findall(r"^interrupted after (\d+) steps$", out, re.M)
    assert len(lines) == 1, out
    deadline = time.monotonic() + 10  # the kernel reaps killed children asynchronously
    while _gone(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _gone(children), f"left running: {_gone(children)}"
    if workers:
        assert blocks, "the subproc backend keeps its step buffers in /dev/shm"
    assert not [b for b in blocks if os.path.exists(b)], f"shared memory left: {blocks}"
    return int(lines[0]), out


@pytest.mark.parametrize("backend,group", [("dummy", False), ("subproc", True), ("subproc", False)],
                         ids=["dummy", "subproc-ctrl-c-to-group", "subproc-sigint-to-cli"])
def test_run_interrupted(backend: str, group: bool, tmp_path):
    cmd = Command(["run", "-o", "run.steps=4000", "-o", "vec.num_envs=2", "-o", f"vec.backend={backend}",
                   "-o", "vec.num_workers=2" if backend == "subproc" else "vec.env_seed=0"], tmp_path)
    try:
        cmd.wait_for(r"^2 envs: 1000/4000 steps \(25%\)")
        steps, out = _interrupt_and_check(cmd, group, workers=2 if backend == "subproc" else 0)
    finally:
        cmd.kill()
    assert 1000 <= steps < 4000
    assert f"({2 * steps} env-steps in " in out  # the summary of the steps that ran
    assert re.search(r"^episodes +\d+$", out, re.M) and "mean return" in out


def test_bench_interrupted_reports_the_backends_so_far(tmp_path):
    cmd = Command(["bench", "--steps", "4000", "-o", "vec.num_envs=2"], tmp_path)
    try:
        cmd.wait_for(r"^subproc, 2 envs: 1000/4000 steps \(25%\)")
        steps, out = _interrupt_and_check(cmd, group=True, workers=2)
    finally:
        cmd.kill()
    assert 1000 <= steps < 4000
    assert re.search(r"^  dummy +[\d,]+ env-steps/s +1\.00x dummy +this process$", out, re.M), out
    assert re.search(rf"^  subproc +[\d,]+ env-steps/s +[\d.]+x dummy +2 workers \(interrupted: {steps} steps\)$",
                     out, re.M), out


def test_render_interrupted_saves_the_frames_so_far(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    gif = tmp_path / "run.gif"
    # Two 120-pixel tiles side by side: the GIF's progress bar is wider than 200 steps, so no frame repeats.
    cmd = Command(["render", "--out", str(gif), "--steps", "200", "--size", "120", "-o", "vec.num_envs=2"], tmp_path)
    try:
        cmd.wait_for(r"^render, 2 envs: 50/200 steps \(25%\)")
        steps, out = _interrupt_and_check(cmd, group=False, workers=0)
    finally:
        cmd.kill()
    assert 50 <= steps < 200
    assert f"gif              {gif}  ({steps + 1} frames)" in out
    with Image.open(gif) as im:
        assert im.n_frames == steps + 1

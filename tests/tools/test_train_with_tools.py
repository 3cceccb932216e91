"""scripts/train_with/plot_log.py and random_baseline.py: reading a training log, and the random floor."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "scripts" / "train_with"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_log(path: Path) -> None:
    # Four batches of 60 episodes each; last100_win is the running mean over the last 100.
    wins = [0] * 60 + [1] * 6 + [0] * 54 + [0] * 60 + [1] * 12 + [0] * 48
    rows = []
    for b in range(4):
        done = 60 * (b + 1)
        last = wins[max(0, done - 100):done]
        rows.append({"frames": 1000 * (b + 1), "seconds": 60.0 * (b + 1), "episodes": done, "batch_episodes": 60,
                     "batch_return": [0.1, 0.3, 0.5, 0.7][b], "last100_win": sum(last) / len(last)})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_window_table_means_and_disjoint_win_windows(tmp_path):
    log = tmp_path / "log.csv"
    write_log(log)
    lines = load("plot_log").window_table(log, 2, "batch_return")
    assert lines[2:] == [
        # rows 1-2: only row 2 (episodes 21-120) has 100 episodes: 6 wins.
        "| 1000-2000 | 2 | 120 | 0.200 ± 0.100 | 6/100 = 0.060 ± 0.024 |",
        # rows 3-4: row 4 (episodes 141-240) holds 12 wins; row 3 (81-180) overlaps it and is skipped.
        "| 3000-4000 | 4 | 240 | 0.600 ± 0.100 | 12/100 = 0.120 ± 0.032 |",
    ]


def test_plot_and_compare(tmp_path):
    log, png = tmp_path / "log.csv", tmp_path / "curve.png"
    write_log(log)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(TOOLS / "plot_log.py"), str(log), "--y", "batch_return", "last100_win",
                          "--out", str(png), "--compare", "2", "--baseline", "batch_return=0.2"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "batch_return: first 0.200 ± 0.100, last 0.600 ± 0.100, difference +0.400 (+2.8 standard errors)" in run.stdout
    bad = subprocess.run([sys.executable, str(TOOLS / "plot_log.py"), str(log), "--y", "nope"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode != 0 and "has no column(s) ['nope']" in bad.stderr


def test_random_baseline_on_simple_spread():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(TOOLS / "random_baseline.py"), "mpe/simple_spread", "--episodes", "16",
                          "--num-envs", "2"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "uniform random policy, 16 episodes of mpe/simple_spread:"
    assert "  length: 25.000 ± 0.000" in lines  # simple_spread's episodes always last max_cycles=25 steps
    assert any(line.startswith("  return: -") for line in lines)

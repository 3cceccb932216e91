"""scripts/train_with/benchmarl_mappo.py on Google Research Football (academy_3_vs_1_with_keeper).

BenchMARL's MAPPO through marl_vec on a scenario BenchMARL has no task for: the
script takes the config's env kwargs (``rewards=scoring,checkpoints``) and
``autoreset=fast``, and its CSV log puts marl_vec's episode statistics (goals,
win rate) beside BenchMARL's own batch returns; the two count the same episodes.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("benchmarl")
pytest.importorskip("gfootball")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "train_with" / "benchmarl_mappo.py"
FOOTBALL = str(ROOT / "configs" / "football" / "academy_3_vs_1_with_keeper.yaml")


def run_script(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)


def test_mappo_trains_on_football_and_logs_goals(tmp_path):
    log = tmp_path / "football.csv"
    run = run_script("--config", FOOTBALL, "--env-kwarg", "rewards=scoring,checkpoints", "--autoreset", "fast",
                     "--backend", "subproc", "--num-envs", "4", "--frames-per-batch", "400", "--frames", "1200",
                     "--minibatch-size", "200", "--minibatch-iters", "2", "--lr", "5e-4", "--entropy-coef", "0.01",
                     "--hidden", "32", "32", "--log", str(log), "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = list(csv.DictReader(log.open()))
    assert [int(r["frames"]) for r in rows] == [400, 800, 1200]
    for key in ("batch_win", "batch_goals_for", "batch_goals_against", "batch_score", "batch_length",
                "last100_win", "last100_return"):
        assert key in rows[0]
    # Random-ish play ends an academy episode within a few dozen steps: every batch ends some.
    counts = [int(r["batch_episodes"]) for r in rows]
    assert all(0 < n < 100 for n in counts)
    assert [int(r["episodes"]) for r in rows] == [sum(counts[:i + 1]) for i in range(3)]
    for row, n in zip(rows, counts):
        # BenchMARL's batch mean (its per-agent episode_reward where done) and marl_vec's
        # statistics over the same episodes agree (float32 against float64 sums).
        assert float(row["batch_return"]) == pytest.approx(float(row["benchmarl_batch_return"]), rel=1e-5)
        wins = float(row["batch_win"]) * n
        assert wins == pytest.approx(round(wins)) and 0 <= round(wins) <= n
    # The last 100 episodes are all of them here: their mean is the batches' episode-weighted mean.
    last100 = sum(n * float(r["batch_return"]) for n, r in zip(counts, rows)) / sum(counts)
    assert float(rows[-1]["last100_return"]) == pytest.approx(last100, rel=1e-9)
    printed = [line for line in run.stdout.splitlines() if line.startswith("frames=")]
    assert [line.split()[0] for line in printed] == ["frames=400", "frames=800", "frames=1200"]
    assert run.stdout.strip().splitlines()[-1].startswith("first_return=")


def test_env_kwarg_and_autoreset_are_checked():
    run = run_script("--config", FOOTBALL, "--env-kwarg", "rewards=goals", "--frames", "100")
    assert run.returncode != 0 and "rewards" in run.stderr and "scoring,checkpoints" in run.stderr
    run = run_script("--config", FOOTBALL, "--env-kwarg", "rewards")
    assert run.returncode != 0 and "--env-kwarg needs KEY=VALUE, got 'rewards'" in run.stderr
    run = run_script("--config", FOOTBALL, "--autoreset", "next_step")
    assert run.returncode != 0 and "invalid choice: 'next_step'" in run.stderr

"""scripts/bench/benchmark_xla.py (the figures of docs/jax/any_env_inside_jit.md#speed), tiny:
it runs from any directory, measures both sides of a case and writes its JSON."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("jax", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bench" / "benchmark_xla.py"


def test_the_benchmark_runs_as_the_docs_show_it(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--cases", "cartpole", "--steps", "5", "--rounds", "2",
                          "--json", "out.json"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cartpole       bridge / python: " in out.stdout and "2 rounds" in out.stdout
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert result["case"] == "cartpole" and result["env_steps_per_round"] == 5 * 64
    assert result["ratio_min"] <= result["ratio_median"] <= result["ratio_max"]
    assert result["python_steps_per_s"] > 0 and result["bridge_steps_per_s"] > 0


def test_an_unknown_case_is_named():
    out = subprocess.run([sys.executable, str(SCRIPT), "--cases", "cartpol"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "unknown cases ['cartpol']; allowed: cartpole, spread, pong, pong_envpool" in out.stderr

"""scripts/bench/benchmark_jax.py (the figures of docs/jax/inside_jit.md#speed), tiny: it runs from
any directory, measures every side of a case (the batch, JaxMARL used directly, the stateful
family, optimistic resets) and writes its JSON."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bench" / "benchmark_jax.py"


def test_the_benchmark_runs_as_the_docs_show_it(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--cases", "spread", "--envs", "2", "--steps", "5",
                          "--stateful-steps", "3", "--rounds", "2", "--optimistic-cases", "spread", "--json", "out.json"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "    spread E=2     batch/jaxmarl " in out.stdout and "optimistic/same_step " in out.stdout, out.stdout
    summary = json.loads((tmp_path / "out.json").read_text())
    assert summary["rounds"] == 2 and summary["steps"] == 5
    sides, optimistic = summary["results"]
    assert (sides["case"], sides["envs"]) == ("spread", 2)
    for name in ("batch_over_jaxmarl", "batch_over_stateful"):
        assert sides[name]["min"] <= sides[name]["median"] <= sides[name]["max"]
    assert min(sides[f"{s}_steps_per_s"] for s in ("batch", "jaxmarl", "stateful")) > 0
    assert optimistic["resets_per_step"] == 1 and optimistic["optimistic_over_same_step"]["median"] > 0


def test_an_unknown_case_is_refused_naming_the_allowed_ones():
    out = subprocess.run([sys.executable, str(SCRIPT), "--cases", "sprad"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    # argparse quotes the choices from Python 3.12.8/3.13.1 on: either way, both are named.
    assert re.search(r"invalid choice: 'sprad' \(choose from '?spread'?, '?smax'?\)", out.stderr), out.stderr

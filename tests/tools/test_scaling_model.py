"""scripts/bench/scaling_model.py: the fit recovers the constants of points made from known ones, and the plots are drawn.

Measuring is the script's job (scripts/bench/benchmark_scaling.py, on an idle machine); this checks the arithmetic.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
scaling_model = pytest.importorskip("scaling_model")

A_DUMMY, A_SUB, B, C_SUB = 0.02, 1.2, 0.27, 1.7  # ms, ms, CPU ms per env-step, cores
BASE, PER_WORKER, PER_ENV = 60.0, 26.0, 1.9  # MB


def _write(path: Path) -> None:
    fields = ["env", "backend", "workers", "num_envs", "steps_per_s", "step_ms", "cpu_ms_per_step", "pss_mb",
              "build_s", "load_before", "load_after", "status"]
    rows = []
    for backend, workers, a, c in (("dummy", 0, A_DUMMY, 1.0), ("subproc", 2, A_SUB, C_SUB)):
        for n in (1, 4, 16, 64, 256, 1024):
            step = a + B * n / c
            rows.append({"env": "mpe", "backend": backend, "workers": workers, "num_envs": n,
                         "steps_per_s": 1000 * n / step, "step_ms": step, "cpu_ms_per_step": B * n,
                         "pss_mb": BASE + workers * PER_WORKER + n * PER_ENV, "build_s": 0.1,
                         "load_before": 0.5, "load_after": 0.7, "status": "ok"})
    rows.append({"env": "mpe", "backend": "dummy", "num_envs": 4096, "status": "over the 90 s cap"})
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def test_fit_recovers_the_constants_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "scaling.csv"
    _write(path)
    model = scaling_model.fit_csv(path)["mpe"]
    dummy, sub = model.fits["dummy"], model.fits["subproc"]
    assert dummy.a_ms == pytest.approx(A_DUMMY, rel=1e-6) and dummy.cores == pytest.approx(1.0, rel=1e-6)
    assert sub.a_ms == pytest.approx(A_SUB, rel=1e-6) and sub.cores == pytest.approx(C_SUB, rel=1e-6)
    assert dummy.b_ms == pytest.approx(B, rel=1e-6) and sub.points == 6  # the row over the cap is left out
    assert model.memory == pytest.approx((BASE, PER_WORKER, PER_ENV), rel=1e-6)
    assert model.loads == (0.5, 0.7)
    text = scaling_model.describe({"mpe": model}, cores=(8,))
    assert "subproc  workers 2: a = 1.200 ms, b = 270.0 us CPU/env-step, c = 1.70 cores" in text
    # 8 cores, 8 workers at the measured efficiency (1.7 / 2 per worker), 512 envs
    assert f"{512 / (A_SUB + B * 512 / (8 * C_SUB / 2)) * 1000:,.0f} env-steps/s" in text
    scaling_model.plot(path, {"mpe": model}, tmp_path)
    assert (tmp_path / "scaling_rate.png").stat().st_size > 1000 and (tmp_path / "scaling_memory.png").exists()

#!/usr/bin/env python
"""Env-steps/s and memory against num_envs, in-process and in 2 worker processes; the model that predicts them.

    python scripts/bench/benchmark_scaling.py                         # MPE, Pong, Football; ~15 min on 2 cores
    python scripts/bench/benchmark_scaling.py --envs mpe --counts 1,16,256 --seconds 1
    python scripts/bench/benchmark_scaling.py --fit-only              # refit and replot docs/images/scaling.csv
    python scripts/bench/benchmark_scaling.py --ray-check             # + one point on a 2-node local Ray cluster

Each point (env, backend, num_envs) runs in a fresh Python process, so that its
memory (PSS of that process and its workers, :mod:`marl_vec.tools.tree_usage`) is its
own and not what earlier points left behind. A point builds the batch from the
shipped config (``mpe/simple_spread``: mpe2 simple_spread, 3 agents;
``atari/pong``: Pong with DQN preprocessing, the default engine;
``football/academy_3_vs_1_with_keeper``), resets it, steps 2 warm-up steps and
then steps a pool of random actions for ``--rounds`` rounds of ``--seconds`` of
wall time each (at least 3 steps) with a progress bar, and keeps the fastest
round (on a shared machine the others lost time to other jobs). It reports
env-steps/s, the CPU seconds of the process tree per batch step in that round, PSS, its build time and the load average. A point that does not
finish within ``--cap`` seconds (build included) is killed with its workers,
and larger counts of that env and backend are skipped; so are counts whose
memory, extrapolated from the last two points, would exceed half the free
memory. Backends: ``dummy`` (DummyVecEnv) and ``subproc`` (SubprocVecEnv, 2
workers).

The model (:mod:`scaling_model`, fitted from the CSV and drawn on the plots):
time per batch step T(n) = a + b * n / c, with a the fixed cost per batch step,
b the CPU cost per env-step, and c the effective cores (b over the slope of
T(n)); memory M(n) = base + workers * per_worker + n * per_env.

Writes ``docs/images/scaling.csv``, ``scaling_rate.png``, ``scaling_memory.png``
(and ``scaling_ray.txt`` with ``--ray-check``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "images"
CSV = OUT / "scaling.csv"
ENVS: dict[str, str] = {
    "mpe": "mpe/simple_spread",
    "pong": "atari/pong",
    "football": "football/academy_3_vs_1_with_keeper",
}
COUNTS = [1, 4, 16, 64, 256, 1024, 4096]
BACKENDS = ["dummy", "subproc"]
WORKERS = 2
FIELDS = ["env", "backend", "workers", "num_envs", "steps_per_s", "step_ms", "cpu_ms_per_step", "pss_mb",
          "build_s", "load_before", "load_after", "status", "round_rates"]


def run_point(env: str, backend: str, n: int, seconds: float, rounds: int, progress: bool) -> dict[str, Any]:
    """Measure one point in this process (called in a fresh child by :func:`point`)."""
    warnings.filterwarnings("ignore")
    import numpy as np

    import marl_vec as mv
    from marl_vec.tools import tree_usage
    from marl_vec.tools.progress import Progress
    from marl_vec.tools.rollout import RandomPolicy

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    extra = {"num_workers": WORKERS} if backend == "subproc" else {}
    venv = mv.make(ENVS[env], num_envs=n, backend=backend, **extra)
    try:
        result = venv.reset()
        policy = RandomPolicy(venv.spec, n, 0)
        pool = [np.array(policy(result)) for _ in range(8)]  # drawn up front: the policy's cost is not the env's
        for t in range(2):
            venv.step(pool[t])
        build = time.perf_counter() - started
        pids = tree_usage.tree_pids()
        timed: list[tuple[float, float, int]] = []  # (wall, cpu, steps) of each round
        with Progress(max(1, int(seconds * rounds * 10)), f"{env} {backend} x{n}", enabled=progress,
                      unit="tenth-second") as bar:
            shown, start = 0, time.perf_counter()
            for _ in range(rounds):
                cpu0, t0, steps = tree_usage.cpu_seconds(pids), time.perf_counter(), 0
                while time.perf_counter() - t0 < seconds or steps < 3:  # 3 steps at least: big counts
                    venv.step(pool[steps % len(pool)])
                    steps += 1
                    if int((time.perf_counter() - start) * 10) > shown:
                        bar.update(int((time.perf_counter() - start) * 10) - shown)
                        shown = int((time.perf_counter() - start) * 10)
                timed.append((time.perf_counter() - t0, tree_usage.cpu_seconds(pids) - cpu0, steps))
        # The best round: on a shared machine the others lost time to other jobs, not to us.
        wall, cpu, steps = min(timed, key=lambda r: r[0] / r[2])
        pss, _kind = tree_usage.memory(tree_usage.tree_pids())
    finally:
        venv.close()
    return {"env": env, "backend": backend, "workers": WORKERS if backend == "subproc" else 0, "num_envs": n,
            "steps_per_s": round(steps * n / wall, 1), "step_ms": round(1000 * wall / steps, 4),
            "cpu_ms_per_step": round(1000 * cpu / steps, 4), "pss_mb": round(pss / 2**20, 1),
            "build_s": round(build, 2), "load_before": round(load_before, 2),
            "round_rates": ";".join(f"{s * n / w:.0f}" for w, _c, s in timed),
            "load_after": round(os.getloadavg()[0], 2), "status": "ok"}


def point(env: str, backend: str, n: int, seconds: float, rounds: int, cap: float) -> dict[str, Any]:
    """One point in a fresh process (its own memory), killed with its workers after ``cap`` seconds."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--point", env, backend, str(n), "--seconds", str(seconds),
           "--rounds", str(rounds)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        # The point's process first: its forked workers then read EOF, unlink the shared
        # block and exit (killed all at once, nobody would unlink it and it would stay in
        # /dev/shm); whatever of its group is left after a grace period goes with the group.
        proc.kill()
        proc.communicate()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and _group_alive(proc.pid):
            time.sleep(0.2)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # every worker left on its own
            pass
        return {"env": env, "backend": backend, "num_envs": n, "status": f"over the {cap:g} s cap"}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"env": env, "backend": backend, "num_envs": n, "status": f"failed (exit {proc.returncode})"}
    return json.loads(lines[-1])


def _group_alive(pgid: int) -> bool:
    """Whether some process of group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def free_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def too_big(rows: list[dict[str, Any]], n: int) -> bool:
    """Would ``n`` envs need more than half the free memory, by the last two points' slope?"""
    ok = [r for r in rows if r["status"] == "ok"]
    if len(ok) < 2:
        return False
    (n0, m0), (n1, m1) = [(r["num_envs"], r["pss_mb"]) for r in ok[-2:]]
    slope = max(0.0, (m1 - m0) / max(n1 - n0, 1))
    return m1 + slope * (n - n1) > free_mb() / 2


def sweep(envs: list[str], counts: list[int], backends: list[str], seconds: float, rounds: int,
          cap: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for env in envs:
        for backend in backends:
            rows: list[dict[str, Any]] = []
            for n in counts:
                if backend == "subproc" and n < WORKERS:
                    continue
                if rows and rows[-1]["status"] != "ok":
                    row = {"env": env, "backend": backend, "num_envs": n, "status": "skipped (a smaller count failed)"}
                elif too_big(rows, n):
                    row = {"env": env, "backend": backend, "num_envs": n, "status": "skipped (memory)"}
                else:
                    row = point(env, backend, n, seconds, rounds, cap)
                rows.append(row)
                shown = {k: row.get(k) for k in ("steps_per_s", "cpu_ms_per_step", "pss_mb", "build_s", "load_before")}
                print(f"{env:8} {backend:7} x{n:<5} {row['status']:<10} {shown}", flush=True)
                if row["status"].startswith("skipped"):
                    break
            out += rows
    return out


def write_csv(rows: list[dict[str, Any]], path: Path, keep_other_envs: bool) -> list[dict[str, Any]]:
    """Write ``rows``; with ``keep_other_envs``, keep the CSV's rows of envs not measured now."""
    if keep_other_envs and path.exists():
        measured = {r["env"] for r in rows}
        with path.open() as f:
            rows = [r for r in csv.DictReader(f) if r["env"] not in measured] + rows
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="mpe,pong,football", help=f"comma-separated, of {', '.join(ENVS)}")
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--seconds", type=float, default=1.0, help="stepping time per round of a point")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per point; the fastest is kept")
    parser.add_argument("--cap", type=float, default=90.0, help="seconds a point may take, build included")
    parser.add_argument("--football-counts", default="1,4,16,64",
                        help="Football's counts (an engine per env: ~1 s to build and ~80 MB each)")
    parser.add_argument("--fit-only", action="store_true", help="refit and replot the CSV, measure nothing")
    parser.add_argument("--ray-check", action="store_true", help="measure one point on a 2-node local Ray cluster")
    parser.add_argument("--ray-envs", type=int, default=256)
    parser.add_argument("--point", nargs=3, metavar=("ENV", "BACKEND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        env, backend, n = args.point
        print(json.dumps(run_point(env, backend, int(n), args.seconds, args.rounds, progress=True)), flush=True)
        return
    import scaling_model

    OUT.mkdir(parents=True, exist_ok=True)
    if not args.fit_only:
        print(f"scaling sweep: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        envs = [e for e in args.envs.split(",") if e]
        rows: list[dict[str, Any]] = []
        for env in envs:
            counts = args.football_counts if env == "football" else args.counts
            if env == "football" and not _installed("gfootball"):
                print("football: skipped (gfootball is not installed)", flush=True)
                continue
            rows += sweep([env], [int(c) for c in counts.split(",")], args.backends.split(","), args.seconds,
                          args.rounds, args.cap)
        write_csv(rows, CSV, keep_other_envs=True)
    models = scaling_model.fit_csv(CSV)
    print(scaling_model.describe(models), flush=True)
    if args.ray_check:
        # SubprocVecEnv on the same count just before: what this machine's load gives 2 workers now
        same = point("mpe", "subproc", args.ray_envs, args.seconds, args.rounds, args.cap)
        line = scaling_model.ray_check(models["mpe"], args.ray_envs, args.seconds)
        if same["status"] == "ok":
            line += (f"; SubprocVecEnv 2 workers x {args.ray_envs} just before: {same['step_ms']:.2f} ms "
                     f"(load {same['load_before']:.1f}, {same['cpu_ms_per_step'] / same['step_ms']:.2f} cores busy)")
        print(line, flush=True)
        (OUT / "scaling_ray.txt").write_text(line + "\n")
    scaling_model.plot(CSV, models, OUT)
    print(f"wrote {CSV}, {OUT / 'scaling_rate.png'}, {OUT / 'scaling_memory.png'}", flush=True)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()

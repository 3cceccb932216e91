"""The scaling model of ``benchmark_scaling.py``: fitted from its CSV, printed, drawn, checked on Ray.

Time per batch step of n envs:  T(n) = a + b * n / c
    a  fixed cost per batch step (ms): the backend's own work (signals, copies, validation)
    b  CPU cost per env-step (ms), the slope of the process tree's CPU time per batch step
    c  effective cores: b over the slope of T(n) (1 in one process; up to the workers in processes)
so env-steps/s = n / T(n), which tends to c / b for large n. On a machine with more
cores and as many workers, c grows with the workers by the efficiency measured here
(c / workers), and a stays (it is per batch step, not per env).

Memory (PSS of the process tree):  M(n, w) = base + w * per_worker + n * per_env.

Fits are least squares on relative error (each point weighted by 1 / value^2), so the
small counts fix a and the large ones fix b / c alike.

Example:
    >>> fit_line([1, 10, 100], [1.1, 2.0, 11.0])  # doctest: +ELLIPSIS
    (1.0..., 0.1...)
"""

from __future__ import annotations

import csv
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """``(intercept, slope)`` of y = i + s * x, on relative error; both kept >= 0."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    w = 1.0 / np.maximum(y, 1e-12)
    design = np.stack([np.ones_like(x), x], axis=1) * w[:, None]
    (i, s), *_ = np.linalg.lstsq(design, y * w, rcond=None)
    if i < 0:  # a negative fixed cost is noise: refit through the origin
        i, s = 0.0, float(np.sum(w * w * x * y) / np.sum(w * w * x * x))
    return float(i), float(max(s, 0.0))


@dataclass
class BackendFit:
    backend: str
    workers: int
    a_ms: float  # fixed cost per batch step
    slope_ms: float  # wall ms per extra env
    b_ms: float  # CPU ms per env-step
    points: int

    @property
    def cores(self) -> float:
        """Effective cores c = b / slope."""
        return self.b_ms / self.slope_ms if self.slope_ms > 0 else float("nan")

    def step_ms(self, n: float, cores: float | None = None) -> float:
        return self.a_ms + self.b_ms * n / (cores or self.cores)


@dataclass
class EnvModel:
    env: str
    fits: dict[str, BackendFit] = field(default_factory=dict)
    memory: tuple[float, float, float] = (0.0, 0.0, 0.0)  # base, per worker, per env (MB)
    loads: tuple[float, float] = (0.0, 0.0)  # lowest and highest load average over its points

    def memory_mb(self, n: float, workers: int) -> float:
        base, per_worker, per_env = self.memory
        return base + workers * per_worker + n * per_env


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    for r in rows:
        for k in ("workers", "num_envs"):
            r[k] = int(r[k])
        for k in ("steps_per_s", "step_ms", "cpu_ms_per_step", "pss_mb", "build_s", "load_before", "load_after"):
            r[k] = float(r[k])
    return rows


def fit_csv(path: Path) -> dict[str, EnvModel]:
    """One :class:`EnvModel` per env of the CSV (its rows with status ok)."""
    rows = read_rows(path)
    models: dict[str, EnvModel] = {}
    for env in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env]
        model = EnvModel(env, loads=(min(min(r["load_before"], r["load_after"]) for r in mine),
                                     max(max(r["load_before"], r["load_after"]) for r in mine)))
        for backend in dict.fromkeys(r["backend"] for r in mine):
            pts = [r for r in mine if r["backend"] == backend]
            if len(pts) < 2:
                continue
            n = [r["num_envs"] for r in pts]
            a, slope = fit_line(n, [r["step_ms"] for r in pts])
            _, b = fit_line(n, [r["cpu_ms_per_step"] for r in pts])
            model.fits[backend] = BackendFit(backend, pts[0]["workers"], a, slope, b, len(pts))
        x = np.array([[1.0, r["workers"], r["num_envs"]] for r in mine])
        y = np.array([r["pss_mb"] for r in mine])
        w = 1.0 / y
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
        model.memory = tuple(float(c) for c in coef)  # type: ignore[assignment]
        models[env] = model
    return models


def describe(models: dict[str, EnvModel], cores: Sequence[int] = (8, 32)) -> str:
    """The fitted constants, and what they predict for ``cores`` cores with as many workers."""
    out = ["model: T(n) = a + b * n / c  (ms per batch step of n envs);  M(n, w) = base + w * per_worker + n * per_env"]
    for m in models.values():
        out.append(f"{m.env} (load {m.loads[0]:.1f}-{m.loads[1]:.1f}):")
        for f in m.fits.values():
            out.append(f"  {f.backend:8} workers {f.workers}: a = {f.a_ms:.3f} ms, b = {1000 * f.b_ms:.1f} us CPU/env-step, "
                       f"c = {f.cores:.2f} cores, ceiling c/b = {f.cores / f.b_ms * 1000:,.0f} env-steps/s ({f.points} points)")
        base, per_worker, per_env = m.memory
        out.append(f"  memory: base {base:.0f} MB + {per_worker:.0f} MB per worker + {1024 * per_env:.0f} kB per env")
        sub = m.fits.get("subproc")
        if sub and sub.workers:
            eff = sub.cores / sub.workers
            for k in cores:
                n = 64 * k
                rate = n / sub.step_ms(n, eff * k) * 1000
                out.append(f"  predicted on {k} cores, {k} workers, {n} envs: {rate:,.0f} env-steps/s "
                           f"(efficiency {eff:.2f} per worker), {m.memory_mb(n, k) / 1024:.1f} GB")
    return "\n".join(out)


def ray_check(model: EnvModel, n: int, seconds: float) -> str:
    """Measure mpe on a Ray cluster of two local nodes (1 CPU each), against the model's prediction.

    The fixed cost a of Ray is measured at n = 2 (one env per actor); the prediction at
    ``n`` is that a plus b * n / c with b from the in-process fit and c from the 2-worker
    fit. Every Ray process is stopped before this returns.
    """
    from ray.cluster_utils import Cluster

    import marl_vec as mv
    from marl_vec.envs import make_env_fn

    temp = tempfile.mkdtemp(prefix="mvsc", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": temp,
                                                            "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        address = cluster.address
        cluster.wait_for_nodes()
        fn = make_env_fn("pettingzoo", "mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25, "continuous_actions": False})
        load = os.getloadavg()[0]
        measured = {}
        for count in (2, n):
            with mv.RayVecEnv([fn] * count, env_seed=0, num_workers=2, address=cluster.address) as venv:
                measured[count] = _step_ms(venv, count, seconds)
                import ray

                nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    finally:
        cluster.shutdown()
    dummy, sub = model.fits["dummy"], model.fits["subproc"]
    predicted = measured[2] + dummy.b_ms * (n - 2) / sub.cores
    pure = sub.step_ms(n)
    return (f"Ray, 2 local nodes of 1 CPU each (address {address}), mpe x {n}, 2 actors "
            f"(load {load:.1f} before): measured {measured[n]:.2f} ms per batch step = {n / measured[n] * 1000:,.0f} "
            f"env-steps/s; predicted {predicted:.2f} ms (Ray's fixed cost {measured[2]:.2f} ms measured at 2 envs "
            f"+ b {1000 * dummy.b_ms:.1f} us x {n - 2} / c {sub.cores:.2f}) = {n / predicted * 1000:,.0f} env-steps/s; "
            f"measured / predicted time {measured[n] / predicted:.2f}; the subproc model alone says {pure:.2f} ms"
            + (f"; {nodes} live nodes" if nodes else ""))


def _step_ms(venv: Any, n: int, seconds: float) -> float:
    from marl_vec.tools.rollout import RandomPolicy

    result = venv.reset()
    policy = RandomPolicy(venv.spec, n, 0)
    pool = [np.array(policy(result)) for _ in range(8)]
    for t in range(3):
        venv.step(pool[t])
    steps, t0 = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - t0 < seconds:
        venv.step(pool[steps % 8])
        steps += 1
    return 1000 * (time.perf_counter() - t0) / steps


def plot(path: Path, models: dict[str, EnvModel], out: Path) -> None:
    """``scaling_rate.png`` (env-steps/s, points and model lines) and ``scaling_memory.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(path)
    envs = list(models)
    colors = {"dummy": "tab:blue", "subproc": "tab:orange"}
    for kind in ("rate", "memory"):
        fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 4), squeeze=False)
        for ax, env in zip(axes[0], envs):
            m = models[env]
            for backend, color in colors.items():
                pts = [r for r in rows if r["env"] == env and r["backend"] == backend]
                if not pts:
                    continue
                n = np.array([r["num_envs"] for r in pts], float)
                label = "in-process" if backend == "dummy" else f"{pts[0]['workers']} workers"
                grid = np.geomspace(max(1, n.min()), n.max(), 50)
                if kind == "rate":
                    ax.plot(n, [r["steps_per_s"] for r in pts], "o", color=color, label=label)
                    if backend in m.fits:
                        f = m.fits[backend]
                        ax.plot(grid, 1000 * grid / np.array([f.step_ms(g) for g in grid]), "-", color=color, alpha=0.6,
                                label=f"model a={f.a_ms:.2f} ms, b={1000 * f.b_ms:.0f} us, c={f.cores:.2f}")
                else:
                    ax.plot(n, [r["pss_mb"] for r in pts], "o", color=color, label=label)
                    ax.plot(grid, [m.memory_mb(g, pts[0]["workers"]) for g in grid], "-", color=color, alpha=0.6)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("num_envs")
            ax.set_ylabel("env-steps/s" if kind == "rate" else "PSS of the process tree (MB)")
            ax.set_title(f"{env} (load {m.loads[0]:.1f}-{m.loads[1]:.1f}, 2 cores)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        if kind == "memory":
            fig.suptitle("model: base + workers x per_worker + num_envs x per_env", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / f"scaling_{kind}.png", dpi=90)
        plt.close(fig)

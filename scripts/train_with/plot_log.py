#!/usr/bin/env python
"""Plot a training log (CSV, one row per batch) against frames, one panel per column.

For the logs that ``scripts/train_with/benchmarl_mappo.py --log`` writes: each
column given with ``--y`` is drawn as one dot per row and a line, the mean of
the last ``--window`` rows. ``--compare N`` prints, per column, the mean and its
standard error (std / sqrt(N)) over the first N rows and over the last N rows,
to judge whether a curve rose beyond its noise. Rows must be independent for
that error to mean anything: use per-batch columns (``batch_*``), not the
``last100_*`` running means, whose rows overlap.

Example:
    python scripts/train_with/plot_log.py football.csv --y batch_return batch_win --out curve.png --compare 10
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from marl_vec.plots import moving_average
from marl_vec.envs.registry import require


def read_columns(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """``frames`` and the named columns as float arrays (empty cells are NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path} has no rows")
    missing = [n for n in ("frames", *names) if n not in rows[0]]
    if missing:
        raise SystemExit(f"{path} has no column(s) {missing}; it has {list(rows[0])}")
    return {n: np.array([float(r[n]) if r[n] != "" else math.nan for r in rows]) for n in ("frames", *names)}


def window_means(values: np.ndarray, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(mean, standard error) over the first n and over the last n values, NaNs left out."""
    out = []
    for part in (values[:n], values[-n:]):
        part = part[~np.isnan(part)]
        err = float(part.std(ddof=1) / math.sqrt(len(part))) if len(part) > 1 else math.nan
        out.append((float(part.mean()) if len(part) else math.nan, err))
    return out[0], out[1]


def plot(columns: dict[str, np.ndarray], names: Sequence[str], out: Path, window: int, title: str | None) -> None:
    require("matplotlib", "examples", "plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 2.6 * len(names) + 0.6), dpi=100)
    FigureCanvasAgg(fig)
    frames = columns["frames"]
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        values = columns[name]
        keep = ~np.isnan(values)
        ax.plot(frames[keep], values[keep], ".", color="tab:blue", alpha=0.6, markersize=6, markeredgewidth=0,
                label="one batch")
        ax.plot(frames[keep], moving_average(values[keep], window), color="tab:blue", linewidth=2,
                label=f"mean of last {window} batches")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    axes[-1].set_xlabel("environment steps (frames, all envs)")
    if title:
        axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(out, format="png")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="CSV with a 'frames' column")
    parser.add_argument("--y", nargs="+", required=True, help="columns to plot, one panel each")
    parser.add_argument("--out", type=Path, default=None, help="PNG to write (default: no picture)")
    parser.add_argument("--window", type=int, default=10, help="rows in the moving mean")
    parser.add_argument("--compare", type=int, default=None, metavar="N", help="first N rows against last N rows")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    columns = read_columns(args.log, args.y)
    if args.out is not None:
        plot(columns, args.y, args.out, args.window, args.title)
        print(f"wrote {args.out}")
    if args.compare:
        n = args.compare
        frames = columns["frames"]
        print(f"first {n} rows: frames {frames[0]:.0f}-{frames[:n][-1]:.0f}; "
              f"last {n} rows: frames {frames[-n:][0]:.0f}-{frames[-1]:.0f}")
        for name in args.y:
            (a, a_err), (b, b_err) = window_means(columns[name], n)
            print(f"{name}: first {a:.3f} ± {a_err:.3f}, last {b:.3f} ± {b_err:.3f}, "
                  f"difference {b - a:+.3f} ({(b - a) / math.hypot(a_err, b_err):+.1f} standard errors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

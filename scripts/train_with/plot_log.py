#!/usr/bin/env python
"""Plot a training log (CSV, one row per batch) against frames, one panel per column.

For the logs that ``scripts/train_with/benchmarl_mappo.py --log`` writes: each
column given with ``--y`` is drawn as one dot per row and a line, the mean of
the last ``--window`` rows. ``--compare N`` prints, per column, the mean and its
standard error (std / sqrt(N)) over the first N rows and over the last N rows,
to judge whether a curve rose beyond its noise. Rows must be independent for
that error to mean anything: use per-batch columns (``batch_*``), not the
``last100_*`` running means, whose rows overlap. ``--table K`` prints a markdown
table over windows of K rows: the first ``--y`` column's mean and standard error,
and the win rate over disjoint 100-episode windows of ``last100_win``.

``--x seconds`` draws against wall time instead of frames.

Example:
    python scripts/train_with/plot_log.py football.csv --y batch_return batch_win --out curve.png --compare 10 \\
        --baseline batch_return=0.333
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from marl_vec.tools.plots import moving_average
from marl_vec.envs.registry import require


def read_columns(path: Path, names: Sequence[str], x: str = "frames") -> dict[str, np.ndarray]:
    """``frames`` (or the ``x`` column) and the named columns as float arrays (empty cells are NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path} has no rows")
    wanted = list(dict.fromkeys(("frames", x, *names)))
    missing = [n for n in wanted if n not in rows[0]]
    if missing:
        raise SystemExit(f"{path} has no column(s) {missing}; it has {list(rows[0])}")
    return {n: np.array([float(r[n]) if r[n] != "" else math.nan for r in rows]) for n in wanted}


def window_means(values: np.ndarray, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(mean, standard error) over the first n and over the last n values, NaNs left out."""
    out = []
    for part in (values[:n], values[-n:]):
        part = part[~np.isnan(part)]
        err = float(part.std(ddof=1) / math.sqrt(len(part))) if len(part) > 1 else math.nan
        out.append((float(part.mean()) if len(part) else math.nan, err))
    return out[0], out[1]


def window_table(path: Path, k: int, return_column: str, win_column: str = "last100_win") -> list[str]:
    """A markdown table over windows of ``k`` rows (the last one may be shorter): the return's mean and standard error
    over the rows, and the win rate over disjoint 100-episode windows inside each window.

    ``win_column`` is a running mean over the last 100 episodes (marl_vec's
    ``last100_win``), so rows overlap; the table takes, from each window's end
    backwards, rows whose 100 episodes do not overlap and stay inside the window
    (needs the ``episodes`` column: episodes finished so far).
    """
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for name in ("frames", "seconds", "episodes", return_column, win_column):
        if rows and name not in rows[0]:
            raise SystemExit(f"{path} has no column {name!r}; it has {list(rows[0])}")
    episodes = [int(r["episodes"]) for r in rows]
    lines = ["| frames | minutes | episodes | return: mean ± s.e. over batches | win rate: wins / episodes ± s.e. |",
             "|---|---|---|---|---|"]
    for start in range(0, len(rows), k):
        stop = min(start + k, len(rows))  # the last window takes the rows left over
        if stop - start < 2:
            break
        values = np.array([float(r[return_column]) if r[return_column] != "" else math.nan for r in rows[start:stop]])
        values = values[~np.isnan(values)]
        before = episodes[start - 1] if start else 0
        wins = counted = 0
        boundary = math.inf
        for i in range(stop - 1, start - 1, -1):
            if episodes[i] >= 100 and episodes[i] - 100 >= before and episodes[i] <= boundary:
                wins += round(100 * float(rows[i][win_column]))
                counted += 100
                boundary = episodes[i] - 100
        rate = f"{wins}/{counted} = {wins / counted:.3f} ± {math.sqrt(wins / counted * (1 - wins / counted) / counted):.3f}" \
            if counted else "-"
        lines.append(f"| {rows[start]['frames']}-{rows[stop - 1]['frames']} | {float(rows[stop - 1]['seconds']) / 60:.0f} "
                     f"| {episodes[stop - 1]} | {values.mean():.3f} ± {values.std(ddof=1) / math.sqrt(len(values)):.3f} "
                     f"| {rate} |")
    return lines


X_LABELS = {"frames": "environment steps (frames, all envs)", "seconds": "wall time (s)"}


def plot(columns: dict[str, np.ndarray], names: Sequence[str], out: Path, window: int, title: str | None,
         baselines: dict[str, float] | None = None, x: str = "frames") -> None:
    require("matplotlib", "examples", "plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 2.6 * len(names) + 0.6), dpi=100)
    FigureCanvasAgg(fig)
    frames = columns[x]
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        values = columns[name]
        keep = ~np.isnan(values)
        ax.plot(frames[keep], values[keep], ".", color="tab:blue", alpha=0.6, markersize=6, markeredgewidth=0,
                label="one row (one batch)")
        ax.plot(frames[keep], moving_average(values[keep], window), color="tab:blue", linewidth=2,
                label=f"mean of last {window} rows")
        if baselines and name in baselines:
            ax.axhline(baselines[name], color="tab:gray", linestyle="--", label=f"random policy ({baselines[name]:.3f})")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    axes[-1].set_xlabel(X_LABELS.get(x, x))
    if title:
        axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(out, format="png")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="CSV with a 'frames' column")
    parser.add_argument("--y", nargs="+", required=True, help="columns to plot, one panel each")
    parser.add_argument("--x", default="frames", help="the x axis column: frames (default) or e.g. seconds")
    parser.add_argument("--out", type=Path, default=None, help="PNG to write (default: no picture)")
    parser.add_argument("--window", type=int, default=10, help="rows in the moving mean")
    parser.add_argument("--compare", type=int, default=None, metavar="N", help="first N rows against last N rows")
    parser.add_argument("--title", default=None)
    parser.add_argument("--table", type=int, default=None, metavar="K",
                        help="print a markdown table over windows of K rows (return: the first --y column)")
    parser.add_argument("--baseline", action="append", default=[], metavar="COLUMN=VALUE",
                        help="a dashed line in that column's panel (e.g. the random policy's mean)")
    args = parser.parse_args(argv)
    columns = read_columns(args.log, args.y, args.x)
    baselines = {}
    for item in args.baseline:
        name, sep, value = item.partition("=")
        if not sep or name not in args.y:
            parser.error(f"--baseline needs COLUMN=VALUE with COLUMN one of {args.y}, got {item!r}")
        baselines[name] = float(value)
    if args.out is not None:
        plot(columns, args.y, args.out, args.window, args.title, baselines, args.x)
        print(f"wrote {args.out}")
    if args.table:
        print("\n".join(window_table(args.log, args.table, args.y[0])))
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

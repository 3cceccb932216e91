"""The benchmark scripts' env-steps/s against num_envs: the CSV and the log-log plot.

One idea: rows ``{"candidate", "num_envs", "env_steps_per_s", ...}`` (one per
candidate and size) written to a CSV and drawn as one line per candidate.
Used by scripts/bench/benchmark_jaxmarl.py and scripts/bench/benchmark_vmas.py (run as
scripts: their folder is on ``sys.path``).

    >>> write_rows([{"candidate": "a", "num_envs": 1, "env_steps_per_s": 10}], "/tmp/x.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
from collections.abc import Callable


def write_rows(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot_scaling(rows: list[dict], path: str, title: str, xlabel: str,
                 style_of: Callable[[str], tuple[str, str]]) -> None:
    """Log-log env-steps/s against num_envs, one line per candidate; ``style_of(candidate)``
    gives its (line style, colour)."""
    from marl_vec.tools.plots import require_matplotlib

    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(r["candidate"] for r in rows):
        mine = sorted((r for r in rows if r["candidate"] == name), key=lambda r: r["num_envs"])
        style, color = style_of(name)
        ax.plot([r["num_envs"] for r in mine], [r["env_steps_per_s"] for r in mine], style, marker="o",
                color=color, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["num_envs"] for r in rows})
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("env-steps/s")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

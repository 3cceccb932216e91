"""Pictures of a run: episode returns over time, as a PNG.

Uses matplotlib's Agg canvas directly (no pyplot, no display, no global backend
switch), so it works on headless machines and inside other programs.

Example:
    >>> plot_returns([-30.0, -25.0, -20.0], "returns.png", title="simple_spread")  # doctest: +SKIP
    'returns.png'
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from marl_vec.envs.registry import require


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start).

    >>> moving_average([1.0, 3.0, 5.0, 7.0], 2).tolist()
    [1.0, 2.0, 4.0, 6.0]
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    x = np.asarray(values, dtype=np.float64)
    sums = np.cumsum(np.concatenate([[0.0], x]))
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (sums[idx] - sums[lo]) / (idx - lo)


def plot_returns(
    returns: Sequence[float],
    path: str | os.PathLike,
    title: str | None = None,
    window: int = 100,
    baseline: float | None = None,
    size: tuple[float, float] = (7.0, 4.0),
    dpi: int = 100,
) -> str:
    """Save a plot of episode returns in the order they finished to ``path`` (PNG).

    Each episode is a faint dot, the mean of the last ``window`` episodes a line;
    ``baseline`` (e.g. the random policy's mean return) is drawn as a dashed line.
    The picture is ``size * dpi`` pixels (700 x 400 by default).
    """
    returns = [float(r) for r in returns]
    if not returns:
        raise ValueError("plot_returns needs at least one finished episode; the run ended none (run more steps)")
    require("matplotlib", "examples", "plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    episodes = np.arange(1, len(returns) + 1)
    ax.plot(episodes, returns, ".", color="tab:blue", alpha=0.15, markersize=2, label="episode return")
    ax.plot(episodes, moving_average(returns, window), color="tab:blue", label=f"mean of last {window}")
    if baseline is not None:
        ax.axhline(baseline, color="tab:gray", linestyle="--", label=f"random policy ({baseline:.1f})")
    ax.set_xlabel("episode")
    ax.set_ylabel("return")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    # Why fixed size and dpi: tests and README rely on the picture's pixel size.
    fig.savefig(os.fspath(path), format="png")
    return os.fspath(path)

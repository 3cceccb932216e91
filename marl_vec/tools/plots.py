"""Pictures of a run: episode returns over time, as a PNG.

Uses matplotlib's Agg canvas directly (no pyplot, no display, no global backend
switch), so it works on headless machines and inside other programs.

Examples:
    >>> plot_returns([-30.0, -25.0, -20.0], "returns.png", title="simple_spread")
    'returns.png'
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from marl_vec.envs.registry import require


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start).

    ```pycon
    >>> moving_average([1.0, 3.0, 5.0, 7.0], 2).tolist()
    [1.0, 2.0, 4.0, 6.0]
    ```
    """
    x = _series(values, window)
    sums = np.cumsum(np.concatenate([[0.0], x]))
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (sums[idx] - sums[lo]) / (idx - lo)


def _series(values: Sequence[float], window: int) -> np.ndarray:
    """``values`` as float64 numbers, once ``window`` is known to be a valid window."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    return np.asarray(values, dtype=np.float64)


def moving_std(values: Sequence[float], window: int) -> np.ndarray:
    """Standard deviation of the last ``window`` values at each point (fewer at the start).

    ```pycon
    >>> moving_std([1.0, 3.0, 5.0, 9.0], 2).tolist()
    [0.0, 1.0, 1.0, 2.0]
    ```
    """
    x = _series(values, window)
    mean = moving_average(x, window)
    mean_of_squares = moving_average(x * x, window)
    return np.sqrt(np.maximum(mean_of_squares - mean * mean, 0.0))


def require_matplotlib() -> None:
    """Fail now, naming the light ``pictures`` extra, if matplotlib is missing (before a run, not after it)."""
    require("matplotlib", "pictures", "plots")


def plot_returns(
    returns: Sequence[float],
    path: str | os.PathLike,
    title: str | None = None,
    window: int = 100,
    baseline: float | None = None,
    size: tuple[float, float] = (7.0, 4.0),
    dpi: int = 100,
    env_name: str | None = None,
    num_envs: int | None = None,
) -> str:
    """Save a plot of episode returns in the order they finished to ``path`` (PNG).

    The mean of the last ``window`` episodes is a line inside a shaded band of one
    standard deviation of those episodes either side (the spread at a glance), and
    each episode a small dot; ``baseline`` (e.g. the random policy's mean return) is
    a dashed line. ``env_name`` and ``num_envs`` go into the axis labels. The
    picture is ``size * dpi`` pixels (700 x 400 by default).
    """
    fig = returns_figure(returns, title, window, baseline, size, dpi, env_name, num_envs)
    # Why fixed size and dpi: tests and README rely on the picture's pixel size.
    fig.savefig(os.fspath(path), format="png")
    return os.fspath(path)


def returns_figure(
    returns: Sequence[float],
    title: str | None = None,
    window: int = 100,
    baseline: float | None = None,
    size: tuple[float, float] = (7.0, 4.0),
    dpi: int = 100,
    env_name: str | None = None,
    num_envs: int | None = None,
) -> Any:
    """The matplotlib Figure that `plot_returns` saves (arguments as there)."""
    returns = [float(r) for r in returns]
    if not returns:
        raise ValueError("plot_returns needs at least one finished episode; the run ended none (run more steps)")
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    episodes = np.arange(1, len(returns) + 1)
    mean, spread = moving_average(returns, window), moving_std(returns, window)
    ax.plot(episodes, returns, ".", color="tab:blue", alpha=0.5, markersize=3.5, markeredgewidth=0,
            label="one episode")
    ax.fill_between(episodes, mean - spread, mean + spread, color="tab:blue", alpha=0.2, linewidth=0,
                    label=f"± 1 std of last {window}")
    ax.plot(episodes, mean, color="tab:blue", linewidth=2, label=f"mean of last {window}")
    if baseline is not None:
        ax.axhline(baseline, color="tab:gray", linestyle="--", label=f"random policy ({baseline:.1f})")
    by = f" by the {num_envs} envs" if num_envs else ""
    ax.set_xlabel(f"episodes finished{by}, in order")
    ax.set_ylabel(f"{env_name}: episode return" if env_name else "episode return")
    ax.set_xlim(1, max(len(returns), 2))
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig

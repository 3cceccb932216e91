"""Plots of episode returns (marl_vec.tools.plots, `marl-vec run --plot`)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from marl_vec.tools.cli import main
from marl_vec.tools.plots import moving_average, moving_std, plot_returns, returns_figure

Image = pytest.importorskip("PIL.Image")


def test_moving_average_over_a_window():
    np.testing.assert_array_equal(moving_average([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_array_equal(moving_average([2.0, 4.0, 6.0], 100), [2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        moving_average([1.0], 0)


def test_plot_returns_writes_a_png_of_the_asked_size(tmp_path):
    path = tmp_path / "returns.png"
    rng = np.random.default_rng(0)
    out = plot_returns(list(-25 + rng.normal(size=300)), path, title="simple_spread", baseline=-26.0)
    assert out == str(path)
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size == (700, 400)
        pixels = np.asarray(im.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10  # something was drawn


def test_plot_size_follows_size_and_dpi(tmp_path):
    path = tmp_path / "small.png"
    plot_returns([1.0, 2.0], path, size=(4.0, 3.0), dpi=50)
    with Image.open(path) as im:
        assert im.size == (200, 150)


def test_plot_returns_needs_episodes(tmp_path):
    with pytest.raises(ValueError, match="at least one finished episode"):
        plot_returns([], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_cli_run_plot_flag(tmp_path, capsys):
    path = tmp_path / "run.png"
    code = main(["run", "mpe/simple_spread", "-o", "run.steps=50", "-o", "vec.num_envs=2", "--no-progress",
                 "--plot", str(path)])
    assert code == 0
    with Image.open(path) as im:
        assert im.size == (700, 400)
    out = capsys.readouterr().out
    assert "episodes         4" in out and f"plot             {path}" in out


def test_moving_std_over_a_window():
    np.testing.assert_allclose(moving_std([1.0, 3.0, 5.0, 9.0], 2), [0.0, 1.0, 1.0, 2.0], atol=1e-12)
    x = np.random.default_rng(1).normal(-25.0, 4.0, size=300)
    expected = [np.std(x[max(0, i - 99):i + 1]) for i in range(300)]  # a plain loop over the windows
    np.testing.assert_allclose(moving_std(x, 100), expected, rtol=1e-9)
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        moving_std([1.0], 0)


def test_returns_figure_has_a_spread_band_and_named_axes():
    x = [-30.0, -20.0, -25.0, -35.0]
    fig = returns_figure(x, title="t", window=2, env_name="mpe2.simple_spread_v3", num_envs=8)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "episodes finished by the 8 envs, in order"
    assert ax.get_ylabel() == "mpe2.simple_spread_v3: episode return"
    assert ax.get_title() == "t"
    band = ax.collections[0].get_paths()[0].vertices
    mean, spread = moving_average(x, 2), moving_std(x, 2)
    # The band's outline runs along mean + spread and mean - spread at every episode.
    for episode, (m, s) in enumerate(zip(mean, spread), start=1):
        ys = band[np.isclose(band[:, 0], episode), 1]
        assert np.isclose(ys.max(), m + s) and np.isclose(ys.min(), m - s)
    lines = {line.get_label(): line.get_ydata() for line in ax.lines}
    np.testing.assert_array_equal(lines["mean of last 2"], mean)
    np.testing.assert_array_equal(lines["one episode"], x)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["one episode", "± 1 std of last 2", "mean of last 2"]


def test_run_plot_without_matplotlib_fails_before_the_run(tmp_path, capsys, monkeypatch):
    from marl_vec.tools import cli

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import of it raises ImportError, as when not installed
    monkeypatch.setattr(cli, "make_from_config", lambda cfg: pytest.fail("the run started before the check"))
    assert main(["run", "--no-progress", "--plot", str(tmp_path / "returns.png")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("marl-vec: matplotlib is needed for plots but cannot be imported (")
    assert err.rstrip().endswith("install it with: pip install 'marl_vec[pictures]'")
    assert not (tmp_path / "returns.png").exists()

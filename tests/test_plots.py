"""Plots of episode returns (marl_vec.plots, `marl-vec run --plot`)."""

from __future__ import annotations

import numpy as np
import pytest

from marl_vec.cli import main
from marl_vec.plots import moving_average, plot_returns

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

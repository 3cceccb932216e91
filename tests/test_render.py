"""Tiled frames and GIFs of a whole batch (marl_vec.render, `marl-vec render`)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import marl_vec as mv
from marl_vec import cli
from marl_vec.cli import main
from marl_vec.envs.extras import MissingExtraError
from marl_vec.render import PROGRESS_HEIGHT, record_gif, save_gif, tile_frames, with_progress

Image = pytest.importorskip("PIL.Image")


def _frame(value: int, h: int = 2, w: int = 3) -> np.ndarray:
    return np.full((h, w, 3), value, np.uint8)


def test_tile_frames_places_frames_row_by_row_with_padding():
    tiled = tile_frames([_frame(1), _frame(2), _frame(3)], cols=2, pad=1)
    expected = np.zeros((5, 7), np.uint8)
    expected[0:2, 0:3] = 1
    expected[0:2, 4:7] = 2
    expected[3:5, 0:3] = 3  # the fourth cell stays black
    assert tiled.shape == (5, 7, 3) and tiled.dtype == np.uint8
    for channel in range(3):
        np.testing.assert_array_equal(tiled[..., channel], expected)


def test_tile_frames_default_grid_is_square_and_drops_alpha():
    rgba = np.full((2, 2, 4), 9, np.uint8)
    tiled = tile_frames([rgba] * 5, pad=0)
    assert tiled.shape == (4, 6, 3)  # ceil(sqrt(5)) = 3 columns, 2 rows of 2 x 2 frames
    assert (tiled[:2] == 9).all() and (tiled[2:, :4] == 9).all() and not tiled[2:, 4:].any()


def test_tile_frames_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"envs \[1\] returned no frame; .*render_mode='rgb_array'"):
        tile_frames([_frame(1), None])
    with pytest.raises(ValueError, match=r"env 1 rendered a frame of shape \(4, 3, 3\); env 0 rendered \(2, 3, 3\)"):
        tile_frames([_frame(1), _frame(1, h=4)])
    with pytest.raises(ValueError, match="at least one frame"):
        tile_frames([])
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        tile_frames([np.zeros((2, 2), np.uint8)])


def test_progress_bar_grows_with_the_step():
    frame = _frame(5, h=1, w=10)
    bars = [with_progress(frame, t, 4)[1:, :, 0] for t in range(5)]
    assert [int((bar[0] == 255).sum()) for bar in bars] == [0, 2, 5, 8, 10]
    assert all(bar.shape == (PROGRESS_HEIGHT, 10) for bar in bars)
    assert (with_progress(frame, 2, 4)[0] == 5).all()


def test_save_gif_errors():
    with pytest.raises(ValueError, match="at least one frame"):
        save_gif([], "x.gif")
    with pytest.raises(ValueError, match="fps must be > 0"):
        save_gif([_frame(1)], "x.gif", fps=0)


def _render_venv(num_envs: int) -> mv.VecEnv:
    cfg = mv.load_config("mpe/simple_spread", {"env.kwargs.render_mode": "rgb_array", "vec.num_envs": num_envs})
    return mv.make(cfg)


def test_record_gif_of_simple_spread_has_one_frame_per_step(tmp_path):
    path = tmp_path / "run.gif"
    with _render_venv(4) as venv:
        frames = record_gif(venv, path, steps=6, max_side=64, fps=10)
    assert frames == 7
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        assert gif.n_frames == 7
        assert gif.size == (2 * 64 + 2, 2 * 64 + 2 + PROGRESS_HEIGHT)  # 2 x 2 tiles, 2 px apart, bar below
        assert gif.info["duration"] == 100 and gif.info["loop"] == 0
        gif.seek(6)
        last = np.asarray(gif.convert("RGB"))
    # the last frame's progress bar spans the whole width
    assert (last[-PROGRESS_HEIGHT:] > 200).all()


@pytest.mark.filterwarnings("ignore:.*render method without specifying any render mode")
def test_record_gif_refuses_envs_that_do_not_render(tmp_path):
    with mv.make("mpe/simple_spread", num_envs=2) as venv:  # no render_mode
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            record_gif(venv, tmp_path / "x.gif", steps=1)
    assert not (tmp_path / "x.gif").exists()


def test_cli_render_sets_render_mode_and_writes_the_gif(tmp_path, capsys):
    path = tmp_path / "cli.gif"
    code = main(["render", "mpe/simple_spread", "-o", "vec.num_envs=2", "--out", str(path), "--steps", "3",
                 "--size", "50"])
    assert code == 0
    with Image.open(path) as gif:
        assert gif.n_frames == 4
        assert gif.size == (2 * 50 + 2, 50 + PROGRESS_HEIGHT)  # ceil(sqrt(2)) = 2 columns, 1 row
    assert f"gif              {path}  (4 frames)" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:.*render method without specifying any render mode")
def test_cli_render_error_when_frames_are_missing(tmp_path, capsys):
    code = main(["render", "gym/cartpole", "-o", "vec.num_envs=2", "-o", "env.kwargs.render_mode=null",
                 "--out", str(tmp_path / "x.gif"), "--steps", "1"])
    assert code == 2
    assert "returned no frame" in capsys.readouterr().err


def test_cli_render_needs_out_and_valid_steps(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["render", "mpe/simple_spread"])
    assert "--out" in capsys.readouterr().err
    assert main(["render", "--out", str(tmp_path / "x.gif"), "--steps", "-1"]) == 2
    assert "--steps must be >= 0, --size >= 1 and --fps > 0; got --steps -1" in capsys.readouterr().err
    assert main(["render", "--out", str(tmp_path / "x.gif"), "--size", "0"]) == 2
    assert "--size 0" in capsys.readouterr().err


def _no_pil(monkeypatch) -> None:
    for name in ("PIL", "PIL.Image"):
        monkeypatch.setitem(sys.modules, name, None)  # import of it raises ImportError, as without Pillow


def test_without_pillow_render_says_which_light_extra_to_install_before_starting_anything(tmp_path, capsys, monkeypatch):
    _no_pil(monkeypatch)
    monkeypatch.setattr(cli, "make_from_config", lambda cfg: pytest.fail("the envs were made before the check"))
    assert main(["render", "mpe/simple_spread", "--out", str(tmp_path / "run.gif"), "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("marl-vec: PIL is needed for GIFs (Pillow) but cannot be imported (")
    assert err.rstrip().endswith("install it with: pip install 'marl_vec[pictures]'")
    assert not (tmp_path / "run.gif").exists()


def test_without_pillow_record_gif_fails_before_the_rollout(tmp_path, monkeypatch):
    _no_pil(monkeypatch)
    with mv.make("mpe/simple_spread", num_envs=2, env_seed=0) as venv:
        monkeypatch.setattr(venv, "reset", lambda **kw: pytest.fail("the rollout started before the check"))
        with pytest.raises(MissingExtraError, match=r"pip install 'marl_vec\[pictures\]'"):
            record_gif(venv, tmp_path / "x.gif", steps=1, max_side=10)


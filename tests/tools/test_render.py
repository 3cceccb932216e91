"""Tiled frames and GIFs of a whole batch (marl_vec.tools.render, `marl-vec render`)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.tools import cli
from marl_vec.tools.cli import main
from marl_vec.envs.extras import MissingExtraError
from marl_vec.tools.render import (PROGRESS_HEIGHT, EpisodeProgress, record_gif, save_gif, tile_frames, tile_label,
                             tiled_frame, with_progress)
from tests.helpers.scripted_envs import DyingAgentEnv

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


def _progress_run(mode: str, steps: int = 14):
    """Each step's result and the counters after it, on DyingAgentEnv (6-step episodes, an agent dies at 3)."""
    venv = mv.DummyVecEnv([lambda: DyingAgentEnv(episode_len=6)] * 2, env_seed=0, autoreset=mode)
    r = venv.reset()
    counter = EpisodeProgress(venv.num_envs, mode)
    seen = []
    for _ in range(steps):
        r = venv.step(r.avail_actions.argmax(-1))
        counter.update(r)
        seen.append((r, counter.steps.copy(), counter.returns.copy()))
    venv.close()
    return seen


def test_tile_labels_count_the_episode_step_and_return_in_same_step_mode():
    seen = _progress_run("same_step")
    ends = 0
    for t, (r, steps, returns) in enumerate(seen):
        for i in range(2):
            if r.done[i]:  # the tile shows the next episode's start; the ended one adds up to its summary
                ends += 1
                assert (steps[i], returns[i]) == (0, 0.0)
                prev_steps, prev_returns = seen[t - 1][1][i], seen[t - 1][2][i]
                assert prev_steps + 1 == r.infos[i]["episode"]["length"] == 6
                assert prev_returns + r.reward[i].astype(np.float64).mean() == pytest.approx(r.infos[i]["episode"]["return"], abs=1e-9)
            else:
                assert steps[i] == t % 6 + 1
    assert ends == 4


def test_tile_labels_restart_at_the_step_after_the_end_in_next_step_mode():
    seen = _progress_run("next_step")
    r, steps, returns = seen[5]  # the episodes end at the 6th step: the tile still shows them
    assert r.done.all() and steps.tolist() == [6, 6]
    assert returns.tolist() == pytest.approx([r.infos[i]["episode"]["return"] for i in range(2)], abs=1e-12)
    assert seen[6][1].tolist() == [0, 0] and seen[6][2].tolist() == [0.0, 0.0]  # the reset step
    assert seen[7][1].tolist() == [1, 1]


def test_tile_labels_keep_the_ended_episode_in_one_episode_mode():
    seen = _progress_run("one_episode", steps=9)
    final = seen[5]
    for r, steps, returns in seen[5:]:
        assert steps.tolist() == [6, 6] and returns.tolist() == final[2].tolist()
    assert final[2].tolist() == pytest.approx([final[0].infos[i]["episode"]["return"] for i in range(2)], abs=1e-12)


def test_record_gif_labels_each_tile_unless_asked_not_to(tmp_path):
    assert tile_label(3, 12, -4.254) == "env 3  step 12  return -4.25"
    labels = [tile_label(i, 0, 0.0) for i in range(4)]
    with _render_venv(4) as venv:
        venv.reset(seed=0)
        plain, labelled = tiled_frame(venv, max_side=96), tiled_frame(venv, max_side=96, labels=labels)
        assert record_gif(venv, tmp_path / "run.gif", steps=2, max_side=96) == 3
        assert record_gif(venv, tmp_path / "plain.gif", steps=2, max_side=96, labels=False) == 3
    assert plain.shape == labelled.shape == (2 * 96 + 2, 2 * 96 + 2, 3)
    for y, x in [(0, 0), (0, 98), (98, 0), (98, 98)]:  # each tile's top-left corner: a black box with text
        box = labelled[y:y + 10, x:x + 40]
        assert (box != plain[y:y + 10, x:x + 40]).any() and box.min() < 30 and box.max() > 200
        assert (labelled[y + 20:y + 96, x:x + 96] == plain[y + 20:y + 96, x:x + 96]).all()  # the env's own frame
    with Image.open(tmp_path / "run.gif") as gif, Image.open(tmp_path / "plain.gif") as gif_plain:
        assert not np.array_equal(np.asarray(gif.convert("RGB")), np.asarray(gif_plain.convert("RGB")))

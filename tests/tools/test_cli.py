"""The marl-vec command: run, info, list, bench, its output off a terminal, and its errors.

Ctrl-C is tested in tests/tools/test_cli_interrupt.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from marl_vec.tools.cli import bench_notes, main

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command in a fresh process (stdout and stderr are pipes, as in a log)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYGAME_HIDE_SUPPORT_PROMPT", None)
    return subprocess.run([sys.executable, "-m", "marl_vec.tools.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_run_default_prints_a_summary(capsys):
    assert main(["run", "--no-progress", "-o", "run.steps=60", "-o", "vec.num_envs=2"]) == 0
    out = capsys.readouterr().out
    assert "mpe2.simple_spread_v3, 2 envs on dummy, 60 steps" in out
    assert "env-steps/s" in out
    assert "episodes         4" in out  # 2 envs x 60 steps / 25 steps per episode
    assert "mean return" in out and "mean length      25" in out


def test_run_names_the_backend_auto_chose(tmp_path, capsys):
    config = tmp_path / "no_backend.yaml"  # no vec.backend: the default, auto
    config.write_text("env:\n  family: gym\n  id: CartPole-v1\nvec:\n  num_envs: 2\n  num_workers: 1\n")
    assert main(["run", str(config), "--no-progress", "-o", "run.steps=5"]) == 0
    captured = capsys.readouterr()
    assert "CartPole-v1, 2 envs on subproc, 5 steps" in captured.out
    assert "backend auto -> subproc, 1 worker (no tune result for this config on this machine; vec.num_workers" \
        in captured.err


def test_info_prints_spec_and_env_info(capsys):
    assert main(["info", "mpe/simple_tag"]) == 0
    out = capsys.readouterr().out
    assert "agents         4: adversary_0, adversary_1, adversary_2, agent_0" in out
    assert "(zero-padded)" in out
    assert '"n_actions": 5, "episode_limit": 25' in out


def test_list_shows_families_and_configs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "football" in out and "marl_vec[football]" in out
    assert "mpe/simple_spread  (default)" in out


def test_list_says_which_envs_need_which_extra(capsys, monkeypatch):
    monkeypatch.setenv("SC2PATH", "/nonexistent/sc2")
    assert main(["list"]) == 0
    rows = [re.sub(" +", " ", line.strip()) for line in capsys.readouterr().out.splitlines()]
    assert "mpe2.* core install ready" in rows
    assert "pettingzoo.butterfly.* marl_vec[pettingzoo] ready" in rows
    assert "pettingzoo.sisl.* marl_vec[pettingzoo] ready" in rows
    assert "magent2.environments.* marl_vec[pettingzoo] ready" in rows
    assert "ALE/* (gymnasium ids) marl_vec[atari] ready" in rows
    assert "then: bash scripts/install/install_football.sh" in rows
    assert ("SMAC and pysc2 maps marl_vec[sc2] missing: the StarCraft II game (/nonexistent/sc2; set SC2PATH)"
            in rows)
    assert "mpe/simple_tag core install ready" in rows
    assert "sisl/multiwalker marl_vec[pettingzoo] ready" in rows
    assert "magent2/battle marl_vec[pettingzoo] ready" in rows
    assert "gym/cartpole core install ready" in rows


def test_list_columns_stay_aligned_past_long_names(capsys):
    """Each table's install column starts at one position in every row, also after the longest
    config name (meltingpot/prisoners_dilemma_in_the_matrix__arena) and id pattern."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    configs = out.split("shipped configs:\n")[1].splitlines()
    assert any("prisoners_dilemma_in_the_matrix__arena" in line for line in configs)
    needs = [line for line in out.split("shipped configs:\n")[0].splitlines()
             if line.startswith("      ") and not line.strip().startswith("then:")]
    for rows in (configs, needs):
        starts = {re.search(r"(marl_vec\[|core install)", line).start() for line in rows
                  if re.search(r"(marl_vec\[|core install)", line)}
        assert len(starts) == 1, "\n".join(rows)
        column = starts.pop()
        assert all(line[column - 2:column] == "  " for line in rows if len(line) > column), "\n".join(rows)


def test_run_says_why_no_episode_ended(capsys):
    """Fewer steps than an episode lasts: the summary says no episode ended, and names the limit."""
    assert main(["run", "--no-progress", "-o", "run.steps=10", "-o", "vec.num_envs=2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^episodes {9}0  \(no episode ended within the 10 steps run; "
                     r"the episode limit is 25 steps\)$", out, re.M), out


def test_bad_override_exits_2_with_the_reason(capsys):
    assert main(["run", "-o", "vec.backnd=subproc"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'vec.backnd'" in err and "backend" in err
    assert main(["run", "-o", "novalue"]) == 2
    assert "must look like section.key=value" in capsys.readouterr().err


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "marl_vec.tools.cli", "list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "shipped configs:" in out.stdout


def test_bench_compares_backends(capsys):
    assert main(["bench", "gym/cartpole", "--steps", "20", "--no-progress", "-o", "vec.num_envs=4"]) == 0
    out = capsys.readouterr().out
    assert "CartPole-v1, 4 envs, 20 steps per backend" in out
    assert "dummy" in out and "1.00x dummy" in out and "subproc" in out
    assert main(["bench", "--backends", "threads"]) == 2
    assert "--backends 'threads': allowed are dummy, subproc, ray" in capsys.readouterr().err


def test_bench_labels_backends_shows_the_machine_and_says_when_processes_cannot_win():
    cores = len(os.sched_getaffinity(0))
    workers = cores + 1  # more workers than cores: subproc cannot win, whatever the load
    out = _cli("bench", "gym/cartpole", "--steps", "40", "-o", f"vec.num_envs={workers}",
               "-o", f"vec.num_workers={workers}")
    assert out.returncode == 0, out.stderr
    assert re.search(rf"^machine +{cores} usable cores \(of {os.cpu_count()}\), load average [\d.]+ [\d.]+ [\d.]+ "
                     r"\(1, 5, 15 min\) before the runs$", out.stdout, re.M), out.stdout
    assert re.search(rf"^  dummy +[\d,]+ env-steps/s +1\.00x dummy +this process$", out.stdout, re.M), out.stdout
    assert re.search(rf"^  subproc +[\d,]+ env-steps/s +[\d.]+x dummy +{workers} workers$", out.stdout, re.M)
    assert (f"note: subproc: {workers} workers on {cores} cores take turns, so it cannot beat dummy here; "
            f"try -o vec.num_workers={cores}") in out.stdout
    # Off a terminal, each backend's progress is a few plain lines labelled with it.
    assert f"dummy, {workers} envs: 40/40 steps (100%)" in out.stderr
    assert f"subproc, {workers} envs: 10/40 steps (25%)" in out.stderr
    assert "\r" not in out.stderr


def test_bench_notes():
    assert bench_notes("dummy", None, 1, 9.0) == []
    assert bench_notes("subproc", 2, 2, 0.5) == []
    assert bench_notes("subproc", 2, 1, 0.2) == [
        "subproc: 1 usable core: worker processes only add messaging, so it cannot beat dummy here"]
    assert bench_notes("ray", 2, 2, 2.5) == [
        "ray: load average 2.50 >= 2 cores before the runs: other jobs hold the cores its workers need, so it may "
        "come out slower than dummy; the ratio says little about an idle machine"]
    assert len(bench_notes("subproc", 8, 2, 3.0)) == 2


def test_run_off_a_terminal_prints_plain_progress_lines():
    out = _cli("run", "-o", "run.steps=100", "-o", "vec.num_envs=2")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert [re.sub(r" in \d+\.\d s.*", "", line) for line in lines] == [
        f"2 envs: {n}/100 steps ({n}%)" for n in (25, 50, 75, 100)]
    assert "\r" not in out.stderr and "env-steps/s" in out.stdout


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_no_ale_banner(backend):
    pytest.importorskip("ale_py")
    out = _cli("run", "atari/pong", "-o", "run.steps=5", "-o", "vec.num_envs=2", "-o", f"vec.backend={backend}")
    assert out.returncode == 0, out.stderr
    assert "marl-vec run: atari ALE/Pong-v5, 2 envs" in out.stdout
    for banner in ("A.L.E", "Arcade Learning Environment", "Powered by Stella"):
        assert banner not in out.stdout + out.stderr


def test_no_pygame_banner(tmp_path):
    """pysc2 imports pygame, whose banner ("pygame-ce 2.5.8 (SDL ...)") reached the output of StarCraft II runs."""
    pytest.importorskip("pysc2")
    # A stand-in game folder: the adapter imports pysc2 when it launches the game, which then fails.
    (tmp_path / "Versions").mkdir()
    (tmp_path / "Maps" / "SMAC_Maps").mkdir(parents=True)
    (tmp_path / "Maps" / "SMAC_Maps" / "3m.SC2Map").touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SC2PATH": str(tmp_path)}
    env.pop("PYGAME_HIDE_SUPPORT_PROMPT", None)
    out = subprocess.run([sys.executable, "-m", "marl_vec.tools.cli", "run", "sc2/3m", "-o", "run.steps=1",
                          "-o", "vec.num_envs=1", "-o", "vec.backend=dummy"], capture_output=True, text=True,
                         timeout=120, env=env)
    printed = out.stdout + out.stderr
    assert "marl-vec run: starcraft2 3m" in printed
    assert "Hello from the pygame community" not in printed and not re.search(r"^pygame(-ce)? \d", printed, re.M)


def test_run_plot_without_episodes_says_so(tmp_path, capsys):
    path = tmp_path / "none.png"
    assert main(["run", "-o", "run.steps=3", "-o", "vec.num_envs=1", "--no-progress", "--plot", str(path)]) == 0
    assert "plot             not written: no episode finished in 3 env-steps" in capsys.readouterr().out
    assert not path.exists()


def test_bench_help_names_the_default_backends(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    help_text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "--backends BACKENDS comma-separated: dummy, subproc, ray (default: dummy,subproc)" in help_text


@pytest.mark.slow
def test_bench_ray_row_names_its_actors():
    pytest.importorskip("ray")
    out = _cli("bench", "gym/cartpole", "--steps", "20", "--backends", "dummy,ray", "--no-progress",
               "-o", "vec.num_envs=2", "-o", "vec.ray.num_workers=2", timeout=600)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^  dummy +[\d,]+ env-steps/s +1\.00x dummy +this process$", out.stdout, re.M), out.stdout
    assert re.search(r"^  ray +[\d,]+ env-steps/s +[\d.]+x dummy +2 Ray actors$", out.stdout, re.M), out.stdout


def test_run_summary_values_start_in_one_column_even_after_long_labels(capsys):
    """connect_four's summary has ``mean won_player_0``, longer than the usual 17-character label column."""
    assert main(["run", "classic/connect_four", "--no-progress", "-o", "run.steps=60", "-o", "vec.num_envs=2"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]  # below the header
    labels = ["env-steps/s", "episodes", "mean return", "mean length", "mean draw", "mean won_player_0",
              "mean won_player_1"]
    assert [line[:len(label)] for line, label in zip(lines, labels)] == labels and len(lines) == len(labels)
    column = len("mean won_player_0") + 2
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in lines), lines

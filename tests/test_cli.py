"""The marl-vec command: run, info, list, and its errors."""

from __future__ import annotations

import subprocess
import sys

from marl_vec.cli import main


def test_run_default_prints_a_summary(capsys):
    assert main(["run", "--no-progress", "-o", "run.steps=60", "-o", "vec.num_envs=2"]) == 0
    out = capsys.readouterr().out
    assert "mpe2.simple_spread_v3, 2 envs on dummy, 60 steps" in out
    assert "env-steps/s" in out
    assert "episodes         4" in out  # 2 envs x 60 steps / 25 steps per episode
    assert "mean return" in out and "mean length      25" in out


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


def test_bad_override_exits_2_with_the_reason(capsys):
    assert main(["run", "-o", "vec.backnd=subproc"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'vec.backnd'" in err and "backend" in err
    assert main(["run", "-o", "novalue"]) == 2
    assert "must look like section.key=value" in capsys.readouterr().err


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "marl_vec.cli", "list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "shipped configs:" in out.stdout


def test_bench_compares_backends(capsys):
    assert main(["bench", "gym/cartpole", "--steps", "20", "--no-progress", "-o", "vec.num_envs=4"]) == 0
    out = capsys.readouterr().out
    assert "CartPole-v1, 4 envs, 20 steps per backend" in out
    assert "dummy" in out and "1.00x dummy" in out and "subproc" in out
    assert main(["bench", "--backends", "threads"]) == 2
    assert "--backends 'threads': allowed are dummy, subproc, ray" in capsys.readouterr().err

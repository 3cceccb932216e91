"""`marl-vec tune` / `mv.tune`: every choice measured with sane figures, the table, the choice, bad input.

Speed is not asserted (which choice wins depends on the machine and its load):
only that each figure is there, positive and consistent with the others.
Measurements are 0.2 s on CartPole.
"""

from __future__ import annotations

import math

import pytest

import marl_vec as mv
from marl_vec.tools import tuner
from marl_vec.tools.cli import main
from marl_vec.tools.config import load_config
from marl_vec.tools.tuner import Candidate, Row, TuneResult, candidates, tune, usable_cores, worker_counts

SECONDS = 0.2
CARTPOLE = {"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "backend": "dummy"}}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Each test its own tune cache."""
    path = tmp_path / "tune-cache"
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(path))
    return path


def test_every_choice_is_measured_with_sane_figures(capsys):
    result = mv.tune(CARTPOLE, seconds=SECONDS, progress=False)
    cfg = load_config(CARTPOLE)
    cores = usable_cores()
    expected = [Candidate("dummy")] + [Candidate("subproc", n) for n in worker_counts(4, cores)]
    if cores >= 2:  # workers and this process stepping, both spinning
        expected.append(Candidate("subproc", min(cores, 4) - 1, step_in_main=True, spin_us=tuner.MAIN_SPIN_US))
    assert [r.candidate for r in result.rows] == expected == candidates(cfg, usable_cores())
    for row in result.rows:
        assert row.skipped is None and not row.interrupted
        assert row.env_steps > 0 and row.env_steps % 4 == 0  # whole batched steps of 4 envs
        assert SECONDS <= row.seconds < SECONDS + 30
        assert row.rate == pytest.approx(row.env_steps / row.seconds) and row.rate > 0
        assert row.cpu_seconds > 0 and row.cpu_us_per_step > 0 and math.isfinite(row.cores_busy)
        assert row.memory > 10 * 2**20 and row.memory_kind == "PSS"  # a Python process and its workers
    workers = [r for r in result.rows if r.candidate.backend == "subproc"]
    dummy = result.rows[0]
    # workers are processes of their own: the tree holds more memory than this process alone
    assert all(r.memory > dummy.memory for r in workers)
    assert result.best in result.rows and result.choice == result.best.candidate.choice
    assert not result.cached and result.num_envs == 4 and result.seconds == SECONDS

    out = capsys.readouterr().out
    assert out.startswith(f"marl-vec tune: measuring {len(expected)} choices for gym CartPole-v1, 4 envs, 0.2 s each\n")
    table = out.splitlines()
    marked = [line for line in table if line.startswith("* ")]
    assert len(marked) == 1 and marked[0].split("  ")[0] == f"* {result.best.candidate.label()}"
    for row in result.rows:
        line = next(line for line in table if line[2:].startswith(row.candidate.label() + " "))
        assert f"{row.rate:,.0f}" in line and f"{row.memory / 2**20:.0f} MB" in line
    assert f"fastest          {result.best.candidate.label()}" in table
    vec = table[table.index("vec:") + 1:]
    assert vec[:2] == ["  num_envs: 4", f"  backend: {result.choice['backend']}"]


def _row(candidate: Candidate, rate: float) -> Row:
    return Row(candidate, env_steps=int(rate), seconds=1.0, cpu_seconds=0.5, memory=2**26, memory_kind="PSS")


def _result(*rows: Row) -> TuneResult:
    return TuneResult("gym CartPole-v1", 4, 0.2, list(rows), "now", (0.0, 0.0, 0.0), 2, {"num_envs": 4})


def test_the_fastest_wins_unless_fewer_processes_come_within_the_margin():
    dummy, one, two = Candidate("dummy"), Candidate("subproc", 1), Candidate("subproc", 2)
    assert _result(_row(dummy, 1000), _row(one, 900), _row(two, 1500)).choice == {"backend": "subproc", "num_workers": 2}
    # within 5 %: the choice with fewer processes
    assert _result(_row(dummy, 1000), _row(one, 900), _row(two, 1040)).choice == {"backend": "dummy", "num_workers": None}
    assert _result(_row(dummy, 500), _row(one, 1000), _row(two, 1040)).choice == {"backend": "subproc", "num_workers": 1}
    # at the same worker count a choice that spins wins only beyond the margin (it burns CPU waiting)
    main = Candidate("subproc", 1, step_in_main=True, spin_us=300)
    assert _result(_row(one, 1000), _row(main, 1040)).best.candidate == one
    assert _result(_row(one, 1000), _row(main, 1200), _row(two, 1240)).best.candidate == main
    skipped = Row(Candidate("dummy", engine="envpool"), skipped="not installed")
    result = _result(skipped, _row(Candidate("dummy", engine="python"), 10))
    assert result.choice == {"backend": "dummy", "num_workers": None, "engine": "python"}
    assert "  dummy, engine envpool" in str(result) and "skipped: not installed" in str(result)
    assert "env.kwargs.engine: python" in str(result)


def test_worker_counts_and_the_engines_of_atari():
    assert worker_counts(8, 2) == [1, 2]
    assert worker_counts(3, 16) == [1, 2, 3]
    assert worker_counts(64, 8) == [1, 2, 4, 8]
    pong = load_config({"env": {"family": "atari", "id": "ALE/Pong-v5", "kwargs": {"preprocess": True}},
                        "vec": {"num_envs": 8}})
    got = candidates(pong, 2)
    assert [(c.engine, c.backend, c.num_workers, c.step_in_main) for c in got] == [
        (engine, backend, n, main) for engine in ("python", "ale_vector", "envpool")
        for backend, n, main in (("dummy", None, False), ("subproc", 1, False), ("subproc", 2, False),
                                 ("subproc", 1, True))]
    # an engine the config names is kept; the async pool (batch_size) needs workers, each of its blocks
    named = load_config({**pong.model_dump(), "env": {**pong.env.model_dump(), "kwargs": {"engine": "python"}},
                         "vec": {"num_envs": 8, "batch_size": 4}})
    assert candidates(named, 2) == [Candidate("subproc", 1), Candidate("subproc", 2)]


def test_the_workers_and_main_candidate():
    main_spin = {"step_in_main": True, "spin_us": tuner.MAIN_SPIN_US}

    def with_main(num_envs: int, cores: int) -> list[Candidate]:
        cfg = load_config({**CARTPOLE, "vec": {"num_envs": num_envs}})
        return [c for c in candidates(cfg, cores) if c.step_in_main]

    assert with_main(8, 2) == [Candidate("subproc", 1, **main_spin)]
    assert with_main(64, 8) == [Candidate("subproc", 7, **main_spin)]  # usable cores - 1 workers
    assert with_main(3, 8) == [Candidate("subproc", 2, **main_spin)]  # a block each: 2 workers and this process
    assert with_main(8, 1) == [] and with_main(1, 4) == []  # no core to spare, no second block
    assert Candidate("subproc", 1, **main_spin).choice == {"backend": "subproc", "num_workers": 1, **main_spin}
    assert Candidate("subproc", 1, **main_spin).label() == "subproc, 1 worker + main, spin_us=300"
    assert tuner._layout(Candidate("subproc", 1, **main_spin), 5) == "1+1 x 2-3"
    # the vec section: the config's own step_in_main and spin_us give way to the choice's
    mine = {"num_envs": 4, "backend": "subproc", "step_in_main": True, "spin_us": 50, "autoreset": "next_step"}
    result = TuneResult("gym CartPole-v1", 4, 0.2, [_row(Candidate("subproc", 2), 10)], "now", (0.0, 0.0, 0.0), 2, mine)
    assert result.vec_section() == {"num_envs": 4, "backend": "subproc", "num_workers": 2, "autoreset": "next_step"}
    result.rows.append(_row(Candidate("subproc", 1, **main_spin), 20))
    assert result.vec_section() == {"num_envs": 4, "backend": "subproc", "num_workers": 1, **main_spin,
                                    "autoreset": "next_step"}
    # a ray config measures the main candidate too, before Ray
    ray_cfg = load_config({**CARTPOLE, "vec": {"num_envs": 4}})
    assert [c.backend for c in candidates(ray_cfg, 2, ray=True)][-2:] == ["subproc", "ray"]


def test_an_engine_that_cannot_run_is_skipped_with_its_reason(monkeypatch):
    calls = []

    def fake_measure(cfg, candidate, seconds, progress=True, label=None):
        calls.append(candidate)
        if candidate.engine == "envpool":
            raise mv.SetupError("envpool is not installed: pip install 'marl_vec[envpool]'")
        return _row(candidate, 100.0)

    monkeypatch.setattr(tuner, "measure", fake_measure)
    pong = {"env": {"family": "atari", "id": "ALE/Pong-v5"}, "vec": {"num_envs": 2}}
    result = tune(pong, seconds=SECONDS, quiet=True, progress=False)
    envpool = [r for r in result.rows if r.candidate.engine == "envpool"]
    assert [r.skipped for r in envpool] == ["envpool is not installed: pip install 'marl_vec[envpool]'"] * len(envpool)
    assert sum(c.engine == "envpool" for c in calls) == 1  # the first failure skips the engine's other choices
    assert all(r.env_steps for r in result.rows if r.candidate.engine != "envpool")


def test_a_config_error_is_not_taken_for_an_engine_problem():
    with pytest.raises(mv.ConfigError, match="unknown key 'vec.backnd'"):
        tune({**CARTPOLE, "vec": {"backnd": "dummy"}}, seconds=SECONDS, quiet=True)
    with pytest.raises(mv.SetupError, match="NoSuchEnv"):
        tune({"env": {"family": "gym", "id": "NoSuchEnv-v0"}}, seconds=SECONDS, quiet=True, progress=False)


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf"), "3", True])
def test_seconds_must_be_a_positive_number(seconds):
    with pytest.raises(mv.ConfigError, match=r"seconds per measurement must be a number > 0 \(e\.g\. 3\); got"):
        tune(CARTPOLE, seconds=seconds, quiet=True)


def test_cli_errors_are_one_line_with_status_2(capsys, tmp_path):
    assert main(["tune", "no/such_config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("marl-vec: no config file 'no/such_config'; give a YAML path or one of the shipped configs:")
    assert main(["tune", "gym/cartpole", "--seconds", "0"]) == 2
    assert "seconds per measurement must be a number > 0" in capsys.readouterr().err
    assert main(["tune", "gym/cartpole", "-o", "vec.backend=threads"]) == 2
    assert "vec.backend: 'threads' is not allowed" in capsys.readouterr().err
    # --write refuses a shipped config before measuring anything
    assert main(["tune", "gym/cartpole", "--write", "--seconds", "0.2"]) == 2
    captured = capsys.readouterr()
    assert "--write would change the shipped config" in captured.err and "copy it to a file of yours" in captured.err
    assert "measuring" not in captured.out
    with pytest.raises(mv.ConfigError, match="--write needs a config file"):
        tune(CARTPOLE, write=True, quiet=True)


def test_backend_auto_is_a_config_value():
    cfg = load_config({**CARTPOLE, "vec": {"backend": "auto"}})
    assert cfg.vec.backend == "auto"
    assert load_config(CARTPOLE).vec.backend == "dummy"  # the default stays


def test_rounds_measure_every_choice_in_turns_and_show_the_spread(monkeypatch, capsys):
    order = []
    rates = iter([100.0, 200.0, 300.0, 50.0, 150.0, 250.0, 350.0, 60.0])

    def fake_measure(cfg, candidate, seconds, progress=True, label=None):
        order.append((candidate.num_workers, label))
        rate = next(rates)
        return Row(candidate, env_steps=int(rate), seconds=1.0, cpu_seconds=0.5, memory=2**26, memory_kind="PSS")

    monkeypatch.setattr(tuner, "measure", fake_measure)
    monkeypatch.setattr(tuner, "usable_cores", lambda: 2)
    result = tune(CARTPOLE, seconds=SECONDS, rounds=2, progress=False)
    assert order == [(None, "dummy (round 1/2)"), (1, "subproc, 1 worker (round 1/2)"),
                     (2, "subproc, 2 workers (round 1/2)"), (1, "subproc, 1 worker + main, spin_us=300 (round 1/2)"),
                     (None, "dummy (round 2/2)"), (1, "subproc, 1 worker (round 2/2)"),
                     (2, "subproc, 2 workers (round 2/2)"), (1, "subproc, 1 worker + main, spin_us=300 (round 2/2)")]
    assert [r.rounds for r in result.rows] == [[100.0, 150.0], [200.0, 250.0], [300.0, 350.0], [50.0, 60.0]]
    assert [r.rate for r in result.rows] == [125.0, 225.0, 325.0, 55.0] and result.rounds == 2
    out = capsys.readouterr().out
    assert out.count("marl-vec tune:") == 1 and "0.2 s each x 2 rounds, interleaved\n" in out  # one header
    assert "rounds: min-max env-steps/s" in out and "   300-350" in out
    with pytest.raises(mv.ConfigError, match=r"rounds must be an integer >= 1 .*; got 0"):
        tune(CARTPOLE, rounds=0, quiet=True)

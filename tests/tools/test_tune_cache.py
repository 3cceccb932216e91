"""The tune cache (marl_vec.tools.tune_cache): hits and misses by config and machine, and `backend: auto` reading it.

The measurements are replaced by a fixed table (``fake_measure``) so that the
cache logic is tested exactly and fast; one test measures for real and reads
the result back through ``backend: auto``.
"""

from __future__ import annotations

import json

import pytest

import marl_vec as mv
from marl_vec.tools import tune_cache, tuner
from marl_vec.tools.config import apply_choice, load_config, make_from_config
from marl_vec.tools.tuner import Candidate, Row, tune

CARTPOLE = {"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "backend": "dummy"},
            "run": {"steps": 10}}
RATES = {"dummy": 100.0, 1: 50.0, 2: 400.0, "main": 60.0}  # subproc with 2 workers wins
CHOICES = 4  # dummy, subproc 1 and 2 workers, 1 worker + main spinning (on 2 cores)
MAIN = {"backend": "subproc", "num_workers": 1, "step_in_main": True, "spin_us": tuner.MAIN_SPIN_US}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "tune-cache"
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(path))
    return path


@pytest.fixture
def rates():
    """The rates ``measured`` gives (a test may change them before it tunes)."""
    return dict(RATES)


@pytest.fixture
def measured(monkeypatch, rates):
    """Replaces the measurements by ``rates``; the list holds the candidates measured."""
    calls: list[Candidate] = []

    def fake_measure(cfg, candidate, seconds, progress=True, label=None):
        calls.append(candidate)
        rate = rates["main" if candidate.step_in_main else candidate.num_workers or "dummy"]
        return Row(candidate, env_steps=int(rate), seconds=1.0, cpu_seconds=0.5, memory=2**26, memory_kind="PSS")

    monkeypatch.setattr(tuner, "measure", fake_measure)
    monkeypatch.setattr(tuner, "usable_cores", lambda: 2)
    return calls


def _with(data: dict, section: str, **values) -> dict:
    return {**data, section: {**data.get(section, {}), **values}}


def test_a_second_tune_is_a_cache_hit_and_force_measures_again(measured, cache_dir):
    first = tune(CARTPOLE, seconds=0.2, quiet=True)
    assert not first.cached and len(measured) == CHOICES
    files = list(cache_dir.iterdir())
    assert len(files) == 1 and files[0] == tune_cache.cache_path(load_config(CARTPOLE).model_dump(by_alias=True))
    stored = json.loads(files[0].read_text())
    assert stored["choice"] == {"backend": "subproc", "num_workers": 2}
    assert stored["machine"] == tune_cache.machine() and stored["format"] == tune_cache.FORMAT

    second = tune(CARTPOLE, seconds=0.2, quiet=True)
    assert second.cached and len(measured) == CHOICES and second.cache_file == str(files[0])
    assert [(r.candidate, r.rate) for r in second.rows] == [(r.candidate, r.rate) for r in first.rows]
    assert "cached result    " in str(second) and "(--force measures again)" in str(second)

    tune(CARTPOLE, seconds=0.2, quiet=True, force=True)
    assert len(measured) == 2 * CHOICES


def test_the_keys_the_tuner_chooses_and_the_run_section_do_not_change_the_key(measured):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    for same in (_with(CARTPOLE, "vec", backend="auto"), _with(CARTPOLE, "vec", backend="subproc", num_workers=1),
                 _with(CARTPOLE, "vec", backend="subproc", num_workers=1, step_in_main=True, spin_us=300),
                 _with(CARTPOLE, "run", steps=99, seed=3)):
        assert tune(same, seconds=0.2, quiet=True).cached, same
    assert len(measured) == CHOICES


@pytest.mark.parametrize("change", [
    {"vec.num_envs": 8}, {"vec.autoreset": "next_step"}, {"vec.start_method": "spawn"},
    {"env.kwargs.max_episode_steps": 50}, {"env.id": "Acrobot-v1"},
], ids=lambda c: next(iter(c)))
def test_what_is_measured_changes_the_key(measured, change):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    assert not tune(CARTPOLE, seconds=0.2, quiet=True, overrides=change).cached


def test_another_machine_or_version_misses(measured, monkeypatch):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    here = tune_cache.machine()
    for other in ({**here, "cpu_count": here["cpu_count"] + 1}, {**here, "marl_vec": "0.0.0"},
                  {**here, "platform": "darwin-arm64"}):
        monkeypatch.setattr(tune_cache, "machine", lambda other=other: other)
        assert not tune(CARTPOLE, seconds=0.2, quiet=True).cached
    monkeypatch.setattr(tune_cache, "machine", lambda: here)
    assert tune(CARTPOLE, seconds=0.2, quiet=True).cached


def test_an_unreadable_cache_file_is_a_miss(measured):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    path = tune_cache.cache_path(load_config(CARTPOLE).model_dump(by_alias=True))
    choice = {"backend": "subproc", "num_workers": 2}
    for text in ("{not json", json.dumps({"format": 999, "choice": choice}), json.dumps([1, 2]),
                 json.dumps({"format": tune_cache.FORMAT, "choice": {"backend": "threads"}}),
                 json.dumps({"format": tune_cache.FORMAT, "choice": {"backend": "subproc", "num_workers": 0}})):
        path.write_text(text)
        assert tune_cache.load(load_config(CARTPOLE).model_dump(by_alias=True)) is None
        assert not tune(CARTPOLE, seconds=0.2, quiet=True).cached  # measures and stores again
    # choices with the keys of the "workers + main" candidate that the tuner does not make
    for bad in ({**MAIN, "backend": "dummy", "num_workers": None}, {**MAIN, "backend": "ray"},
                {**MAIN, "spin_us": 0}, {**MAIN, "spin_us": True}, {**MAIN, "spin_us": "300"},
                {**MAIN, "spin_us": 2e6}, {**MAIN, "step_in_main": "yes"}, {**MAIN, "step_in_main": False},
                {k: v for k, v in MAIN.items() if k != "spin_us"}, {k: v for k, v in MAIN.items() if k != "step_in_main"}):
        path.write_text(json.dumps({"format": tune_cache.FORMAT, "choice": bad}))
        assert tune_cache.load(load_config(CARTPOLE).model_dump(by_alias=True)) is None, bad
    # a choice without its table: `backend: auto` can use it, `tune` measures again
    path.write_text(json.dumps({"format": tune_cache.FORMAT, "choice": choice}))
    assert tune_cache.load(load_config(CARTPOLE).model_dump(by_alias=True))["choice"] == choice
    assert not tune(CARTPOLE, seconds=0.2, quiet=True).cached


def test_an_interrupted_tune_caches_nothing(monkeypatch, cache_dir):
    def interrupted(cfg, candidate, seconds, progress=True, label=None):
        if candidate.backend == "subproc":
            raise KeyboardInterrupt(Row(candidate, env_steps=8, seconds=0.1, interrupted=True))
        return Row(candidate, env_steps=100, seconds=1.0, cpu_seconds=0.5, memory=2**26, memory_kind="PSS")

    monkeypatch.setattr(tuner, "measure", interrupted)
    with pytest.raises(tuner.TuneInterrupted) as stop:
        tune(CARTPOLE, seconds=0.2, quiet=True)
    assert [r.env_steps for r in stop.value.result.rows] == [100, 8] and stop.value.result.interrupted
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_backend_auto_without_a_tune_result_is_dummy_and_says_so(capsys):
    with mv.make(_with(CARTPOLE, "vec", backend="auto")) as venv:
        assert isinstance(venv, mv.DummyVecEnv)
    err = capsys.readouterr().err
    assert err.startswith("marl_vec: backend auto -> dummy (no tune result for this config on this machine, "
                          "so the default; `marl-vec tune CONFIG` measures the choices)")
    # options only worker processes take ask for them: subproc, with the options as given
    with mv.make(_with(CARTPOLE, "vec", backend="auto", num_workers=2, start_method="spawn")) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv.num_workers == 2
    assert capsys.readouterr().err.startswith(
        "marl_vec: backend auto -> subproc, 2 workers (no tune result for this config on this machine; "
        "vec.num_workers asks for worker processes)")
    with mv.make(_with(CARTPOLE, "vec", backend="auto", num_workers=2, step_in_main=True)) as venv:
        assert venv.step_in_main
    # the async pool needs processes: its default is subproc
    with mv.make(_with(CARTPOLE, "vec", backend="auto", batch_size=2)) as venv:
        assert type(venv).__name__ == "SubprocVecEnv"


def _without_backend(data: dict) -> dict:
    return {**data, "vec": {k: v for k, v in data["vec"].items() if k != "backend"}}


def test_auto_is_the_default_and_stays_quiet_on_dummy(capsys):
    assert load_config(_without_backend(CARTPOLE)).vec.backend == "auto"
    with mv.make(_without_backend(CARTPOLE)) as venv:  # no tune result: dummy, as before auto was the default
        assert isinstance(venv, mv.DummyVecEnv)
    assert capsys.readouterr().err == ""
    with mv.make(_with(_without_backend(CARTPOLE), "vec", num_workers=2)) as venv:  # workers asked for: said
        assert type(venv).__name__ == "SubprocVecEnv" and venv.num_workers == 2
    assert "backend auto -> subproc, 2 workers" in capsys.readouterr().err
    # a backend named on the command line or as an override is used as named
    with mv.make(_without_backend(CARTPOLE), backend="dummy") as venv:
        assert isinstance(venv, mv.DummyVecEnv)
    with pytest.raises(mv.ConfigError, match="vec.num_workers applies to the subproc and ray backends, not to backend 'dummy'"):
        mv.make(_with(CARTPOLE, "vec", num_workers=2))


def test_the_default_backend_takes_a_cached_tune_result_and_says_so(measured, capsys):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    capsys.readouterr()
    with mv.make(_without_backend(CARTPOLE)) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv.num_workers == 2
    assert capsys.readouterr().err.startswith("marl_vec: backend auto -> subproc, 2 workers (the fastest in "
                                              "`marl-vec tune` on this machine, ")


def test_backend_auto_takes_the_cached_choice(measured, capsys):
    tune(CARTPOLE, seconds=0.2, quiet=True)
    with mv.make(_with(CARTPOLE, "vec", backend="auto")) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv.num_workers == 2
        venv.reset()
    err = capsys.readouterr().err
    assert err.startswith("marl_vec: backend auto -> subproc, 2 workers (the fastest in `marl-vec tune` on this machine, ")
    assert str(tune_cache.cache_dir()) in err
    # a config that names its backend never reads the cache
    with mv.make(CARTPOLE) as venv:
        assert isinstance(venv, mv.DummyVecEnv)
    assert capsys.readouterr().err == ""


def test_backend_auto_after_a_real_tune(capsys):
    result = mv.tune(CARTPOLE, seconds=0.2, progress=False, quiet=True)
    with make_from_config(load_config(_with(CARTPOLE, "vec", backend="auto"))) as venv:
        assert getattr(venv, "num_workers", None) == result.choice["num_workers"]
        assert getattr(venv, "step_in_main", False) == result.choice.get("step_in_main", False)
        assert (type(venv).__name__ == "DummyVecEnv") == (result.choice["backend"] == "dummy")
    assert f"backend auto -> {tune_cache.describe_choice(result.choice)} (the fastest" in capsys.readouterr().err


def test_the_workers_and_main_choice_round_trips_through_the_cache_and_backend_auto(measured, rates, capsys):
    rates["main"] = 1000.0
    result = tune(CARTPOLE, seconds=0.2, quiet=True)
    assert result.choice == MAIN and result.best.candidate.label() == "subproc, 1 worker + main, spin_us=300"
    assert "1+1 x 2" in str(result)
    assert "vec:\n  num_envs: 4\n  backend: subproc\n  num_workers: 1\n  step_in_main: true\n  spin_us: 300" \
        in str(result)
    data = load_config(CARTPOLE).model_dump(by_alias=True)
    assert tune_cache.load(data)["choice"] == MAIN
    capsys.readouterr()
    with mv.make(_with(CARTPOLE, "vec", backend="auto")) as venv:
        assert venv.step_in_main and venv.num_workers == 1 and venv._spin == pytest.approx(300e-6)
        venv.step(venv.reset().avail_actions.argmax(axis=2))
    assert capsys.readouterr().err.startswith(
        "marl_vec: backend auto -> subproc, 1 worker + main, spin_us=300 (the fastest in `marl-vec tune` on this machine")
    # the cached choice (and only it) sets step_in_main and spin_us: a config's own give way
    rates["main"], rates[2] = 10.0, 2000.0
    tune(CARTPOLE, seconds=0.2, quiet=True, force=True)
    with mv.make(_with(CARTPOLE, "vec", backend="auto", step_in_main=True, spin_us=50)) as venv:
        assert (venv.num_workers, venv.step_in_main, venv._spin) == (2, False, 0.0)


def test_backend_auto_without_a_tune_result_keeps_spin_us(capsys):
    with mv.make(_with(CARTPOLE, "vec", backend="auto", spin_us=50)) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv._spin == pytest.approx(50e-6)
    assert capsys.readouterr().err.startswith("marl_vec: backend auto -> subproc, spin_us=50 (no tune result for this "
                                              "config on this machine; vec.spin_us asks for worker processes)")
    with mv.make(_with(CARTPOLE, "vec", backend="auto", num_workers=1, step_in_main=True, spin_us=50)) as venv:
        assert venv.step_in_main and venv._spin == pytest.approx(50e-6)
    assert "backend auto -> subproc, 1 worker + main, spin_us=50 (no tune result" in capsys.readouterr().err


def test_a_choice_sets_every_key_the_tuner_chooses():
    cfg = load_config(_with(CARTPOLE, "vec", backend="subproc", num_workers=1, step_in_main=True, spin_us=50))
    for choice in ({"backend": "dummy", "num_workers": None}, {"backend": "subproc", "num_workers": 2}):
        out = apply_choice(cfg, choice)
        assert (out.vec.step_in_main, out.vec.spin_us) == (False, 0.0)
    with make_from_config(apply_choice(cfg, {"backend": "dummy", "num_workers": None})) as venv:  # no option left over
        assert isinstance(venv, mv.DummyVecEnv)
    out = apply_choice(load_config(CARTPOLE), MAIN)
    assert (out.vec.backend, out.vec.num_workers, out.vec.step_in_main, out.vec.spin_us) == ("subproc", 1, True, 300)


def test_a_chosen_engine_goes_into_the_env_kwargs():
    cfg = load_config({"env": {"family": "atari", "id": "ALE/Pong-v5", "kwargs": {"preprocess": True}},
                       "vec": {"backend": "auto", "start_method": "spawn"}})
    out = apply_choice(cfg, {"backend": "dummy", "num_workers": None, "engine": "python"})
    assert out.env.kwargs == {"preprocess": True, "engine": "python"}
    assert (out.vec.backend, out.vec.num_workers, out.vec.start_method) == ("dummy", None, None)
    out = apply_choice(cfg, {"backend": "subproc", "num_workers": 2})
    assert out.env.kwargs == {"preprocess": True} and out.vec.start_method == "spawn"
    # an engine the config names is part of the key; none or auto is not (the tuner chooses it)
    data = cfg.model_dump(by_alias=True)
    key = tune_cache.config_key(data)
    assert tune_cache.config_key(_with(data, "env", kwargs={"preprocess": True, "engine": "auto"})) == key
    assert tune_cache.config_key(_with(data, "env", kwargs={"preprocess": True, "engine": "python"})) != key


def test_the_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(tmp_path / "x"))
    assert tune_cache.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("MARL_VEC_TUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tune_cache.cache_dir() == tmp_path / "xdg" / "marl_vec" / "tune"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tune_cache.cache_dir() == tmp_path / "home" / ".cache" / "marl_vec" / "tune"

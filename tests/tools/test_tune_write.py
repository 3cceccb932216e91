"""`marl-vec tune --write`: the fastest choice goes into the config file, the rest of it stays as it was.

The YAML edit itself (marl_vec.tools.yaml_edit) is tested on the layouts configs use:
block sections, flow mappings, comments, missing sections, and layouts it must refuse.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

import marl_vec as mv
from marl_vec.tools import tuner
from marl_vec.tools.cli import main
from marl_vec.tools.config import load_config, resolve_config_path
from marl_vec.tools.tuner import Row
from marl_vec.tools.yaml_edit import DELETE, YamlEditError, set_keys


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(tmp_path / "tune-cache"))


def fake_rates(monkeypatch, rates: dict) -> None:
    """Measurements replaced: ``rates`` by worker count (None: dummy; "main": workers + main, spinning,
    else as its worker count)."""
    def fake_measure(cfg, candidate, seconds, progress=True, label=None):
        rate = rates["main" if candidate.step_in_main and "main" in rates else candidate.num_workers]
        return Row(candidate, env_steps=int(rate), seconds=1.0, cpu_seconds=0.5, memory=2**26, memory_kind="PSS")

    monkeypatch.setattr(tuner, "measure", fake_measure)
    monkeypatch.setattr(tuner, "usable_cores", lambda: 2)


def test_write_sets_backend_and_workers_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 400.0})
    path = tmp_path / "spread.yaml"
    shutil.copy(resolve_config_path("mpe/simple_spread"), path)
    before = path.read_text()
    assert main(["tune", str(path), "--write", "--seconds", "0.2", "--no-progress"]) == 0
    after = path.read_text()
    assert after == before.replace("  backend: dummy\n", "  backend: subproc\n").replace(
        "  autoreset: same_step\n", "  autoreset: same_step\n  num_workers: 2\n")
    assert f"wrote            subproc, 2 workers into {path}" in capsys.readouterr().out
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    old["vec"].update(backend="subproc", num_workers=2)
    assert new == old
    with mv.make(path) as venv:  # the file runs as written
        assert venv.num_workers == 2


def test_write_of_dummy_removes_the_process_options(tmp_path, monkeypatch):
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 101.0})  # within the margin: dummy
    path = tmp_path / "c.yaml"
    path.write_text("# mine\nenv: {family: gym, id: CartPole-v1}\nvec:\n  num_envs: 4\n  backend: subproc  # was\n"
                    "  num_workers: 2\n  start_method: spawn\nrun:\n  steps: 7  # keep\n")
    mv.tune(path, seconds=0.2, write=True, quiet=True)
    assert path.read_text() == ("# mine\nenv: {family: gym, id: CartPole-v1}\nvec:\n  num_envs: 4\n"
                                "  backend: dummy  # was\nrun:\n  steps: 7  # keep\n")


def test_write_of_workers_and_main_sets_its_keys_and_round_trips(tmp_path, monkeypatch, capsys):
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 101.0, "main": 400.0})
    path = tmp_path / "c.yaml"
    path.write_text("env: {family: gym, id: CartPole-v1}\nvec:\n  num_envs: 4\n  backend: dummy\nrun:\n  steps: 7\n")
    assert main(["tune", str(path), "--write", "--seconds", "0.2", "--no-progress"]) == 0
    assert f"wrote            subproc, 1 worker + main, spin_us=300 into {path}" in capsys.readouterr().out
    assert path.read_text() == ("env: {family: gym, id: CartPole-v1}\nvec:\n  num_envs: 4\n  backend: subproc\n"
                                "  num_workers: 1\n  step_in_main: true\n  spin_us: 300\nrun:\n  steps: 7\n")
    with mv.make(path) as venv:  # the file runs as written
        assert venv.step_in_main and venv.num_workers == 1 and venv._spin == pytest.approx(300e-6)
    assert mv.tune(path, quiet=True).cached  # the written file is the config that was measured
    # another choice written over it takes the keys away
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 400.0, "main": 60.0})
    mv.tune(path, seconds=0.2, write=True, quiet=True, force=True)
    assert path.read_text() == ("env: {family: gym, id: CartPole-v1}\nvec:\n  num_envs: 4\n  backend: subproc\n"
                                "  num_workers: 2\nrun:\n  steps: 7\n")


def test_write_with_a_real_measurement_round_trips(tmp_path):
    path = tmp_path / "cartpole.yaml"
    path.write_text("env:\n  family: gym\n  id: CartPole-v1\nvec: {num_envs: 4}  # flow style\n")
    result = mv.tune(path, seconds=0.2, write=True, progress=False, quiet=True)
    cfg = load_config(path)
    assert (cfg.vec.backend, cfg.vec.num_workers, cfg.vec.num_envs) == (
        result.choice["backend"], result.choice["num_workers"], 4)
    assert (cfg.vec.step_in_main, cfg.vec.spin_us) == (result.choice.get("step_in_main", False),
                                                       result.choice.get("spin_us", 0.0))
    assert path.read_text().endswith("  # flow style\n")


@pytest.mark.parametrize("text,updates,expected", [
    ("vec:\n  num_envs: 8\n  backend: dummy # c\n", {("vec", "backend"): "subproc"},
     "vec:\n  num_envs: 8\n  backend: subproc # c\n"),
    ("env:\n  id: x\n", {("vec", "backend"): "subproc", ("vec", "num_workers"): 2},
     "env:\n  id: x\nvec:\n  backend: subproc\n  num_workers: 2\n"),
    ("vec:\n    num_envs: 8\n    ray:\n        num_cpus_per_worker: 1\nrun: {}\n", {("vec", "num_workers"): 2},
     "vec:\n    num_envs: 8\n    ray:\n        num_cpus_per_worker: 1\n    num_workers: 2\nrun: {}\n"),
    ("env:\n  kwargs: {N: 3, max_cycles: 25}  # three\n", {("env", "kwargs", "engine"): "python"},
     "env:\n  kwargs: {N: 3, max_cycles: 25, engine: python}  # three\n"),
    ("env:\n  family: atari\n\n# the batch\nvec:\n  num_envs: 8\n", {("env", "kwargs", "engine"): "ale_vector"},
     "env:\n  family: atari\n  kwargs:\n    engine: ale_vector\n\n# the batch\nvec:\n  num_envs: 8\n"),
    ("vec:\n  backend: subproc\n  num_workers: 4 # four\n  env_seed: 1\n", {("vec", "num_workers"): DELETE},
     "vec:\n  backend: subproc\n  env_seed: 1\n"),
    ("vec:\n  id: 'a # not a comment'\n", {("vec", "backend"): "dummy"},
     "vec:\n  id: 'a # not a comment'\n  backend: dummy\n"),
])
def test_set_keys(text, updates, expected):
    assert set_keys(text, updates) == expected


@pytest.mark.parametrize("text", ["vec: null\n", "vec: [1, 2]\n", "vec:\n  - a\n"])
def test_set_keys_refuses_what_it_cannot_edit(text):
    with pytest.raises(YamlEditError):
        set_keys(text, {("vec", "backend"): "dummy"})


def test_a_file_that_cannot_be_edited_is_left_alone(tmp_path, monkeypatch, capsys):
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 400.0})
    path = tmp_path / "odd.yaml"
    text = "env: {family: gym, id: CartPole-v1, kwargs: {}}\nvec: !!map {num_envs: 4}\n"
    path.write_text(text)
    assert main(["tune", str(path), "--write", "--seconds", "0.2", "--no-progress"]) == 2
    assert "nothing written: paste the vec section printed above" in capsys.readouterr().err
    assert path.read_text() == text


def test_write_also_writes_the_overrides_it_measured_with(tmp_path, monkeypatch, capsys):
    fake_rates(monkeypatch, {None: 100.0, 1: 50.0, 2: 400.0})
    path = tmp_path / "spread.yaml"
    shutil.copy(resolve_config_path("mpe/simple_spread"), path)
    before = path.read_text()
    assert main(["tune", str(path), "-o", "vec.num_envs=32", "-o", "env.kwargs.N=4", "--write", "--seconds", "0.2",
                 "--no-progress"]) == 0
    assert f"wrote            subproc, 2 workers (and vec.num_envs, env.kwargs.N) into {path}" in capsys.readouterr().out
    assert path.read_text() == before.replace("{N: 3,", "{N: 4,").replace("num_envs: 8", "num_envs: 32").replace(
        "  backend: dummy\n", "  backend: subproc\n").replace("  autoreset: same_step\n", "  autoreset: same_step\n  num_workers: 2\n")
    # the file is now the config that was measured: its tune result is a cache hit
    assert mv.tune(path, quiet=True).cached

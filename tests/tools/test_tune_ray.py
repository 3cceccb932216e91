"""`mv.tune(..., ray=True)` / `marl-vec tune --ray`: RayVecEnv as a candidate, its choice in the cache,
in `backend: auto` and in `--write`; skipped with a note where ray is not installed.

The real Ray measurement starts a local cluster (a few seconds) in a short temp dir
and checks that no Ray process outlives it.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest

import marl_vec as mv
from marl_vec.tools import tune_cache, tuner
from marl_vec.tools.cli import main
from marl_vec.tools.config import apply_choice, load_config
from marl_vec.tools.tuner import Candidate, candidates, wants_ray, worker_counts

CARTPOLE = {"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"num_envs": 4, "backend": "dummy"}}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(tmp_path / "tune-cache"))


def test_ray_is_a_candidate_when_asked_or_for_a_ray_config():
    cfg = load_config(CARTPOLE)
    assert not wants_ray(cfg, None) and wants_ray(cfg, True)
    assert wants_ray(load_config(CARTPOLE, {"vec.backend": "ray"}), None)
    assert wants_ray(load_config(CARTPOLE, {"vec.ray.address": "auto"}), None)
    assert not wants_ray(load_config(CARTPOLE, {"vec.backend": "ray"}), False)
    assert candidates(cfg, 6, ray=True)[-1] == Candidate("ray", worker_counts(4, 6)[-1]) == Candidate("ray", 4)
    assert all(c.backend != "ray" for c in candidates(cfg, 6))


def test_without_ray_installed_its_row_is_skipped_with_a_note(monkeypatch, capsys):
    monkeypatch.setattr(tuner, "ray_missing", lambda: "ray is not installed (pip install 'marl_vec[ray]')")
    result = mv.tune({**CARTPOLE, "vec": {"num_envs": 2}}, seconds=0.1, progress=False, quiet=True, ray=True)
    ray_row = result.rows[-1]
    assert ray_row.candidate == Candidate("ray", worker_counts(2, tuner.usable_cores())[-1])
    assert ray_row.skipped == "ray is not installed (pip install 'marl_vec[ray]')" and ray_row.env_steps == 0
    assert all(r.env_steps > 0 for r in result.rows[:-1]) and result.choice["backend"] != "ray"
    assert "skipped: ray is not installed (pip install 'marl_vec[ray]')" in str(result)
    # the CLI's --ray asks for it too
    assert main(["tune", "gym/cartpole", "-o", "vec.num_envs=2", "--seconds", "0.1", "--no-progress", "--ray"]) == 0
    assert f"{ray_row.candidate.label()}   " in capsys.readouterr().out


def test_a_ray_choice_is_cached_resolved_by_auto_and_written(tmp_path, capsys):
    data = load_config(CARTPOLE).model_dump(by_alias=True)
    assert tune_cache.load(data) is None
    tune_cache.save(data, {"choice": {"backend": "ray", "num_workers": 2}, "when": "now"})
    choice, message, tuned = tune_cache.resolve_auto(data)
    assert tuned and choice == {"backend": "ray", "num_workers": 2} and "backend auto -> ray, 2 workers" in message
    tune_cache.save(data, {"choice": {"backend": "ray", "num_workers": None}})  # ray without workers: not a choice
    assert tune_cache.load(data) is None
    # a ray choice drops subproc's start_method and vec.ray's own worker count
    cfg = load_config(CARTPOLE, {"vec.start_method": "fork", "vec.ray.envs_per_worker": 3})
    ray_cfg = apply_choice(cfg.model_copy(update={"vec": cfg.vec.model_copy(update={"backend": "subproc"})}),
                           {"backend": "ray", "num_workers": 2})
    assert (ray_cfg.vec.backend, ray_cfg.vec.num_workers, ray_cfg.vec.start_method) == ("ray", 2, None)
    assert ray_cfg.vec.ray.envs_per_worker is None
    path = tmp_path / "mine.yaml"
    path.write_text("env:\n  family: gym\n  id: CartPole-v1\nvec:\n  num_envs: 4\n  backend: subproc\n"
                    "  num_workers: 1\n  start_method: fork\n")
    tuner.write_back(path, {"backend": "ray", "num_workers": 2})
    assert path.read_text().endswith("vec:\n  num_envs: 4\n  backend: ray\n  num_workers: 2\n")


@pytest.mark.slow
def test_ray_is_measured_on_a_local_cluster_and_stopped():
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")
    psutil = pytest.importorskip("psutil")
    temp_dir = tempfile.mkdtemp(prefix="mvtr", dir="/tmp")  # Ray's socket paths must stay short
    try:
        result = mv.tune(CARTPOLE, overrides={"vec.ray.temp_dir": temp_dir}, seconds=0.2, progress=False,
                         quiet=True, ray=True)
        row = result.rows[-1]
        assert row.candidate.backend == "ray" and row.skipped is None
        assert row.env_steps > 0 and row.env_steps % 4 == 0 and row.cpu_seconds > 0 and row.memory > 0
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])]
        assert left == []  # raylet, GCS and actors carry the session folder in their command line
        # the cached result answers a second ray=True call without measuring
        again = mv.tune(CARTPOLE, overrides={"vec.ray.temp_dir": temp_dir}, seconds=0.2, progress=False,
                        quiet=True, ray=True)
        assert again.cached and again.rows[-1].rate == row.rate
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)

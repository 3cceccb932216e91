"""``backend: auto`` serves the async pool (send/recv) on every choice the tuner stores.

docs/tuning.md promises that a tune result changes only processes, memory and speed.
A trainer (or a face: Tianshou's steps subsets of envs through send/recv) written
against a config with ``backend: auto`` must then get the same per-env trajectories
whatever the cache holds, the "workers + main" choice (``step_in_main``) included:
each env's trajectory equals its DummyVecEnv one, with the same seeds and actions.
"""

from __future__ import annotations

import pytest

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn
from marl_vec.tools import tune_cache, tuner
from marl_vec.tools.config import load_config
from tests.helpers.pool_driver import assert_same, drive_pool, sync_trajectories

STEPS = 16  # crosses two episode ends (max_episode_steps 7)
CONFIG = {"env": {"family": "gym", "id": "CartPole-v1", "kwargs": {"max_episode_steps": 7}},
          "vec": {"num_envs": 5, "backend": "auto", "env_seed": 0}}
MAIN = {"backend": "subproc", "num_workers": 1, "step_in_main": True, "spin_us": tuner.MAIN_SPIN_US}
CHOICES = [{"backend": "dummy", "num_workers": None}, {"backend": "subproc", "num_workers": 1},
           {"backend": "subproc", "num_workers": 2}, MAIN,
           {"backend": "subproc", "num_workers": 2, "step_in_main": True, "spin_us": tuner.MAIN_SPIN_US}]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(tmp_path / "tune-cache"))


@pytest.fixture(scope="module")
def expected():
    fn = make_env_fn("gym", "CartPole-v1", {"max_episode_steps": 7})
    return sync_trajectories([fn] * CONFIG["vec"]["num_envs"], STEPS)


def _seed_cache(choice: dict, config: dict = CONFIG) -> None:
    """The cache as `marl-vec tune` leaves it after choosing ``choice`` for ``config`` here."""
    tune_cache.save(load_config(config).model_dump(by_alias=True), {"choice": choice, "when": "test"})


@pytest.mark.parametrize("batch_size", [5, 2, 1])
@pytest.mark.parametrize("choice", CHOICES, ids=tune_cache.describe_choice)
def test_send_recv_follow_dummy_on_every_cached_choice(choice, batch_size, expected, capsys):
    _seed_cache(choice)
    with mv.make(CONFIG) as venv:
        assert f"backend auto -> {tune_cache.describe_choice(choice)} (the fastest" in capsys.readouterr().err
        assert getattr(venv, "step_in_main", False) == choice.get("step_in_main", False)
        venv.batch_size = batch_size  # as the Tianshou face sets it, per call
        got, batches, _ = drive_pool(venv, STEPS, hold=True)
    assert_same(got, expected)
    assert all(len(b) == batch_size for b in batches)


@pytest.mark.parametrize("choice", CHOICES, ids=tune_cache.describe_choice)
def test_a_config_with_batch_size_follows_dummy_on_every_choice(choice, expected, capsys):
    # The tuner offers neither dummy nor "workers + main" to a config with vec.batch_size, but a
    # cache holding either (written by hand, or by another version) must not break it either.
    config = {**CONFIG, "vec": {**CONFIG["vec"], "batch_size": 2}}
    _seed_cache(choice, config)
    with mv.make(config) as venv:
        assert f"backend auto -> {tune_cache.describe_choice(choice)} (the fastest" in capsys.readouterr().err
        assert venv.batch_size == 2
        got, batches, _ = drive_pool(venv, STEPS, hold=True)
    assert_same(got, expected)
    assert all(len(b) == 2 for b in batches)


def test_backend_dummy_takes_batch_size():
    # DummyVecEnv's pool is synchronous (send() steps its envs at once): the same calls everywhere
    with mv.make({**CONFIG, "vec": {**CONFIG["vec"], "backend": "dummy", "batch_size": 3}}) as venv:
        assert isinstance(venv, mv.DummyVecEnv) and venv.batch_size == 3


@pytest.mark.parametrize("choice", CHOICES, ids=tune_cache.describe_choice)
def test_the_tianshou_face_over_backend_auto_matches_tianshou_on_every_cached_choice(choice):
    # The face steps subsets of envs through send/recv; the reference is Tianshou's own DummyVectorEnv.
    pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")
    import gymnasium as gym
    import numpy as np
    from tianshou.env import DummyVectorEnv

    from marl_vec.compat.tianshou import TianshouVectorEnv

    _seed_cache(choice)
    n = CONFIG["vec"]["num_envs"]
    native = DummyVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=7)] * n)
    face = TianshouVectorEnv(mv.make(CONFIG))
    try:
        assert face.seed(7) == native.seed(7)
        np.testing.assert_array_equal(face.reset()[0], native.reset()[0])
        rng = np.random.default_rng(0)
        for t in range(40):
            ids = sorted(rng.permutation(n)[: int(rng.integers(1, n + 1))].tolist())
            act = rng.integers(0, 2, size=len(ids))
            got, want = face.step(act, ids), native.step(act, ids)
            for k, (g, w) in enumerate(zip(got[:4], want[:4])):
                np.testing.assert_array_equal(g, w, err_msg=f"step {t} ids {ids} item {k}")
            ended = [i for i, term, trunc in zip(ids, want[2], want[3]) if term or trunc]
            if ended:
                np.testing.assert_array_equal(face.reset(ended)[0], native.reset(ended)[0])
    finally:
        face.close()
        native.close()

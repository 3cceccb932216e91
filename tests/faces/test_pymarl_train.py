"""pymarlzooplus's own QMIX and MAPPO learn identical parameters through marl_vec's PyMARL
faces and natively, at the same seed (its trainer: run.run_sequential, unchanged).

- LBF 8x8-2p-2f-coop: native gymma env + native runner == the env face under their
  runner == the runner face (episode runner with QMIX; parallel runner of 4 envs with
  MAPPO, the runner face on the dummy and the subproc backends).
  One native behaviour stands between them: their gymma wrapper returns an empty info,
  so an LBF episode cut at its step limit is stored as terminal. The faces give
  ``info["episode_limit"]`` there (as SMAC does), and the trainer bootstraps it. The
  unpatched native run learns different parameters; the native run patched to add
  only that flag (tests/helpers/pymarl_trainer.py: TimeLimitInfoGymma) learns identical ones.
- MPE simple_spread (marl_vec's config, on pettingzoo 1.24.3's pettingzoo.mpe): the env face under their episode and
  parallel runners == the runner face. Their own ``mpe:SimpleSpread-3-v0`` is a
  different simulator (their fork of OpenAI's MPE: shared reward, no local_ratio, its
  own RandomState), not PettingZoo's simple_spread_v3, so it is no reference for it.
- SMAC-style 3m on the StarCraft II family with pysc2's mock game (the toy battle of
  marl_vec.envs.starcraft2.mock; the game cannot be installed here): QMIX trains through
  the runner face, and the episode stats the trainer logs are the family's.

Runs in .venv-pymarl (bash scripts/install/install_pymarl_venv.sh).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("pymarlzooplus", reason="pymarlzooplus 1.1.0 lives in .venv-pymarl: "
                    "bash scripts/install/install_pymarl_venv.sh, then .venv-pymarl/bin/python -m pytest "
                    "tests/faces/test_pymarl*.py")

from marl_vec.compat.pymarl import register  # noqa: E402
from tests.helpers import pymarl_trainer as pt  # noqa: E402

register()
LBF = {"key": "lbf/8x8-2p-2f-coop"}
NATIVE_LBF = {"key": pt.NATIVE_LBF, "time_limit": 50, "render": False}
# marl_vec's mpe/simple_spread config on pettingzoo 1.24.3's own MPE (mpe2 needs pettingzoo 1.25).
MPE = {"key": {"env": {"family": "pettingzoo", "id": "pettingzoo.mpe.simple_spread_v3",
                       "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": False}}}}
QMIX = {"t_max": 400, "batch_size": 4}  # 9 episodes, 6 QMIX updates
# The StarCraft II family's 3m config on the toy mock battle (no game needed).
SC2_MOCK = {"key": "sc2/3m", "env_kwargs": {"game_factory": "marl_vec.envs.starcraft2.mock:MockBattle"},
            "backend": "dummy", "team_reward": "shared"}
MAPPO = {"t_max": 400, "batch_size_run": 4, "batch_size": 4, "buffer_size": 4}  # 3 runs of 4 envs


def test_register_gives_lbforaging_its_ids_back():
    # pymarlzooplus registers some lbforaging ids again with other levels; imported after
    # lbforaging, its variant would win in this process but not in spawned workers.
    import importlib

    import gymnasium as gym
    import lbforaging  # noqa: F401
    import pymarlzooplus.envs.lbf_registration as theirs

    importlib.reload(theirs)
    assert gym.spec("Foraging-8x8-2p-2f-coop-v3").kwargs["max_player_level"] == 3
    register()
    assert gym.spec("Foraging-8x8-2p-2f-coop-v3").kwargs["max_player_level"] == 2


@pytest.fixture(autouse=True)
def _deterministic():
    pt.deterministic()


@pytest.mark.slow
def test_qmix_lbf_episode_runner(tmp_path):
    native = pt.train("qmix", tmp_path / "native", env="gymma_limit", env_args=NATIVE_LBF, runner="episode", **QMIX)
    env_face = pt.train("qmix", tmp_path / "env", env="marl_vec", env_args=LBF, runner="episode", **QMIX)
    runner_face = pt.train("qmix", tmp_path / "runner", env="marl_vec", env_args=LBF, runner="marl_vec", **QMIX)
    pt.assert_identical(native, env_face)
    pt.assert_identical(native, runner_face)
    # The unpatched native run stores time-limit ends as terminal states: different targets.
    unpatched = pt.train("qmix", tmp_path / "unpatched", env="gymma", env_args=NATIVE_LBF, runner="episode", **QMIX)
    with pytest.raises(AssertionError, match="differs"):
        pt.assert_identical(native, unpatched)


@pytest.mark.slow
def test_mappo_lbf_parallel_runner(tmp_path):
    native = pt.train("mappo", tmp_path / "native", env="gymma_limit", env_args=NATIVE_LBF, runner="parallel", **MAPPO)
    dummy = pt.train("mappo", tmp_path / "dummy", env="marl_vec", env_args=LBF, runner="marl_vec", **MAPPO)
    subproc = pt.train("mappo", tmp_path / "subproc", env="marl_vec", runner="marl_vec",
                       env_args={**LBF, "backend": "subproc", "num_workers": 2}, **MAPPO)
    pt.assert_identical(native, dummy)
    pt.assert_identical(native, subproc)


@pytest.mark.slow
def test_qmix_mpe_episode_runner(tmp_path):
    env_face = pt.train("qmix", tmp_path / "env", env="marl_vec", env_args=MPE, runner="episode", **QMIX)
    runner_face = pt.train("qmix", tmp_path / "runner", env="marl_vec", env_args=MPE, runner="marl_vec", **QMIX)
    pt.assert_identical(env_face, runner_face)


@pytest.mark.slow
def test_mappo_mpe_parallel_runner(tmp_path):
    env_face = pt.train("mappo", tmp_path / "env", env="marl_vec", env_args=MPE, runner="parallel", **MAPPO)
    runner_face = pt.train("mappo", tmp_path / "runner", env="marl_vec", runner="marl_vec",
                           env_args={**MPE, "backend": "subproc", "num_workers": 2}, **MAPPO)
    pt.assert_identical(env_face, runner_face)


def test_qmix_sc2_3m_mock_runner_face(tmp_path, monkeypatch):
    from pymarlzooplus.utils.logging_setup import Logger

    from marl_vec.compat.pymarl.runner import MarlVecRunner

    logged: list[tuple[str, float, int]] = []
    log_stat, run = Logger.log_stat, MarlVecRunner.run
    envs: list[tuple[str, str]] = []

    def record(self, key, value, t, to_sacred=True):
        logged.append((key, float(value), t))
        log_stat(self, key, value, t, to_sacred)

    def run_and_note_family(self, test_mode=False):
        out = run(self, test_mode)
        envs.append((self.venv.get_attr("map_name")[0], type(self.venv.get_attr("game")[0]._game).__name__))
        return out

    monkeypatch.setattr(Logger, "log_stat", record)
    monkeypatch.setattr(MarlVecRunner, "run", run_and_note_family)
    # pt.train asserts that the parameters changed between the first and last saved models.
    params = pt.train("qmix", tmp_path, env="marl_vec", env_args=SC2_MOCK, runner="marl_vec",
                      batch_size_run=2, t_max=300, batch_size=4, epsilon_anneal_time=150)
    assert set(envs) == {("3m", "_MockBattle")} and len(envs) > 10  # StarCraft2Env's game session
    t_env = max(t for _, _, t in logged)
    assert t_env >= 300 and int(params["t_env"]) > 0
    stats = {key for key, _, _ in logged}
    assert {"battle_won_mean", "dead_allies_mean", "dead_enemies_mean", "test_battle_won_mean"} <= stats
    # A toy battle lasts 8 steps at the least (135 enemy health, 18 damage a step), 60 at most (3m's limit).
    lengths = [v for k, v, _ in logged if k == "ep_length_mean"]
    # SMAC's scale (team_reward="shared"): an episode's return is at most 20 (a won battle);
    # the sum over 3 agents would reach 60.
    returns = [v for k, v, _ in logged if k in ("return_mean", "test_return_mean")]
    assert returns and max(returns) <= 20.0 + 1e-6
    assert lengths and all(8 <= v <= 60 for v in lengths)
    assert all(0 <= v <= 3 for k, v, _ in logged if k in ("dead_allies_mean", "dead_enemies_mean"))


@pytest.mark.slow
def test_train_with_script_runs_their_entry_point_and_exits():
    # pymarlzooplus's own entry point (sacred, logger, plots) with the runner face on subproc
    # workers; the run ends: close_env() closes the workers.
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "train_with" / "pymarl_qmix.py"
    out = subprocess.run([sys.executable, str(script), "--t-max", "300", "--batch-size-run", "2", "--backend",
                          "subproc"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("t_env=") and "return_mean=" in last, out.stdout[-2000:]
    assert int(last.split()[0].split("=")[1]) > 300

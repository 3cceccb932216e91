"""The PyMARL runner face (marl_vec.compat.pymarl.runner.MarlVecRunner) on its own: its
errors, and that it owns and closes its workers. Its runs under pymarlzooplus's trainer
are in test_pymarl_train.py. Needs torch (in the main venv and in .venv-pymarl).
"""

from __future__ import annotations

import types

import pytest

pytest.importorskip("torch", reason="the runner face fills a torch EpisodeBatch (torch: marl_vec[examples])")
pytest.importorskip("lbforaging", reason="the lbf family needs lbforaging (marl_vec[lbf])")
psutil = pytest.importorskip("psutil")

from marl_vec.compat.pymarl.runner import MarlVecRunner  # noqa: E402


def args(**overrides):
    base = dict(env="marl_vec", env_args={"key": "lbf/8x8-2p-2f-coop", "seed": 0}, batch_size_run=2, device="cpu",
                explorer=None, extra_in_buffer=[], test_nepisode=2, runner_log_interval=1000)
    return types.SimpleNamespace(**{**base, **overrides})


@pytest.mark.parametrize("overrides, error, match", [
    ({"env": "gymma"}, ValueError, "set env='marl_vec' with env_args.key=<a marl_vec config>, got env='gymma'"),
    ({"batch_size_run": 0}, ValueError, "batch_size_run must be an int >= 1 \\(the number of envs\\), got 0"),
    ({"batch_size_run": "4"}, ValueError, "got '4'"),
    ({"env_args": {"key": "lbf/8x8-2p-2f-coop", "map_name": "3m"}}, TypeError, "unknown env_args map_name"),
    ({"env_args": {"key": "lbf/8x8-2p-2f-coop", "backend": "subproc", "num_workers": 3}}, Exception,
     "num_workers"),
])
def test_bad_args_are_refused(overrides, error, match):
    with pytest.raises(error, match=match):
        MarlVecRunner(args(**overrides), logger=None)


def test_env_key_follows_register():
    runner = MarlVecRunner(args(env="mv"), logger=None, env_key="mv")
    assert runner.get_env_info()["episode_limit"] == 50 and runner.batch_size == 2
    with pytest.raises(RuntimeError, match="call setup"):
        runner.run()
    runner.close_env()


def test_close_env_ends_its_workers():
    runner = MarlVecRunner(args(env_args={"key": "lbf/8x8-2p-2f-coop", "backend": "subproc", "num_workers": 2}),
                           logger=None)
    # The VecEnv's own worker pids: a worker started by the forkserver (the start method once
    # torch or JAX threads run in this process) carries the forkserver's command line.
    workers = [psutil.Process(pid) for pid in runner.venv.worker_pids]
    assert len(workers) == 2
    runner.close_env()
    runner.close_env()  # twice is fine
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive

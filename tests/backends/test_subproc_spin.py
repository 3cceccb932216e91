"""SubprocVecEnv(spin_us=...): workers poll for the next command before sleeping. Only
the waiting changes: results stay bitwise DummyVecEnv's (every start method, with the
async pool and ``step_in_main`` too), a slow trainer still finds the worker asleep and
answered, and bad values are refused with what is allowed."""

from __future__ import annotations

import time

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.tools.config import ConfigError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.backends import test_subproc_parity as parity
from tests.backends.test_subproc_parity import cartpole, dying, spread


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_results_equal_dummy_with_spinning_workers(start_method):
    assert parity.run_both(spread, 4, 16, start_method=start_method, spin_us=200) == 8
    assert parity.run_both(dying, 5, 14, "next_step", spin_us=50) >= 5


def test_spin_with_the_main_block_and_a_slow_trainer():
    parity.run_both(cartpole, 6, 30, num_workers=1, step_in_main=True, spin_us=100)
    # A trainer slower than the spin: the workers go back to sleep and still answer.
    with SubprocVecEnv([cartpole] * 4, env_seed=3, num_workers=2, spin_us=20) as venv, \
            mv.DummyVecEnv([cartpole] * 4, env_seed=3) as ref:
        venv.reset(), ref.reset()
        for _ in range(5):
            time.sleep(0.01)
            a = np.zeros((4, 1), dtype=np.int64)
            parity.assert_same_result(ref.step(a), venv.step(a), "slow trainer")


def test_spin_with_the_async_pool():
    with SubprocVecEnv([cartpole] * 4, env_seed=0, num_workers=2, batch_size=2, spin_us=100) as venv:
        venv.reset()
        seen = set()
        for _ in range(6):
            r = venv.recv()
            seen.update(r.env_ids.tolist())
            venv.send(np.zeros((2, 1), dtype=np.int64), r.env_ids)
        assert seen == {0, 1, 2, 3}


@pytest.mark.parametrize("bad", [-1, True, "10", 2e6, float("nan")])
def test_bad_spin_is_refused_with_what_is_allowed(bad):
    with pytest.raises(ValueError, match=r"spin_us must be a number of microseconds in \[0, 1e6\] \(0: off\)"):
        SubprocVecEnv([cartpole] * 2, spin_us=bad)


def test_config_vec_spin_us():
    with mv.make("gym/cartpole", num_envs=4, backend="subproc", num_workers=2, spin_us=50) as venv:
        assert venv._spin == pytest.approx(50e-6)
    with pytest.raises(ConfigError, match="vec.spin_us applies to the subproc backend"):
        mv.make("gym/cartpole", num_envs=2, backend="dummy", spin_us=50)

"""What a synchronous step in which an env raises leaves behind, as the fuzzer models it
(tests/fuzz/machine.py, docs/backends/subproc.md "Errors"): in each block of envs (a
worker's; the whole batch in DummyVecEnv) the envs before the one that raised keep their
step, an ended episode autoreset; that env and the envs after it are not stepped; the
other workers' blocks step whole. The batch goes on without a reset, every row as a plain
loop gives it; the episodes that ended in the failed step are not counted by
``episode_statistics()``; and the async pool is empty until the next reset() or step().
"""

from __future__ import annotations

import numpy as np
import pytest

from marl_vec.core.errors import PoolNotReadyError
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.fuzz.envs import AGENTS, FuzzEnv, box_env
from tests.fuzz.harness import arm
from tests.fuzz.model import check_row, env_error_types, error_env
from tests.fuzz.oracle import EnvOracle

A = len(AGENTS)
N = 4


def _seed_with_short_episodes() -> int:
    """An env_seed whose envs 0 and 3 end their second episode (after arm()) at its first step."""
    for seed in range(5000):
        lengths = []
        for i in (0, 3):
            env = FuzzEnv()
            env.reset(seed=seed + i)
            env.reset()
            lengths.append(env.length)
        if lengths == [1, 1]:
            return seed
    raise AssertionError("no such seed")


backend = backends.backend_fixture(backends.BACKENDS)


def test_the_batch_goes_on_after_a_failed_step_without_a_reset(backend):
    seed = _seed_with_short_episodes()
    oracles = [EnvOracle(box_env, i, seed) for i in range(N)]
    rng = np.random.default_rng(0)
    kwargs = {} if backend == "dummy" else {"batch_size": 2, "timeout": 60}
    with backends.make(backend, [box_env] * N, num_workers=2, env_seed=seed, **kwargs) as venv:
        arm(venv, 1)  # reset (seeded env_seed + i), arm env 1, reset unseeded
        for o in oracles:
            o.reset(None)
            o.reset(None)
        actions = rng.integers(0, 3, (N, A))
        with pytest.raises(env_error_types(backend)) as err:
            venv.step(actions)
        assert error_env(backend, err.value) == 1
        # Dummy: one block, so envs 2 and 3 come after env 1 and are not stepped.
        stepped = [0] if backend == "dummy" else [0, 2, 3]
        for i in stepped:
            oracles[i].step(actions[i])
        assert [t for _, t, _ in venv.call("peek")] == [o.env.t for o in oracles]
        assert [r for r, _, _ in venv.call("peek")] == [o.env.resets for o in oracles]
        assert venv.episode_statistics()["episodes"] == 0, "the failed step's episodes reached no caller"
        if backend != "dummy":
            with pytest.raises(PoolNotReadyError, match="no envs are stepping or ready"):
                venv.recv()
        for o in oracles:
            o.delivered()
        r = venv.reset(env_ids=[1])  # the rows of the envs that stepped reach the caller too
        oracles[1].reset(None)
        for i, o in enumerate(oracles):
            o.delivered()
            check_row(r, i, i, o.row, True, "reset(env_ids=[1]) after the failed step")
        episodes = 0
        for t in range(12):
            actions = rng.integers(0, 3, (N, A))
            r = venv.step(actions)
            for i, o in enumerate(oracles):
                o.step(actions[i])
                episodes += o.row.done
                check_row(r, i, i, o.row, True, f"step {t} after the failed step")
        assert venv.episode_statistics()["episodes"] == episodes

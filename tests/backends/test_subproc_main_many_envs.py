"""SubprocVecEnv(step_in_main=True) past 65,536 envs in this process's block: a pool step of
the whole block returns and close() ends (issue 49: the block marked each answer with one byte
on a pipe that nobody read until the step was over, and a Linux pipe holds 64 KiB)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from marl_vec.vec.subproc.local import LocalHost
from marl_vec.vec.subproc.vec_env import SubprocVecEnv

PER_BLOCK = 65_600  # more answers than a pipe holds bytes (65,536)


@pytest.mark.timeout(30)
def test_the_blocks_answers_never_fill_its_ready_pipe():
    """The fast twin of the test below: more answers queued than a pipe holds bytes, the ready
    pipe readable while any is queued and not after the last one is read."""
    import select

    host = LocalHost([CartPoleEnv], 0, 1, "same_step", 0, 0)
    try:
        assert host.recv_bytes()  # the start answer (pid, specs)
        for k in range(PER_BLOCK):
            host._put(k.to_bytes(4, "little"))  # what a pool step of PER_BLOCK envs queues
        readable = lambda: bool(select.select([host.fileno()], [], [], 0)[0])  # noqa: E731
        assert readable()
        got = [int.from_bytes(host.recv_bytes(), "little") for _ in range(PER_BLOCK)]
        assert got == list(range(PER_BLOCK)) and not host.poll() and not readable()
        with pytest.raises(EOFError, match="no answer queued"):
            host.recv_bytes()
    finally:
        host.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_pool_round_of_more_envs_than_a_pipe_holds_returns_and_closes():
    n = 2 * PER_BLOCK
    venv = SubprocVecEnv([CartPoleEnv] * n, num_workers=1, step_in_main=True, env_seed=0, timeout=240)
    try:
        assert venv._blocks == [(0, PER_BLOCK), (PER_BLOCK, n)]
        first = venv.reset()
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == list(range(n))
        started = time.monotonic()
        venv.send(np.ones((n, 1), dtype=np.int64), r.env_ids)
        r = venv.recv()
        assert time.monotonic() - started < 200
        order = np.argsort(r.env_ids)
        assert r.env_ids[order].tolist() == list(range(n))
        # Every env stepped once, pushed right: x grows by 0.02 * x_dot, x_dot by a push's 0.02 * accel.
        obs = r.obs[order, 0]
        np.testing.assert_allclose(obs[:, 0], first.obs[:, 0, 0] + 0.02 * first.obs[:, 0, 1], rtol=1e-6, atol=1e-7)
        assert (obs[:, 1] > first.obs[:, 0, 1]).all()
        assert not r.done.any() and (r.reward == 1.0).all()
    finally:
        started = time.monotonic()
        venv.close()
        assert time.monotonic() - started < 60

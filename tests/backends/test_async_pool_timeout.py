"""``recv(timeout=...)``: at most that long for ``batch_size`` envs, then those ready.

Tianshou's ``wait_num`` with ``timeout`` (its async vector envs) needs it: after the
deadline a step returns the envs ready by then, at least one. The VecEnv's own
``timeout`` still bounds every wait. On DummyVecEnv every env is ready at once.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerError
from tests.helpers.scripted_envs import SlowRecordingEnv

DELAYS = (0.01, 0.01, 2.0, 2.0)  # envs 2 and 3 are slow; one worker per env


def make(delays=DELAYS, **kwargs) -> mv.SubprocVecEnv:
    fns = [functools.partial(SlowRecordingEnv, delay=d) for d in delays]
    return mv.SubprocVecEnv(fns, num_workers=len(fns), env_seed=0, **kwargs)


def test_recv_with_a_timeout_returns_the_envs_ready_by_then():
    with make(batch_size=3) as venv:
        venv.reset()
        r = venv.recv()
        assert r.env_ids.tolist() == [0, 1, 2]
        venv.send(np.ones((3, 1), dtype=np.int64), r.env_ids)
        began = time.monotonic()
        r = venv.recv(timeout=0.3)  # env 3 (reset, not sent) and the fast 0 and 1; 2 still steps
        assert sorted(r.env_ids.tolist()) == [0, 1, 3] and time.monotonic() - began < 1.0
        venv.send(np.ones((3, 1), dtype=np.int64), r.env_ids)
        began = time.monotonic()
        r = venv.recv(timeout=0.3)
        assert sorted(r.env_ids.tolist()) == [0, 1] and 0.25 < time.monotonic() - began < 1.5
        assert r.obs[:, 0, 0].tolist() == [2.0, 2.0]  # the rows are those envs' second steps
        # With none ready by the deadline: those ready at the end of the first further window
        # of 0.05 s in which one is (env 2 finishes first: it was sent first); fewer than
        # batch_size envs stepping are no error with a timeout.
        r = venv.recv(timeout=0.05)
        late = r.env_ids.tolist()
        assert late[0] == 2
        if late == [2]:
            late += venv.recv(timeout=0.05).env_ids.tolist()
        assert late == [2, 3]


def test_recv_without_a_timeout_waits_for_the_whole_batch():
    with make(delays=(0.01, 0.5), batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        venv.send(np.ones((2, 1), dtype=np.int64), r.env_ids)
        assert sorted(venv.recv().env_ids.tolist()) == [0, 1]


def test_the_vec_envs_own_timeout_still_bounds_the_wait():
    with make(delays=(5.0,), batch_size=1, timeout=0.5) as venv:
        venv.reset()
        r = venv.recv()
        venv.send(np.ones((1, 1), dtype=np.int64), r.env_ids)
        with pytest.raises(WorkerError, match=r"did not answer 'step' within timeout=0.5 s"):
            venv.recv(timeout=0.1)


@pytest.mark.parametrize("timeout", [0, -1.0, "1", True])
def test_a_bad_timeout_is_refused(timeout):
    venv = mv.DummyVecEnv([SlowRecordingEnv] * 2, env_seed=0, batch_size=1)
    venv.reset()
    with pytest.raises(ValueError, match=r"recv\(timeout=...\) must be a positive number of seconds \(or None\), got"):
        venv.recv(timeout=timeout)
    assert venv.recv(timeout=0.1).env_ids.tolist() == [0]  # DummyVecEnv: every env ready at once
    venv.close()

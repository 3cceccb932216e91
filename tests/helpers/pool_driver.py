"""Helpers of the async pool's tests: envs of different speeds, a per-env policy, and
each env's trajectory recorded under DummyVecEnv and under the pool.

The pool driver holds back a random subset of the envs it received (at most
``num_envs - batch_size``, so ``recv()`` can always gather a batch) and sends the
others in a random order: every env must still follow exactly its synchronous trajectory.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import marl_vec as mv
from tests.helpers import backends
from tests.helpers.scripted_envs import DyingAgentEnv

STEPS = 9  # per env: crosses an episode end (episode_len 6) and an agent's death


class DelayedEnv(DyingAgentEnv):
    """DyingAgentEnv whose step sleeps ``delay`` s: envs of different speeds."""

    def __init__(self, delay: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, actions):
        time.sleep(self.delay)
        return super().step(actions)


def policy(avail: np.ndarray, env: int, t: int) -> np.ndarray:
    """A per-env action sequence: agent a takes the first available action from (env + t + a) on."""
    n = avail.shape[-1]
    out = np.zeros(avail.shape[0], dtype=np.int64)
    for a in range(avail.shape[0]):
        for k in range(n):
            action = (env + t + a + k) % n
            if avail[a, action]:
                out[a] = action
                break
    return out


def record(traj: list, r: Any, k: int) -> None:
    done = bool(r.done[k])
    ep = r.infos[k].get("episode")
    traj.append((r.obs[k].copy(), r.reward[k].copy(), r.terminated[k].copy(), r.truncated[k].copy(), done,
                 r.agent_mask[k].copy(), r.final_obs[k].copy() if done else None,
                 None if ep is None else (ep["return"], ep["length"])))


def sync_trajectories(fns: list, steps: int) -> list[list]:
    with mv.DummyVecEnv(fns) as venv:
        r = venv.reset()
        trajs: list[list] = [[] for _ in fns]
        for i in range(len(fns)):
            record(trajs[i], r, i)
        for t in range(steps):
            actions = np.stack([policy(r.avail_actions[i], i, t) for i in range(len(fns))])
            r = venv.step(actions)
            for i in range(len(fns)):
                record(trajs[i], r, i)
        return trajs


def pool_trajectories(fns: list, steps: int, backend: str = "subproc", hold: bool = False, seed: int = 0,
                      **kwargs: Any) -> tuple[list[list], list[list[int]], dict]:
    """Each env's trajectory under the pool, the env_ids of every batch, and the episode
    statistics. ``hold``: keep a random subset of the received envs for later, send the
    rest in a random order."""
    with backends.make(backend, fns, **kwargs) as venv:
        return drive_pool(venv, steps, hold, seed)


def drive_pool(venv: mv.VecEnv, steps: int, hold: bool = False, seed: int = 0) -> tuple[list[list], list[list[int]], dict]:
    """:func:`pool_trajectories` on a VecEnv made elsewhere (a config's, say); it stays open."""
    rng = np.random.default_rng(seed)
    venv.reset()
    n, batch = venv.num_envs, venv.batch_size
    trajs: list[list] = [[] for _ in range(n)]
    batches: list[list[int]] = []
    held: dict[int, np.ndarray] = {}  # env -> its next actions, received and not sent
    while min(len(tr) for tr in trajs) < steps + 1:
        r = venv.recv()
        assert len(r.env_ids) == batch
        batches.append(r.env_ids.tolist())
        for k, i in enumerate(r.env_ids.tolist()):
            if len(trajs[i]) < steps + 1:
                record(trajs[i], r, k)
            held[i] = policy(r.avail_actions[k], i, len(trajs[i]) - 1)
        ids = list(held)
        rng.shuffle(ids)
        keep = int(rng.integers(0, n - batch + 1)) if hold else 0
        send = ids[keep:]
        if send:
            venv.send(np.stack([held.pop(i) for i in send]), send)
    return trajs, batches, venv.episode_statistics()


def assert_same(got: list[list], expected: list[list]) -> None:
    for i, (ta, tb) in enumerate(zip(got, expected)):
        assert len(ta) >= len(tb)
        for t, (x, y) in enumerate(zip(ta, tb)):
            for field, u, v in zip(("obs", "reward", "terminated", "truncated", "done", "mask", "final_obs",
                                    "episode"), x, y):
                if isinstance(u, np.ndarray):
                    np.testing.assert_array_equal(u, v, err_msg=f"env {i} step {t} {field}")
                else:
                    assert u == v, f"env {i} step {t} {field}: {u} != {v}"

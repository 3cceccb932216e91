"""Melting Pot (family ``meltingpot``) on every backend and the async pool, bit for bit against
what each env's own substrate returned, through episode ends, and its seeds against a plain loop.

Melting Pot's substrates are not reproducible from their seed (tests/helpers/meltingpot_reference.py
says why), so each env logs, in the process that steps it, a digest of every timestep its real
substrate returned; every row of every result (obs of each key, rewards, the end of an episode,
WORLD.RGB as the state, final_obs/final_state at an end) must have that digest. The Lab2d seeds
each env's worlds were built with must be the ones a plain loop
``random.seed(env_seed + i); substrate.build(...)`` draws, then one more per reset.
Episodes are 5 steps (``max_episode_steps``), so each env crosses two ends.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dmlab2d", reason="the meltingpot extra is not installed: pip install 'marl_vec[meltingpot]'")

from tests.helpers.backends import BACKENDS, POOL_BACKENDS, make_backend, ray_cluster  # noqa: E402,F401
from tests.helpers.meltingpot_reference import RecorderFn, actions_for, plain_loop_seeds, row_digest  # noqa: E402

E, STEPS, SEED, LIMIT = 3, 12, 11, 5
NAME = "collaborative_cooking__asymmetric"  # 2 players, a 40x40 view, a world built in ~0.1 s


def fns(with_world: bool = True) -> list:
    return [RecorderFn(NAME, with_world=with_world, max_episode_steps=LIMIT) for _ in range(E)]


def check_seeds(venv) -> None:
    seeds = venv.get_attr("seeds")
    for i, got in enumerate(seeds):
        assert got == plain_loop_seeds(NAME, SEED + i, len(got) - 1), f"env {i}"
        assert got[1:] == [got[0] + k for k in range(1, len(got))]  # an unseeded reset: the substrate's next seed


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_row_is_what_its_substrate_returned(backend, request):
    with make_backend(backend, fns(), request, env_seed=SEED, state="env") as venv:
        keys = tuple(venv.spec.obs_space.spaces)
        r = venv.reset()
        want = [[] for _ in range(E)]
        for i in range(E):
            want[i].append(row_digest(keys, r, i, "reset"))
        ends = 0
        for t in range(STEPS):
            actions = np.stack([actions_for(venv.spec.n_actions, venv.spec.n_agents, i, t) for i in range(E)])
            r = venv.step(actions)
            for i in range(E):
                if r.done[i]:
                    ends += 1
                    assert r.truncated[i].all() and not r.terminated[i].any()  # at the frame limit
                    assert r.infos[i]["episode"]["length"] == LIMIT
                    assert r.infos[i]["episode"]["collective_return"] == pytest.approx(
                        float(r.infos[i]["episode"]["agent_returns"].sum()))
                    want[i] += [row_digest(keys, r, i, "final"), row_digest(keys, r, i, "reset")]
                else:
                    want[i].append(row_digest(keys, r, i, "step"))
        assert ends == E * (STEPS // LIMIT)
        assert venv.get_attr("log") == want
        check_seeds(venv)


@pytest.mark.parametrize("backend", POOL_BACKENDS)
def test_the_async_pool_returns_what_each_substrate_returned(backend, request):
    kwargs = {} if backend == "ray-ray" else {"batch_size": 2}  # a Ray actor answering Ray calls steps whole blocks
    with make_backend(backend, fns(with_world=False), request, env_seed=SEED, state="none", **kwargs) as venv:
        keys = tuple(venv.spec.obs_space.spaces)
        venv.reset()
        want: list[list[str]] = [[] for _ in range(E)]
        steps = [0] * E
        rng = np.random.default_rng(0)
        while min(steps) < STEPS:
            r = venv.recv()
            ids = r.env_ids.tolist()
            for k, i in enumerate(ids):
                if not want[i]:
                    want[i].append(row_digest(keys, r, k, "reset"))
                elif r.done[k]:
                    want[i] += [row_digest(keys, r, k, "final"), row_digest(keys, r, k, "reset")]
                else:
                    want[i].append(row_digest(keys, r, k, "step"))
            ids = [int(i) for i in rng.permutation(ids)]  # sent in another order than received
            venv.send(np.stack([actions_for(venv.spec.n_actions, venv.spec.n_agents, i, steps[i]) for i in ids]), ids)
            for i in ids:
                steps[i] += 1
        log = venv.get_attr("log")  # waits for the envs in flight; their steps are logged beyond `want`
        for i in range(E):
            assert len(want[i]) >= STEPS and log[i][:len(want[i])] == want[i], f"env {i}"
        check_seeds(venv)

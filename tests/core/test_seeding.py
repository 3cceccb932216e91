"""Seeding of first resets: env i's first reset uses ``env_seed + i`` however it is
reached (a full reset, partial resets in any order, an explicit seed for others),
on every backend; later resets without a seed continue each env's own stream.

Every reset is checked bitwise against the native envs driven by hand with the
seeds the README promises.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401
from tests.helpers.scripted_envs import DyingAgentEnv

E = 4
ENV_SEED = 100

# Reset calls, as (seed, env_ids); None env_ids resets every env.
SEQUENCES = {
    "one env at a time": [(None, [0]), (None, [1]), (None, [2]), (None, [3])],
    "reversed, then all": [(None, [3]), (None, [2]), (None, [1]), (None, [0]), (None, None)],
    "a worker's second env first": [(None, [1]), (None, [3, 2]), (None, None)],
    "an explicit seed for one, then the rest": [(7, [2]), (None, [0]), (None, None), (None, [2])],
    "all, then again": [(None, None), (None, [1]), (None, None)],
}


def cartpole():
    return gym.make("CartPole-v1")


def spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)


def native_obs(env, seed: int | None) -> np.ndarray:
    """The observation row the batch must hold after ``env.reset(seed=seed)``."""
    obs, _ = env.reset(seed=seed)
    if isinstance(obs, dict):  # PettingZoo: agents in possible_agents order
        return np.stack([obs[a] for a in env.possible_agents])
    return np.asarray(obs)[None]


def expected_resets(env_fn, sequence) -> list[dict[int, np.ndarray]]:
    """Drive E native envs through ``sequence``: a first reset without a seed uses
    ENV_SEED + i, a later one none; an explicit seed s gives env i s + i."""
    envs = [env_fn() for _ in range(E)]
    reset_before: set[int] = set()
    out = []
    for seed, ids in sequence:
        rows = {}
        for i in range(E) if ids is None else ids:
            if seed is not None:
                s = seed + i
            else:
                s = None if i in reset_before else ENV_SEED + i
            rows[i] = native_obs(envs[i], s)
            reset_before.add(i)
        out.append(rows)
    for env in envs:
        env.close()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SEQUENCES))
def test_every_first_reset_is_seeded_env_seed_plus_i(backend, name, request):
    sequence = SEQUENCES[name]
    expected = expected_resets(cartpole, sequence)
    with make_backend(backend, [cartpole] * E, request, env_seed=ENV_SEED) as venv:
        for (seed, ids), rows in zip(sequence, expected):
            r = venv.reset(seed=seed, env_ids=ids)
            for i, row in rows.items():
                np.testing.assert_array_equal(r.obs[i], row, err_msg=f"env {i} after reset(seed={seed}, env_ids={ids})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_pettingzoo_partial_first_resets_are_seeded(backend, request):
    sequence = SEQUENCES["reversed, then all"]
    expected = expected_resets(spread, sequence)
    with make_backend(backend, [spread] * E, request, env_seed=ENV_SEED) as venv:
        for (seed, ids), rows in zip(sequence, expected):
            r = venv.reset(seed=seed, env_ids=ids)
            for i, row in rows.items():
                np.testing.assert_array_equal(r.obs[i], row, err_msg=f"env {i} after reset(env_ids={ids})")


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_two_identical_runs_with_partial_resets_agree(backend, request):
    """Resets one env at a time, steps, resets others: two runs give the same bits."""
    fns = [functools.partial(DyingAgentEnv, episode_len=4)] * E

    def run() -> list[np.ndarray]:
        seen = []
        rng = np.random.default_rng(0)
        with make_backend(backend, fns, request, env_seed=ENV_SEED, autoreset="disabled") as venv:
            for i in (2, 0, 3, 1):
                r = venv.reset(env_ids=[i])
                seen.append(r.obs.copy())
            for _ in range(4):
                r = venv.step(np.argmax(r.avail_actions * rng.random(r.avail_actions.shape), axis=-1))
                seen.append(r.obs.copy())
            seen.append(venv.reset(env_ids=[1, 2]).obs.copy())
        return seen

    first, second = run(), run()
    for t, (a, b) in enumerate(zip(first, second)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {t}")
    # Seeded at all: the envs' random observation parts differ from one another.
    assert len(set(first[3][:, 0, 2].tolist())) == E


def test_unseeded_batch_stays_unseeded():
    """env_seed=None: no env is seeded, whichever way it is first reset."""
    with make_backend("dummy", [cartpole] * 2, None, env_seed=None) as venv:
        a = venv.reset(env_ids=[1]).obs[1].copy()
    with make_backend("dummy", [cartpole] * 2, None, env_seed=None) as venv:
        b = venv.reset(env_ids=[1]).obs[1].copy()
    assert not np.array_equal(a, b)  # two fresh draws from the OS's entropy

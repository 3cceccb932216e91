"""The JaxMARL family equals JaxMARL stepped by hand, bit for bit, on DummyVecEnv and SubprocVecEnv.

Every step compares obs, state, avail actions, agent mask, rewards, dones and,
where an episode ended, the true last views (final_*) and SMAX's episode
statistics with :class:`tests.helpers.jaxmarl_reference.Reference` (JaxMARL's own
``step`` with the same keys and actions), through :func:`tests.helpers.jaxmarl_reference.compare`.
Several episodes per env id; tests/families/test_jaxmarl_breadth.py takes every served id a few steps.

Compiles cost 5-20 s per function and shape on an idle machine (more on a busy
one): every test uses blocks of ``K`` envs (Subproc: two workers of ``K``), so
that shapes repeat and JAX's persistent cache (~/.cache/marl_vec/jax) serves
repeated runs. The fast selection is SMAX 3m and MPE simple_spread on
DummyVecEnv; SubprocVecEnv and the other served ids are ``slow``. The comparison runs with XLA's CPU fusion
emitters off (see :mod:`tests.helpers.jaxmarl_reference`): with them on, two XLA
programs round about 1 float in 10^5 one ulp apart.
"""

from __future__ import annotations

import pytest

from tests.helpers.jaxmarl_reference import K, compare  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

FAST = [("smax/3m", {}, 60), ("jax_mpe/simple_spread", {}, 60)]
SLOW = [
    ("smax/2s3z", {}, 60),
    ("smax/smacv2_5_units", {}, 60),
    ("smax/8m", {}, 60),
    ("hanabi", {}, 60),
    ("overcooked", {"max_steps": 20}, 50),
    ("coin_game", {"num_inner_steps": 5, "num_outer_steps": 2}, 30),
    ("switch_riddle", {}, 30),
    ("jax_mpe/simple_tag", {}, 60),
    ("jax_mpe/simple_speaker_listener", {}, 60),
]


@pytest.mark.parametrize("env_id,kwargs,steps", FAST, ids=[c[0] for c in FAST])
def test_dummy_equals_jaxmarl_by_hand(env_id, kwargs, steps):
    assert compare(env_id, kwargs, steps, "dummy") >= 2 * K


@pytest.mark.slow  # two worker processes import JAX and load their block: 30-120 s here
@pytest.mark.parametrize("env_id,kwargs,steps", FAST[:1], ids=[c[0] for c in FAST[:1]])
def test_subproc_equals_jaxmarl_by_hand(env_id, kwargs, steps):
    assert compare(env_id, kwargs, steps, "subproc") >= 2 * K


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kwargs,steps", SLOW, ids=[c[0] for c in SLOW])
def test_served_envs_equal_jaxmarl_by_hand(env_id, kwargs, steps):
    assert compare(env_id, kwargs, steps, "dummy") >= 1


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kwargs,steps", [SLOW[1], SLOW[3]], ids=[SLOW[1][0], SLOW[3][0]])
def test_served_envs_equal_jaxmarl_by_hand_in_workers(env_id, kwargs, steps):
    assert compare(env_id, kwargs, steps, "subproc") >= 1

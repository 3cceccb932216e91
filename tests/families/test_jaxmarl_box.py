"""Box actions in the JaxMARL family (MABrax, continuous MPE, jaxnav) equal JaxMARL stepped by hand, bit for bit.

The same comparison as tests/families/test_jaxmarl_parity.py (obs, rewards, dones and, where an
episode ended, the true last views), with uniform actions within each agent's bounds, padded to the largest agent's.
MABrax is made with brax's own autoreset off (the catalog's ``auto_reset=False``), so that the
last observation is the true one. brax's jit is slow on CPU: the default selection is continuous MPE (fast) and ONE
MABrax scenario (hopper_3x1, episodes cut at 20 steps, blocks of ``K``; ``slow``); the rest is ``matrix``.
"""

from __future__ import annotations

import pytest

from tests.helpers.jaxmarl_reference import K, compare  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
pytest.importorskip("brax", reason="the mabrax extra is not installed: pip install 'marl_vec[mabrax]'")

SHORT = {"episode_length": 20}
MATRIX = [
    ("ant_4x2", SHORT, 25),
    ("halfcheetah_6x1", SHORT, 25),
    ("humanoid_9|8", SHORT, 25),
    ("walker2d_2x3", SHORT, 25),
    ("jax_mpe/simple_world_comm", {}, 30),  # its default: Box actions of two sizes, padded
    ("jaxnav", {"max_steps": 20}, 45),
    ("jaxnav", {"max_steps": 20, "act_type": "Discrete"}, 45),
]


def test_continuous_mpe_equals_jaxmarl_by_hand():
    # The fast test of the concern (a few seconds of compiling): Box actions in [0, 1], episodes of 25.
    assert compare("jax_mpe/simple_spread", {"action_type": "Continuous"}, 30, "dummy") >= K


@pytest.mark.slow  # brax's jit: ~60 s with an empty JAX cache at load 6, ~10 s from the cache
def test_mabrax_hopper_equals_jaxmarl_by_hand():
    assert compare("hopper_3x1", SHORT, 45, "dummy") >= 2 * K  # two episode ends per env, final obs compared


@pytest.mark.exhaustive
def test_mabrax_hopper_in_workers_equals_jaxmarl_by_hand():
    assert compare("hopper_3x1", SHORT, 25, "subproc") >= 2 * K


@pytest.mark.exhaustive
@pytest.mark.parametrize("env_id,kwargs,steps", MATRIX,
                         ids=[c[0] + ("-discrete" if "act_type" in c[1] else "") for c in MATRIX])
def test_box_envs_equal_jaxmarl_by_hand(env_id, kwargs, steps):
    compare(env_id, kwargs, steps, "dummy")

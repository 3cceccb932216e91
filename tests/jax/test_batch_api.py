"""marl_vec.jax's contract apart from the numbers: keys, leaves, options and their errors, lazy import.

Cheap: shapes are checked with ``jax.eval_shape`` (traced, never compiled); the one
compiled function is MPE simple_spread's reset (a few seconds). The numbers are
test_batch_by_hand.py's and test_batch_stateful.py's.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import marl_vec.jax as mvj  # noqa: E402
from marl_vec.envs.jaxmarl.kernels import key_of_seed  # noqa: E402
from marl_vec.envs.jaxmarl.model import model_of  # noqa: E402

MPE = "jax_mpe/simple_spread"


def test_import_marl_vec_does_not_import_jax():
    code = "import sys, marl_vec; assert 'jax' not in sys.modules and 'marl_vec.jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 3, 2**40 + 5, 2**64 - 2])
def test_env_i_gets_the_key_of_env_seed_plus_i(seed):
    """The stateful family seeds env i with key_of_seed(env_seed + i); the batch's keys are the same,
    the 64-bit seed carried from the low word into the high one."""
    keys = np.asarray(mvj.env_keys(jnp.asarray(key_of_seed(seed)), 4))
    np.testing.assert_array_equal(keys, np.stack([key_of_seed(seed + i) for i in range(4)]))
    shard = np.asarray(mvj.env_keys(jnp.asarray(key_of_seed(seed)), 2, offset=2))
    np.testing.assert_array_equal(shard, keys[2:])  # a key depends on the env's global index only


def test_a_typed_key_is_the_same_as_its_raw_key_and_other_keys_are_refused():
    np.testing.assert_array_equal(mvj.env_keys(jax.random.key(7), 2), mvj.env_keys(jax.random.PRNGKey(7), 2))
    with pytest.raises(ValueError, match=r"one threefry key, jax.random.PRNGKey\(seed\).*shape \(2, 2\)"):
        mvj.env_keys(jax.random.split(jax.random.PRNGKey(0)), 2)
    with pytest.raises(ValueError, match="got int of shape None"):
        mvj.env_keys(7, 2)


def _structs(tree):
    return jax.tree.map(lambda x: (x.shape, x.dtype), tree)


@pytest.mark.parametrize("mode,options", [("same_step", {}), ("next_step", {"time_limit": 5}),
                                          ("one_episode", {}), ("disabled", {}), ("fast", {"gamma": 0.99}),
                                          ("same_step", {"resets_per_step": 2})])
def test_the_timestep_has_the_same_leaves_at_every_step_and_the_spec_layout(mode, options):
    b = mvj.batch(MPE, K, mode, **options)
    spec = b.spec
    state, ts0 = jax.eval_shape(b.reset, jax.random.PRNGKey(0))
    state1, ts1 = jax.eval_shape(b.step, state, jax.ShapeDtypeStruct((K, 3), jnp.int32))
    assert jax.tree.structure(ts0) == jax.tree.structure(ts1) and _structs(ts0) == _structs(ts1)
    assert jax.tree.structure(state) == jax.tree.structure(state1) and _structs(state) == _structs(state1)
    assert (ts0.obs.shape, ts0.obs.dtype) == ((K, 3, *spec.obs_shape), spec.obs_dtype)
    assert (ts0.state.shape, ts0.state.dtype) == ((K, *spec.state_shape), spec.state_dtype)
    assert (ts0.avail_actions.shape, ts0.avail_actions.dtype) == ((K, 3, spec.n_actions), np.dtype(bool))
    assert ts0.final_obs.shape == ts0.obs.shape and ts0.final_agent_mask.shape == (K, 3)
    for name in ("reward", "terminated", "truncated", "agent_mask", "acting"):
        assert getattr(ts0, name).shape == (K, 3)
    assert ts0.reward.dtype == np.float32 and ts0.done.shape == ts0.autoreset.shape == (K,)
    assert (ts0.episode.discounted_return is None) == ("gamma" not in options)


def test_smax_and_box_layouts_follow_the_spec():
    smax = mvj.batch("smax/3m", K)
    _, ts = jax.eval_shape(smax.reset, jax.random.PRNGKey(0))
    assert (ts.obs.shape, ts.state.shape, ts.avail_actions.shape) == ((K, 3, 75), (K, 72), (K, 3, 8))
    assert sorted(ts.episode.stats) == sorted(smax.spec.stats) == ["battle_won", "dead_allies", "dead_enemies"]
    box = mvj.batch(MPE, K, action_type="Continuous")
    state, ts = jax.eval_shape(box.reset, jax.random.PRNGKey(0))
    assert ts.avail_actions is None and ts.final_avail_actions is None
    _, ts1 = jax.eval_shape(box.step, state, jax.ShapeDtypeStruct((K, 3, *box.spec.action_shape), jnp.float32))
    assert jax.tree.structure(ts1) == jax.tree.structure(ts)


def test_it_vmaps_over_seeds_and_scans():
    b = mvj.batch(MPE, K)

    def rollout(key):
        state, _ = b.reset(key)
        return jax.lax.scan(lambda s, _: b.step(s, jnp.zeros((K, 3), jnp.int32)), state, None, length=5)[1]

    out = jax.eval_shape(jax.vmap(rollout), jax.random.split(jax.random.PRNGKey(0), 8))
    assert out.obs.shape == (8, 5, K, 3, 18) and out.episode.valid.shape == (8, 5, K)


def test_a_shard_with_an_offset_plays_the_envs_of_its_global_indices():
    whole = jax.jit(mvj.batch(MPE, K).reset)(jax.random.PRNGKey(3))[1]
    shard = jax.jit(mvj.batch(MPE, 2, offset=2).reset)(jax.random.PRNGKey(3))[1]
    np.testing.assert_array_equal(np.asarray(shard.obs), np.asarray(whole.obs)[2:])
    assert not np.array_equal(np.asarray(whole.obs)[0], np.asarray(whole.obs)[2])


@pytest.mark.parametrize("call,message", [
    (lambda: mvj.batch(MPE, 4, "later"), "unknown autoreset mode 'later'; allowed: same_step, next_step, disabled, "
                                         "one_episode, fast"),
    (lambda: mvj.batch(MPE, 0), r"num_envs=0; allowed: a positive int$"),
    (lambda: mvj.batch(MPE, 4, time_limit=0), r"time_limit=0; allowed: a positive int or None"),
    (lambda: mvj.batch(MPE, 4, time_limit=2.5), r"time_limit=2.5; allowed: a positive int or None"),
    (lambda: mvj.batch(MPE, 4, gamma=0.0), r"gamma=0.0; allowed: a float in \(0, 1\] or None"),
    (lambda: mvj.batch(MPE, 4, "next_step", resets_per_step=2),
     "resets_per_step is an option of autoreset='same_step' .optimistic resets., not of 'next_step'"),
    (lambda: mvj.batch(MPE, 4, resets_per_step=5), "resets_per_step=5 is more than num_envs=4; allowed: 1 to 4"),
    (lambda: mvj.batch(MPE, 4, offset=-1), r"offset=-1; allowed: an int >= 0"),
    (lambda: mvj.batch(MPE, 4, device="cpu"), "device= is the stateful family's option"),
    (lambda: mvj.batch("smax/4m", 4), "unknown SMAX map '4m'"),
])
def test_bad_options_fail_naming_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_actions_of_the_wrong_shape_fail_at_trace_time_naming_the_expected_one():
    b = mvj.batch(MPE, K)
    state, _ = jax.eval_shape(b.reset, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"actions of shape \(4,\); expected \(4, 3\): ints \(E, A\)"):
        jax.eval_shape(b.step, state, jax.ShapeDtypeStruct((K,), jnp.int32))
    box = mvj.batch(MPE, K, action_type="Continuous")
    state, _ = jax.eval_shape(box.reset, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"expected \(4, 3, 5\): floats \(E, A, \*action_shape\)"):
        jax.eval_shape(box.step, state, jax.ShapeDtypeStruct((K, 3), jnp.float32))


def test_the_batch_says_what_it_is():
    b = mvj.batch(MPE, K, "next_step", time_limit=10)
    assert repr(b) == "marl_vec.jax.batch('jax_mpe/simple_spread', num_envs=4, autoreset='next_step', time_limit=10)"
    assert b.spec is model_of(MPE, {}).spec and b.agents == ("agent_0", "agent_1", "agent_2")

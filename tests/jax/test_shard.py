"""``marl_vec.jax.shard``: 1, 2 and 4 devices play the same episodes, leaf for leaf; seeds under ``vmap``; misuse.

The rollouts run in a process with 4 CPU devices (``--xla_force_host_platform_device_count=4``,
read once when JAX starts): :func:`tests.helpers.jax_shard_runs.run`, one process per
case, cached for the module. Each configuration's TimeSteps of a jitted reset +
``lax.scan`` (actions drawn inside the scan from the sharded ``avail_actions``) are
compared with the unsharded batch's, every leaf, bit for bit.

Every case runs with ``--xla_cpu_experimental_ynn_fusion_type=`` and
``--xla_disable_hlo_passes=algsimp`` (`tests.helpers.jax_shard_runs`: without them XLA:CPU's
floats depend on the batch's size and split); one ``slow`` test measures SMAX without the second.

Compiles: 9 per case (the whole batch; 1, 2 and 4 devices; a 2 x 2 mesh; optimistic resets
over 4 devices; two under ``vmap``), 15 s for MPE simple_spread in the default selection
with JAX's persistent cache warm, 41 s cold (load 1.2 to 1.9, 2 cores); SMAX 3m (whose floats
depend on the batch's size and split without the flags) and a time limit with ``next_step``
are ``slow`` (2 and 0.7 minutes).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import marl_vec.jax as mvj  # noqa: E402
from tests.helpers.jax_shard_runs import run  # noqa: E402

MPE = "jax_mpe/simple_spread"
CASES = [
    pytest.param(MPE, (), "same_step", (), 60, id="mpe-same_step"),
    pytest.param("smax/3m", (), "same_step", (), 120, id="smax-same_step", marks=pytest.mark.slow),
    pytest.param(MPE, (), "next_step", (("gamma", 0.9), ("time_limit", 10)), 40, id="mpe-next_step-time_limit",
                 marks=pytest.mark.slow),
]


def assert_same(got: dict, want: dict, what: str) -> None:
    assert sorted(got) == sorted(want), what
    for path, x in want.items():
        np.testing.assert_array_equal(got[path], x, err_msg=f"{what}: {path}")


@pytest.mark.parametrize("env_id,kwargs,mode,options,steps", CASES)
def test_1_2_and_4_devices_play_the_episodes_of_the_unsharded_batch_bit_for_bit(env_id, kwargs, mode, options, steps):
    r = run(env_id, kwargs, mode, options, steps)
    whole = r.leaves["whole"]
    assert whole[".done"].shape == (steps + 1, K) and whole[".done"].sum() >= K + 1  # episode ends compared
    # Every leaf of the TimeStep: the views, flags, final views and the episode's numbers.
    assert {".obs", ".state", ".avail_actions", ".agent_mask", ".reward", ".terminated", ".truncated",
            ".final_obs", ".final_state", ".autoreset", ".episode.team_return", ".episode.agent_returns",
            ".episode.length", ".episode.valid"} <= set(whole)
    for n in (1, 2, 4):
        assert_same(r.leaves[f"devices_{n}"], whole, f"{n} devices")
        # Each device holds its own envs: (T + 1, E / n, A, *obs_shape).
        assert r.layout[f"devices_{n}"] == {"devices": n, "block": [steps + 1, K // n, *whole[".obs"].shape[2:]]}
    # A mesh of two axes, the envs split over one of them and replicated over the other.
    assert_same(r.leaves["devices_2x2"], whole, "a 2 x 2 mesh")
    assert r.layout["devices_2x2"]["block"][1] == K // 2
    if mode == "same_step" and not options:
        # Optimistic resets are per device: one per step on each device of one env is every env's own.
        if env_id == MPE:  # its 4 envs all end at once (step 26): unsharded, 1 reset would be shared
            assert whole[".done"].all(axis=1).any()
        assert_same(r.leaves["optimistic_4"], whole, "resets_per_step=1 on 4 devices of 1 env")


@pytest.mark.slow
def test_without_the_split_flag_smax_floats_differ_by_one_ulp_between_one_device_and_several():
    """What ``--xla_disable_hlo_passes=algsimp`` buys, measured: XLA simplifies ``x / broadcast(y)`` to
    ``x * broadcast(1 / y)`` in the one-device program, not in the SPMD program of 2 or 4 devices.
    2 and 4 devices still agree bit for bit, and so do 1 device and the unsharded batch; between
    the two, only SMAX's observation floats differ (relative positions over the sight range),
    by one float32 ulp at most; every int, flag, state, reward and episode number is exact."""
    r = run("smax/3m", (), "same_step", (), 120, split_free=False)
    whole, one, two, four = (r.leaves[name] for name in ("whole", "devices_1", "devices_2", "devices_4"))
    assert_same(one, whole, "1 device")
    assert_same(four, two, "4 devices against 2")
    differ = sorted(path for path in whole if not np.array_equal(whole[path], two[path]))
    assert differ == [".final_obs", ".obs"]
    for path in differ:
        np.testing.assert_allclose(two[path], whole[path], rtol=0, atol=6e-8)
        assert np.all(np.abs(two[path] - whole[path]) <= np.spacing(np.abs(whole[path])))  # one ulp
    assert 0 < (two[".obs"] != whole[".obs"]).mean() < 0.02


@pytest.mark.parametrize("env_id,steps", [pytest.param(MPE, 60, id="mpe"),
                                           pytest.param("smax/3m", 120, id="smax", marks=pytest.mark.slow)])
def test_vmap_over_seeds_gives_what_separate_batches_give_also_sharded(env_id, steps):
    r = run(env_id, (), "same_step", (), steps)
    apart = r.leaves["seeds_apart"]
    obs_shape = list(apart[".obs"].shape[3:])
    assert apart[".obs"].shape[:3] == (2, steps + 1, K)
    assert not np.array_equal(apart[".obs"][0], apart[".obs"][1])  # keys num_envs apart: other envs
    assert_same(r.leaves["seeds_vmap"], apart, "vmap over 2 seeds, a seed on each of 2 devices")
    assert r.layout["seeds_vmap"] == {"devices": 2, "block": [1, steps + 1, K, *obs_shape]}
    assert_same(r.leaves["seeds_vmap_4"], apart, "vmap over 2 seeds of the batch sharded over 4 devices")
    # The population: each device steps its envs of both seeds, a (2, E/4) block.
    assert r.layout["seeds_vmap_4"] == {"devices": 4, "block": [2, steps + 1, 1, *obs_shape]}


def test_misuse_over_several_devices_fails_naming_what_is_allowed():
    errors = run(MPE, (), "same_step", (), 60).errors
    assert errors == {
        "three_devices": "ValueError: marl_vec.jax.shard: num_envs=4 does not split over the 3 devices of mesh axis "
                         "'envs'; allowed: a multiple of 3",
        "resets_per_step": "ValueError: marl_vec.jax.shard: resets_per_step=2 is per device, and a device holds 1 "
                           "envs; allowed: 1 to 1",
        "two_axes": "ValueError: marl_vec.jax.shard: the mesh has axes ('seeds', 'envs'); name the one to split "
                    "the envs over with axis=",
    }


def test_misuse_on_one_device_fails_naming_what_is_allowed():
    b = mvj.batch(MPE, K)
    mesh = Mesh(np.asarray(jax.devices()[:1]), ("envs",))
    with pytest.raises(TypeError, match=r"batch is a str; expected a marl_vec.jax.batch\(...\)"):
        mvj.shard(MPE, mesh)
    with pytest.raises(TypeError, match=r"mesh is a list; expected a jax.sharding.Mesh"):
        mvj.shard(b, jax.devices())
    with pytest.raises(ValueError, match=r"axis='seeds' is not an axis of the mesh; allowed: \('envs',\)"):
        mvj.shard(b, mesh, axis="seeds")
    sb = mvj.shard(b, mesh)
    state, _ = jax.eval_shape(sb.reset, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"actions of shape \(4,\); expected \(4, 3\): ints \(E, A\)"):
        jax.eval_shape(sb.step, state, jax.ShapeDtypeStruct((K,), jnp.int32))
    assert repr(sb) == ("marl_vec.jax.shard(marl_vec.jax.batch('jax_mpe/simple_spread', num_envs=4, "
                        "autoreset='same_step'), mesh axis 'envs' of 1 devices)")
    assert (sb.per_device, sb.num_envs, sb.spec, sb.axis) == (4, 4, b.spec, "envs")


def test_the_sharded_batch_has_the_leaves_of_the_batch():
    b = mvj.batch(MPE, K, "one_episode", gamma=0.9)
    sb = mvj.shard(b)  # every device of this process, one axis
    state, ts = jax.eval_shape(sb.reset, jax.random.PRNGKey(0))
    want_state, want_ts = jax.eval_shape(b.reset, jax.random.PRNGKey(0))
    shapes = lambda tree: jax.tree.map(lambda x: (x.shape, x.dtype), tree)  # noqa: E731
    assert shapes(ts) == shapes(want_ts) and shapes(state) == shapes(want_state)
    _, ts1 = jax.eval_shape(sb.step, state, jax.ShapeDtypeStruct((K, 3), jnp.int32))
    assert shapes(ts1) == shapes(want_ts)

"""Rollouts of ``marl_vec.jax.shard`` over 1, 2 and 4 CPU devices, in a process of its own; shared by tests/jax/test_shard.py.

JAX reads ``--xla_force_host_platform_device_count`` once, when its backend starts,
and a pytest process has started it with one CPU device (and the tests' exact flags,
``tests.helpers.jaxmarl_reference``). So `run` starts ``python -m
tests.helpers.jax_shard_runs`` with 4 CPU devices and the same exact flags; that
process (with `SHAPE_FREE_FLAG` and `SPLIT_FREE_FLAG` too) runs one case, a jitted
reset + ``lax.scan`` of ``steps`` steps whose actions are drawn inside the scan from the last ``avail_actions`` (a trainer's
policy, on the sharded arrays), and saves every leaf of the TimeSteps to ``.npz``
files, one per configuration:

- ``whole``: the unsharded batch;
- ``devices_1``, ``devices_2``, ``devices_4``: `shard` over a mesh of 1, 2, 4 devices (the mesh of 2
  with Auto axes, the others Explicit); ``devices_2x2``: a mesh of 2 × 2, the envs over one axis;
- ``optimistic_4`` (``same_step`` cases): ``resets_per_step=1`` over 4 devices, one env each;
- ``seeds_apart``: two unsharded batches from keys ``num_envs`` apart, run one after the other;
- ``seeds_vmap``: the same two under ``jax.vmap`` over the keys, split over 2 devices (a seed
  each); ``seeds_vmap_4``: ``vmap`` of
  the batch sharded over 4 devices (the seeds × envs population, cut along the envs).

It also writes ``layout.json``: the devices each output is spread over and one device's
block shape, per configuration; and the messages of `shard`'s errors.

Example:
    >>> r = run("jax_mpe/simple_spread", (), "same_step", (), 60)  # doctest: +SKIP
    >>> r.leaves["devices_4"]["obs"].shape                            # doctest: +SKIP
    (61, 4, 3, 18)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

K = 4  # the envs of every JaxMARL test (tests.helpers.jaxmarl_reference.K): shapes the persistent cache holds
SEED = 7
DEVICES = (1, 2, 4)
# Two things XLA:CPU (jaxlib 0.10) does make a batch's floats depend on its size or its split
# (docs/jax/inside_jit.md, "Scale out"), each turned off by a flag:
# - YNNPACK, which it hands its dots to, picks its kernels by the dot's size: one with FMA for
#   E envs, another without for E/4 (SMAX 3m's movement `rotation @ vec`: obs 1.3e-8 apart);
# - its algebraic simplifier turns ``x / broadcast(y)`` into ``x * broadcast(1 / y)`` in a
#   one-device program but not in the SPMD program of 2 or 4 devices (SMAX's relative positions
#   over the sight range: obs one float32 ulp apart, up to 6e-8).
SHAPE_FREE_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
SPLIT_FREE_FLAG = "--xla_disable_hlo_passes=algsimp"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class ShardRun:
    leaves: dict[str, dict[str, np.ndarray]]  # configuration -> leaf path -> (T + 1, E, ...) (seeds: (S, T + 1, E, ...))
    layout: dict[str, Any]
    errors: dict[str, str]


@functools.lru_cache(maxsize=None)
def run(env_id: str, kwargs: tuple, mode: str, options: tuple, steps: int, split_free: bool = True,
        timeout: float = 540) -> ShardRun:
    """One case in a process with 4 CPU devices (``kwargs``/``options``: sorted item tuples);
    ``split_free=False``: without `SPLIT_FREE_FLAG`, to measure what it changes."""
    from tests.helpers.jaxmarl_reference import EXACT_FLAG, NO_FMA_FLAG

    case = json.dumps({"env_id": env_id, "kwargs": dict(kwargs), "mode": mode, "options": dict(options),
                       "steps": steps})
    env = dict(os.environ)
    flags = [EXACT_FLAG, NO_FMA_FLAG, SHAPE_FREE_FLAG] + ([SPLIT_FREE_FLAG] if split_free else [])
    env["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=4"])
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, "-m", "tests.helpers.jax_shard_runs", out, case], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"the sharded rollouts failed ({done.returncode}):\n{done.stderr[-6000:]}")
        leaves = {}
        for name in os.listdir(out):
            if name.endswith(".npz"):
                with np.load(os.path.join(out, name)) as data:
                    leaves[name[:-4]] = {key: data[key] for key in data.files}
        with open(os.path.join(out, "layout.json")) as f:
            info = json.load(f)
    return ShardRun(leaves, info["layout"], info["errors"])


def _leaves(tree: Any) -> dict[str, np.ndarray]:
    import jax

    return {jax.tree_util.keystr(path): np.asarray(x) for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _main(out: str, case: dict) -> None:
    import jax
    import jax.numpy as jnp

    import marl_vec.jax as mvj

    assert len(jax.devices()) == 4, jax.devices()
    b = mvj.batch(case["env_id"], K, case["mode"], **case["options"], **case["kwargs"])
    steps = case["steps"]

    def rollout(env: Any, key: Any) -> Any:
        state, ts0 = env.reset(key)

        def one(carry: tuple, t: Any) -> tuple:
            state, ts = carry
            draw = jax.random.fold_in(jax.random.PRNGKey(SEED), t)
            if ts.avail_actions is None:
                actions = jax.random.uniform(draw, (K, b.spec.n_agents, *b.spec.action_shape))
            else:
                actions = jnp.argmax(jax.random.uniform(draw, ts.avail_actions.shape) * ts.avail_actions, axis=-1)
            state, ts = env.step(state, actions)
            return (state, ts), ts

        tss = jax.lax.scan(one, (state, ts0), jnp.arange(steps))[1]
        return jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]), ts0, tss)

    layout: dict[str, Any] = {}

    def save(name: str, tree: Any) -> None:
        leaf = tree.obs
        layout[name] = {"devices": len(leaf.sharding.device_set),
                        "block": list(leaf.addressable_shards[0].data.shape)}
        np.savez(os.path.join(out, f"{name}.npz"), **_leaves(tree))

    key = jax.random.PRNGKey(SEED)
    whole = jax.jit(functools.partial(rollout, b))
    save("whole", whole(key))
    for n in DEVICES:
        # jax.make_mesh's axes are Explicit; Mesh(...)'s are Auto: 2 devices take the other path.
        mesh = (jax.sharding.Mesh(np.asarray(jax.devices()[:n]), ("envs",)) if n == 2
                else jax.make_mesh((n,), ("envs",), devices=jax.devices()[:n]))
        save(f"devices_{n}", jax.jit(functools.partial(rollout, mvj.shard(b, mesh)))(key))
    # A population of 2 seeds, their keys num_envs apart (independent envs: marl_vec.jax.keys).
    keys = jnp.stack([jax.random.PRNGKey(SEED * K), jax.random.PRNGKey(SEED * K + K)])
    apart = [whole(k) for k in keys]
    save("seeds_apart", jax.tree.map(lambda *xs: jnp.stack(xs), *apart))
    # Whole seeds on devices instead: the unsharded batch, the keys split over a mesh axis of 2.
    seeds_mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:2]), ("seeds",))
    placed = jax.device_put(keys, jax.sharding.NamedSharding(seeds_mesh, jax.sharding.PartitionSpec("seeds")))
    save("seeds_vmap", jax.jit(jax.vmap(functools.partial(rollout, b)))(placed))
    sharded = mvj.shard(b, jax.make_mesh((4,), ("envs",)))
    save("seeds_vmap_4", jax.jit(jax.vmap(functools.partial(rollout, sharded)))(keys))

    if case["mode"] == "same_step" and not case["options"]:
        # Optimistic resets are per device: 1 reset per step for each device's 1 env is a reset
        # of its own for every env, so the episodes are same_step's, even where all end at once.
        optimistic = mvj.shard(mvj.batch(case["env_id"], K, resets_per_step=1, **case["kwargs"]),
                               jax.make_mesh((4,), ("envs",)))
        save("optimistic_4", jax.jit(functools.partial(rollout, optimistic))(key))
    errors = {}
    for name, call in {
        "three_devices": lambda: mvj.shard(b, jax.make_mesh((3,), ("envs",), devices=jax.devices()[:3])),
        "resets_per_step": lambda: mvj.shard(mvj.batch(case["env_id"], K, resets_per_step=2, **case["kwargs"]),
                                             jax.make_mesh((4,), ("envs",))),
        "two_axes": lambda: mvj.shard(b, jax.make_mesh((2, 2), ("seeds", "envs"))),
    }.items():
        try:
            call()
        except (ValueError, TypeError) as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
    # Two axes, the envs over one of them (replicated over the other).
    two = mvj.shard(b, jax.make_mesh((2, 2), ("seeds", "envs")), axis="envs")
    save("devices_2x2", jax.jit(functools.partial(rollout, two))(key))
    with open(os.path.join(out, "layout.json"), "w") as f:
        json.dump({"layout": layout, "errors": errors}, f)


if __name__ == "__main__":
    _main(sys.argv[1], json.loads(sys.argv[2]))

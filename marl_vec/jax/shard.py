"""`shard`: a functional batch split over the devices of a mesh, each device stepping its own envs.

One idea: scale out. ``shard(batch, mesh)`` returns a `Sharded` with the batch's pure
``reset(key)`` and ``step(state, actions)``, to call inside the trainer's ``jax.jit``
and ``lax.scan`` as the batch itself. Inside, ``jax.shard_map`` runs on each of the ``n``
devices of the mesh axis a batch of ``E / n`` envs (the same per-env kernel), and
device ``d`` holds envs ``d * E/n .. (d + 1) * E/n - 1``, whose keys are those of their
GLOBAL indices (``marl_vec.jax.keys``). An env's step reads only that env, so the
devices never talk, and 1, 2 or 4 devices play the same episodes as the unsharded
batch, leaf for leaf (tests/jax/test_shard.py, in a process with 4 CPU devices). On
the CPU that takes two XLA flags, set before JAX starts: without them XLA:CPU rounds
some floats differently by the batch's size (YNNPACK's dots) and by the split (its
algebraic simplifier), one ulp in SMAX's observations (docs/jax/inside_jit.md, "Scale out").

The leaves of ``state`` and ``ts`` come back as ``jax.Array``s split along E over the
axis (`Sharded.sharding`); actions may come in any layout (``jit`` moves them where the
envs are; computed from ``ts`` by a sharded policy, they already are).

A population: under ``jax.vmap`` over seeds (a trainer's ``vmap(train)``), each device
steps its slice of the envs of every seed, one block of (seeds, E/n) envs per device:
the seeds × envs population is one flat axis of envs, cut along E. Each seed's batch
plays what it plays alone.

Optimistic resets (``resets_per_step=k``) are per device: each device computes ``k``
resets for its own envs, and where at most ``k`` of a device's envs end at once the
episodes equal ``same_step``'s on any number of devices.

May import: jax, numpy, ``marl_vec.jax.{batch,keys,types}``.

Examples:
    >>> import jax
    >>> from marl_vec.jax.batch import batch
    >>> sb = shard(batch("jax_mpe/simple_spread", num_envs=4))   # every device of this process
    >>> state, ts = jax.jit(sb.reset)(jax.random.PRNGKey(0))
    >>> ts.obs.shape, sb.per_device * len(jax.devices()) == sb.num_envs
    ((4, 3, 18), True)
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from marl_vec.jax.batch import Batch
from marl_vec.jax.keys import env_keys, raw_key
from marl_vec.jax.types import BatchState, TimeStep

DEFAULT_AXIS = "envs"


class Sharded:
    """A `Batch` of E envs split over the ``n`` devices of ``mesh``'s ``axis``; made by `shard`.

    Attributes:
        batch: the whole batch (its ``num_envs``, ``offset``, mode and options).
        mesh: the ``jax.sharding.Mesh``.
        axis: the mesh axis the envs are split over (replicated over any other axis).
        per_device: E / n, the envs of one device.
        sharding: ``NamedSharding(mesh, PartitionSpec(axis))``: the layout of every leaf of
            ``state`` and ``ts`` (for ``jax.device_put`` of actions made outside jit).
        num_envs, spec, agents: the batch's.
    """

    def __init__(self, whole: Batch, mesh: Mesh, axis: str):
        n = int(mesh.shape[axis])
        self.batch, self.mesh, self.axis = whole, mesh, axis
        self.num_envs, self.spec, self.agents = whole.num_envs, whole.spec, whole.agents
        self.per_device = whole.num_envs // n
        # One device's batch: the same envs and options, E/n of them; its offset is set per
        # device inside shard_map (the device's index is known only there).
        self.local = Batch(whole.env_id, self.per_device, whole.autoreset, whole.time_limit, whole.gamma,
                           whole.resets_per_step, whole.offset, whole.kwargs)
        self.sharding = NamedSharding(mesh, PartitionSpec(axis))
        envs = PartitionSpec(axis)
        # check_vma=False: JaxMARL's own code (SMAX's lax.cond over a per-device value and a
        # constant) fails shard_map's check that both branches vary over the same axes; the
        # envs of a device never read another device's, so there is nothing for it to catch.
        self._reset = jax.shard_map(self._reset_shard, mesh=mesh, in_specs=PartitionSpec(), out_specs=envs,
                                    check_vma=False)
        self._step = jax.shard_map(self.local.step, mesh=mesh, in_specs=(envs, envs), out_specs=envs,
                                   check_vma=False)

    def __repr__(self) -> str:
        return f"marl_vec.jax.shard({self.batch!r}, mesh axis {self.axis!r} of {self.mesh.shape[self.axis]} devices)"

    def reset(self, key: Any) -> tuple[BatchState, TimeStep]:
        """The batch's ``reset(key)``: env ``i`` (global index) from ``env_keys(key, E, offset)[i]``, on its device."""
        return self._reset(raw_key(key))

    def step(self, state: BatchState, actions: Any) -> tuple[BatchState, TimeStep]:
        """The batch's ``step``; ``actions`` of the whole batch ((E, A) or (E, A, width)), checked when traced."""
        # The state as reset left it, unless the trainer moved it (e.g. device_put to one device).
        state = jax.tree.map(self._place, state)
        return self._step(state, self._place(self.batch._actions(actions)))

    def _place(self, x: Any) -> Any:
        """``x`` split along E over the axis, as shard_map takes it: on a mesh of Explicit axes
        (``jax.make_mesh``'s default) shard_map refuses another layout, so move it there."""
        if self.mesh.axis_types[self.mesh.axis_names.index(self.axis)] == AxisType.Explicit:
            return jax.reshard(x, self.sharding)
        return jax.lax.with_sharding_constraint(x, self.sharding)

    def _reset_shard(self, key: Any) -> tuple[BatchState, TimeStep]:
        first = self.batch.offset + jax.lax.axis_index(self.axis) * self.per_device
        return self.local.reset_envs(env_keys(key, self.per_device, first))


def shard(batch: Batch, mesh: Mesh | None = None, axis: str | None = None) -> Sharded:
    """``batch`` split along its env axis over the devices of ``mesh``'s ``axis`` (see the module doc).

    Args:
        batch: a `marl_vec.jax.batch`; its ``num_envs`` must be a multiple of the axis' devices.
        mesh: a ``jax.sharding.Mesh``; None: every device of this process, on one axis named ``envs``.
        axis: the mesh axis to split the envs over; None: the mesh's only axis (a mesh of several
            axes must name one; the envs are replicated over the others).

    Examples:
        >>> import jax
        >>> from jax.sharding import Mesh
        >>> from marl_vec.jax.batch import batch
        >>> mesh = Mesh(jax.devices()[:1], ("envs",))
        >>> shard(batch("jax_mpe/simple_spread", 4), mesh).per_device
        4
    """
    if not isinstance(batch, Batch):
        raise TypeError(f"marl_vec.jax.shard: batch is a {type(batch).__name__}; expected a marl_vec.jax.batch(...)")
    if mesh is None:
        mesh = Mesh(np.asarray(jax.devices()), (DEFAULT_AXIS,))
    if not isinstance(mesh, Mesh):
        raise TypeError(f"marl_vec.jax.shard: mesh is a {type(mesh).__name__}; expected a jax.sharding.Mesh "
                        "(e.g. jax.make_mesh((n,), ('envs',))) or None (every device)")
    names = tuple(mesh.axis_names)
    if axis is None:
        if len(names) != 1:
            raise ValueError(f"marl_vec.jax.shard: the mesh has axes {names}; name the one to split the envs "
                             "over with axis=")
        axis = names[0]
    if axis not in names:
        raise ValueError(f"marl_vec.jax.shard: axis={axis!r} is not an axis of the mesh; allowed: {names}")
    n = int(mesh.shape[axis])
    if batch.num_envs % n:
        raise ValueError(f"marl_vec.jax.shard: num_envs={batch.num_envs} does not split over the {n} devices of "
                         f"mesh axis {axis!r}; allowed: a multiple of {n}")
    per = batch.num_envs // n
    if batch.resets_per_step is not None and batch.resets_per_step > per:
        raise ValueError(f"marl_vec.jax.shard: resets_per_step={batch.resets_per_step} is per device, and a "
                         f"device holds {per} envs; allowed: 1 to {per}")
    return Sharded(batch, mesh, axis)

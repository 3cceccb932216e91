"""Faces of the functional batch for the JAX school's other libraries, one file each.

- ``jumanji``: Jumanji's own ``jumanji.types.TimeStep`` with Mava's observation
  (`marl_vec.jax.faces.jumanji.jumanji_env`); it imports ``jumanji`` (the
  ``jumanji`` extra), so this package does not import it: ``import
  marl_vec.jax.faces.jumanji`` does.
- ``evorl``: EvoRL's ``EnvState`` (`marl_vec.jax.faces.evorl.evorl_env`), mirrored by
  hand from EvoRL's source (EvoRL is not installable from a package registry).

The JaxMARL look-alike is `marl_vec.jax.make`. Each face wraps a `marl_vec.jax.batch`:
the numbers are the batch's, the face only renames and reshapes them.

May import: nothing (the faces import their own dependencies).
"""

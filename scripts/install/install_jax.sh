#!/usr/bin/env bash
# Installs the JaxMARL family's packages (called by install_test_deps.sh after
# `pip install -e ".[test]"`; by hand: `pip install 'marl_vec[jax]'` first, which brings
# jax (CPU wheels), chex, jaxtyping and the few others the envs import).
#
# Why --no-deps: jaxmarl 0.2.0 depends on gymnax, which pins gymnasium<1.4, and we run
# on gymnasium 1.4 (a plain install moves it down to 1.3). The envs never import gymnax
# nor gymnasium (tests/families/test_jaxmarl_packaging.py checks it); gymnax is installed, without
# its pins, only so that jaxmarl's declared dependency is there. flax's declared
# dependencies (orbax-checkpoint, tensorstore, optax, ~90 MB) are not imported either.
# About 25 s from a local index and ~420 MB on disk (summed package sizes; jaxlib alone is 350 MB).
# Idempotent; one line per step, pip's own output only when it fails.
set -euo pipefail
PY="${PYTHON:-python}"
say() { echo "install_jax.sh: $*"; }
if ! "$PY" -c "import jax" >/dev/null 2>&1; then
    say "jax (CPU) and what the envs import"
    "$PY" -m pip install -q "jax>=0.6,<0.12" chex "jaxtyping>=0.2.28" msgpack rich PyYAML matplotlib pillow
fi
say "jaxmarl 0.2.0, gymnax 1.0.1 and flax without their declared dependencies (gymnasium is not moved)"
"$PY" -m pip install -q --no-deps "jaxmarl==0.2.0" "gymnax==1.0.1" "flax>=0.10"
"$PY" -c "import marl_vec.envs.jaxmarl.catalog as c; c.import_jaxmarl()"
say "jaxmarl imports"
# MABrax: brax 0.14.2's declared dependencies would move mujoco to 4.0 (we keep <3.6, which
# gymnasium-robotics' MaMuJoCo uses) and bring flask, orbax, tensorstore, tensorboardX; the envs
# import brax, mujoco.mjx (mujoco-mjx, same version as mujoco), trimesh and jaxopt.
MJ="$("$PY" -c "import mujoco; print(mujoco.__version__)" 2>/dev/null || true)"
if [ -n "$MJ" ]; then
    say "brax 0.14.2 and mujoco-mjx $MJ without their declared dependencies (mujoco, jax, numpy not moved)"
    "$PY" -m pip install -q --no-deps "brax==0.14.2" "mujoco-mjx==$MJ" "trimesh" "jaxopt"
    "$PY" -c "import jaxmarl; jaxmarl.make('hopper_3x1')" >/dev/null
    say "MABrax imports"
else
    say "no mujoco: MABrax (extra mabrax) left out"
fi

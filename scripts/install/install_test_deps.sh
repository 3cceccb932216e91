#!/usr/bin/env bash
# Installs everything the test suite needs into the active Python environment:
# marl_vec with its test extra, then the engines that do not come from pip alone
# (Google Research Football's compiled engine, pysc2 made to work on Python 3.11, Melting Pot
# built offline; not the StarCraft II game). Idempotent; one line per step, a step's own output
# only when it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$SECONDS
say() { echo "install_test_deps.sh: $* ($((SECONDS - START)) s so far)"; }
say "pip, setuptools, wheel"
python -m pip install -q -U pip setuptools wheel
say "marl_vec with its test extra: every env family's Python packages, StarCraft II's Python packages, Ray, PyTorch (CPU), pytest"
python -m pip install -q -e ".[test]"
for extra_installer in scripts/install/install_football.sh scripts/install/install_sc2.sh scripts/install/install_jax.sh \
        scripts/install/install_meltingpot.sh; do
    if [ -f "$extra_installer" ]; then
        say "$extra_installer"
        bash "$extra_installer"
    fi
done
say "done"

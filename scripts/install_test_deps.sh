#!/usr/bin/env bash
# Installs everything the test suite needs into the active Python environment:
# marl_vec with its test extra, then the engines that do not come from pip alone.
# Idempotent; quiet unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -U pip setuptools wheel
python -m pip install -q -e ".[test]"
for extra_installer in scripts/install_football.sh scripts/install_sc2.sh; do
    if [ -f "$extra_installer" ]; then
        bash "$extra_installer"
    fi
done

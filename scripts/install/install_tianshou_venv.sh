#!/usr/bin/env bash
# Builds .venv-tianshou in the repo root for marl_vec.compat.tianshou and its proof
# tests (tests/faces/test_tianshou*.py): Tianshou 2.0.1 pins deepdiff<8, while the
# main venv's test extra (pysc2's needs) has deepdiff 9, so it gets a venv of its own
# (override the location: TIANSHOU_VENV=path).
# torch==2.13.0 goes in first and stays pinned by a constraints file: it is the CPU
# build this machine has on disk; letting tianshou pick torch downloads a multi-GB GPU build.
# Idempotent: an existing venv is reused (pip skips what is installed). Then:
#   .venv-tianshou/bin/python -m pytest tests/faces/test_tianshou*.py
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${TIANSHOU_VENV:-.venv-tianshou}"
# The base interpreter, even when another venv is active.
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" > "$CONSTRAINTS"
"$VENV/bin/python" -m pip install -q -U pip setuptools wheel
"$VENV/bin/python" -m pip install -q torch==2.13.0
# marl_vec with its tianshou extra; lbf and rware for the docs pages' examples, run there too.
"$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e ".[tianshou,lbf,rware]" "pytest>=7" "pytest-timeout>=2.1"
"$VENV/bin/python" -c "import torch, tianshou, gymnasium, marl_vec; print('tianshou venv: tianshou', tianshou.__version__, 'torch', torch.__version__, 'gymnasium', gymnasium.__version__)"

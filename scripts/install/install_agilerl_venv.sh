#!/usr/bin/env bash
# Builds .venv-agilerl in the repo root: AgileRL 2.58 pins pettingzoo<1.27 and
# tensordict==0.13.0, which clash with the main venv, so marl_vec.compat.AgileRLVecEnv
# and its proof test (tests/faces/test_agilerl.py) run in a venv of their own.
# torch==2.13.0 goes in first and stays pinned by a constraints file: it is the CPU
# build this machine has on disk; letting agilerl pick torch downloads a multi-GB GPU build.
# Idempotent: an existing .venv-agilerl is reused (pip skips what is installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-agilerl
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" > "$CONSTRAINTS"
"$VENV/bin/pip" install -q torch==2.13.0
# marl_vec with its agilerl extra (agilerl, and the peft/transformers it imports undeclared).
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" -e ".[agilerl]" pytest pytest-timeout
"$VENV/bin/python" -c "import torch, agilerl, pettingzoo, mpe2, marl_vec; print('agilerl venv: torch', torch.__version__, 'pettingzoo', pettingzoo.__version__)"

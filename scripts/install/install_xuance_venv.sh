#!/usr/bin/env bash
# Builds the virtual environment for XuanCe (marl_vec.compat.XuanCeVecEnv and its
# tests): XuanCe 1.4.4 pins numpy<2 and gymnasium<1.3, so it cannot share the main
# environment. Default location .venv-xuance (override: XUANCE_VENV=path).
# XUANCE_FOOTBALL=1 adds Google Research Football (after scripts/install/install_football.sh).
# Idempotent; quiet unless something fails. Then:
#   .venv-xuance/bin/python -m pytest tests/faces/test_xuance.py tests/faces/test_xuance_face.py
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${XUANCE_VENV:-.venv-xuance}"
# The base interpreter, even when another venv is active (a venv's python would do too).
python_bin="$(command -v python3)"
[ -x "$venv/bin/python" ] || "$python_bin" -m venv "$venv"
"$venv/bin/python" -m pip install -q -U pip setuptools wheel
# torch pinned to the CPU build on disk: unpinned, XuanCe would pull a multi-GB GPU build.
"$venv/bin/python" -m pip install -q -e ".[xuance]" "torch==2.13.0" "pytest>=7" "pytest-timeout>=2.1"
if [ "${XUANCE_FOOTBALL:-0}" = 1 ]; then
    # Google Research Football in this venv too (for XuanCe on Football through marl_vec).
    # Its engine compiles for about 6 minutes; scripts/install/install_football.sh builds it for the
    # main venv, and pip's wheel cache then holds the wheel, which this venv (same Python)
    # reuses in seconds. Runtime needs as in the football extra; cv2 comes with XuanCe's
    # opencv-python (opencv-python-headless would pull numpy 2).
    if ! "$venv/bin/python" -m pip cache list gfootball 2>/dev/null | grep -q gfootball; then
        echo "no gfootball wheel in pip's cache: run bash scripts/install/install_football.sh first" >&2
        exit 1
    fi
    "$venv/bin/python" -m pip install -q --no-deps gfootball==2.10.2
    "$venv/bin/python" -m pip install -q "gym==0.25.2" six scipy absl-py "psutil>=5.9" "numpy<2"
fi

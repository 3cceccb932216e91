#!/usr/bin/env bash
# Installs Google Research Football (gfootball 2.10.2, engine compiled from
# source) into the ACTIVE Python environment.
#
#   python3 -m venv .venv && . .venv/bin/activate
#   bash scripts/install/install_football.sh          # then: pip install -e ".[football]"
#
# Debian 12, as root (or with sudo). Prints one line per step; a step's own
# output goes to a log that is shown only when the step fails (then the script
# exits non-zero).
#
# Time: compiling the engine takes about 5 minutes of wall time on an idle
# 2-core machine (about 8 CPU-minutes; much longer when other jobs load the
# cores). gfootball's build already compiles with every core: its
# build_game_engine.sh runs `make -j N`, N = min(cores, (free GB - 1) / 0.5), so
# MAKEFLAGS would not change it. What saves the time is not compiling again:
#  - an identical install (gfootball 2.10.2 whose engine imports) returns at once;
#  - the first build is kept as a wheel in $MARL_VEC_WHEEL_CACHE (default
#    ~/.cache/marl_vec/wheels), named by gfootball's version and the Python tag
#    (gfootball-2.10.2-cp311-cp311-linux_x86_64.whl); a fresh venv of the same
#    Python on this machine installs from it in seconds. A cached wheel that does
#    not import (e.g. the system libraries changed) is deleted and rebuilt.
set -euo pipefail

GFOOTBALL_VERSION=2.10.2
PY="$(command -v python || command -v python3)"
# gfootball's build runs a bare `python3 -c 'import psutil'`: the active
# interpreter must be the first python3 on PATH, so its psutil is seen.
PATH="$(dirname "$PY"):$PATH"
export PATH
WHEEL_CACHE="${MARL_VEC_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/marl_vec/wheels}"
START=$SECONDS

say() { echo "install_football.sh: $*"; }

engine_imports() {
    "$PY" - "$GFOOTBALL_VERSION" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import version
import gfootball.env, gfootball_engine, gym, six
sys.exit(version("gfootball") != sys.argv[1])
EOF
}

if engine_imports; then
    say "gfootball $GFOOTBALL_VERSION is installed and its engine imports: nothing to do"
    exit 0
fi

LOG="$(mktemp -t install_football.XXXXXX.log)"
STEP=0
run() {  # run a command quietly; on failure show what it said
    if ! "$@" >>"$LOG" 2>&1; then
        say "failed: $*" >&2
        tail -n 80 "$LOG" >&2
        say "full log in $LOG" >&2
        exit 1
    fi
}
step() { STEP=$((STEP + 1)); say "[$STEP] $* ($((SECONDS - START)) s so far)"; }

APT_PACKAGES=(build-essential cmake libgl1-mesa-dev libegl-dev libsdl2-dev
    libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev libboost-python-dev
    libboost-thread-dev libboost-system-dev libboost-filesystem-dev
    libgl1-mesa-dri)  # Mesa's software driver: render() draws off-screen through EGL without a GPU
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    step "apt packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    # Wait for the dpkg lock instead of failing when another apt run holds it.
    run $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
    run env DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 \
        install -y -q --no-install-recommends "${missing[@]}"
else
    step "apt packages: all present"
fi

# gfootball's runtime needs (keep in step with setup.cfg's `football` extra):
# six is used but undeclared; gym 0.26 changed reset() and 0.21 no longer
# builds; any OpenCV will do, and the headless one is what the atari extra uses.
step "pip packages gfootball needs to build and run (gym 0.25.2, six, scipy, absl-py, psutil)"
run "$PY" -m pip install -q -U pip setuptools wheel psutil
run "$PY" -m pip install -q "gym==0.25.2" six scipy absl-py
"$PY" -c 'import cv2' >/dev/null 2>&1 || run "$PY" -m pip install -q opencv-python-headless

PY_TAG="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
mkdir -p "$WHEEL_CACHE"
find_wheel() { ls "$WHEEL_CACHE"/gfootball-"$GFOOTBALL_VERSION"-"$PY_TAG"-"$PY_TAG"-*.whl 2>/dev/null | head -n 1 || true; }
WHEEL="$(find_wheel)"
BUILT_NOW=""
if [ -z "$WHEEL" ]; then
    BUILT_NOW=1
    step "compiling gfootball $GFOOTBALL_VERSION's engine into a wheel (about 5 minutes on 2 idle cores; log: $LOG)"
    # --no-build-isolation: the build imports psutil from this environment.
    # --no-deps: gfootball's own list would add pygame (only for its keyboard
    # player), whose files clash with pygame-ce that mpe2 installs, and
    # opencv-python next to opencv-python-headless.
    BUILD_DIR="$(mktemp -d -t gfootball_wheel.XXXXXX)"
    run "$PY" -m pip wheel -q --no-build-isolation --no-deps "gfootball==$GFOOTBALL_VERSION" -w "$BUILD_DIR"
    mv "$BUILD_DIR"/gfootball-*.whl "$WHEEL_CACHE"/
    rmdir "$BUILD_DIR"
    WHEEL="$(find_wheel)"
    [ -n "$WHEEL" ] || { say "the build made no gfootball-$GFOOTBALL_VERSION-$PY_TAG wheel; log: $LOG" >&2; exit 1; }
else
    step "using the wheel built before: $WHEEL"
fi

step "installing $(basename "$WHEEL")"
run "$PY" -m pip install -q --no-deps --force-reinstall "$WHEEL"
if ! engine_imports; then
    rm -f "$WHEEL"
    if [ -n "$BUILT_NOW" ]; then
        say "gfootball's engine does not import after the build; log: $LOG" >&2
        exit 1
    fi
    say "the cached wheel's engine does not import here (system libraries changed?): deleted; building again" >&2
    exec bash "$0" "$@"
fi
say "done in $((SECONDS - START)) s: gfootball $GFOOTBALL_VERSION's engine imports"
rm -f "$LOG"

#!/usr/bin/env bash
# Installs Google Research Football (gfootball 2.10.2, engine compiled from
# source, about 5 minutes on 2 cores) into the ACTIVE Python environment.
#
#   python3 -m venv .venv && . .venv/bin/activate
#   bash scripts/install_football.sh          # then: pip install -e ".[football]"
#
# Debian 12, as root (or with sudo). Idempotent: returns at once when gfootball
# and its engine already import. Quiet unless a step fails; then the step's log
# is printed and the script exits non-zero.
set -euo pipefail

PY="$(command -v python || command -v python3)"
# gfootball's build runs a bare `python3 -c 'import psutil'`: the active
# interpreter must be the first python3 on PATH, so its psutil is seen.
PATH="$(dirname "$PY"):$PATH"
export PATH

if "$PY" -c 'import gfootball.env, gfootball_engine, gym, six' >/dev/null 2>&1; then
    exit 0
fi

LOG="$(mktemp -t install_football.XXXXXX.log)"
run() {  # run a step quietly; on failure show what it said
    if ! "$@" >>"$LOG" 2>&1; then
        echo "install_football.sh: failed: $*" >&2
        tail -n 80 "$LOG" >&2
        echo "install_football.sh: full log in $LOG" >&2
        exit 1
    fi
}

APT_PACKAGES=(build-essential cmake libgl1-mesa-dev libegl-dev libsdl2-dev
    libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev libboost-python-dev
    libboost-thread-dev libboost-system-dev libboost-filesystem-dev
    libgl1-mesa-dri)  # Mesa's software driver: render() draws off-screen through EGL without a GPU
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    # Wait for the dpkg lock instead of failing when another apt run holds it.
    run $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
    run env DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 \
        install -y -q --no-install-recommends "${missing[@]}"
fi

# gfootball's runtime needs (keep in step with setup.cfg's `football` extra):
# six is used but undeclared; gym 0.26 changed reset() and 0.21 no longer
# builds; any OpenCV will do, and the headless one is what the atari extra uses.
run "$PY" -m pip install -q -U pip setuptools wheel psutil
run "$PY" -m pip install -q "gym==0.25.2" six scipy absl-py
"$PY" -c 'import cv2' >/dev/null 2>&1 || run "$PY" -m pip install -q opencv-python-headless
# --no-build-isolation: the build imports psutil from this environment.
# --no-deps: gfootball's own list would add pygame (only for its keyboard
# player), whose files clash with pygame-ce that mpe2 installs, and opencv-python
# next to opencv-python-headless.
run "$PY" -m pip install -q --no-build-isolation --no-deps gfootball==2.10.2
run "$PY" -c 'import gfootball.env, gfootball_engine'
rm -f "$LOG"

#!/usr/bin/env bash
# Builds .venv-pymarl in the repo root for marl_vec.compat.pymarl (the PyMARL-school
# faces) and its proof tests (tests/faces/test_pymarl*.py), over pymarlzooplus 1.1.0:
# it pins pettingzoo==1.24.3 and numpy<2 (marl_vec's floor is pettingzoo 1.25, the main
# venv has numpy 2), so it gets a venv of its own (override the location: PYMARL_VENV=path).
#
# A plain `pip install pymarlzooplus` pulls a GPU torch, torchvision, transformers, wandb,
# albumentations, ipython and all of pettingzoo's games: pymarlzooplus goes in with
# --no-deps, and only what its trainer (run.py, runners, QMIX/MAPPO learners, the gymma
# LBF/MPE envs, sacred) imports is installed beside it. A constraints file keeps
# torch==2.13.0 (the CPU build on this machine's disk), numpy<2, pettingzoo==1.24.3 and
# setuptools<81 (sacred imports pkg_resources, gone in setuptools 81).
# marl_vec goes in editable with --no-deps (its pettingzoo>=1.25 floor would clash),
# then its own needs. MPE here is pettingzoo 1.24.3's own pettingzoo.mpe (with pygame): mpe2 1.1.1
# declares pettingzoo>=1.24.3 but imports AgentSelector, which only pettingzoo 1.25 has.
# pysc2 (for the StarCraft II family's mock game) goes in as scripts/install/install_sc2.sh does.
# Idempotent: an existing venv is reused (pip skips what is installed). Then:
#   .venv-pymarl/bin/python -m pytest tests/faces/test_pymarl*.py
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${PYMARL_VENV:-.venv-pymarl}"
# The base interpreter, even when another venv is active.
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf '%s\n' "torch==2.13.0" "numpy<2" "pettingzoo==1.24.3" "setuptools<81" \
    "opencv-python-headless<4.11" > "$CONSTRAINTS"
pip_install() { "$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" "$@"; }
pip_install -U pip "setuptools<81" wheel
pip_install torch==2.13.0
pip_install --no-deps pymarlzooplus==1.1.0
# What pymarlzooplus's trainer imports (sacred, rich, yaml, pandas/matplotlib for its
# plots, cv2 and pettingzoo for its env wrappers' imports, scikit-learn for its episodic memory,
# seaborn for its MPE scenarios, tensorboard-logger),
# and the LBF/RWARE packages its gymma envs make (pyglet 1.5 as it pins).
pip_install "numpy<2" gymnasium "pettingzoo==1.24.3" sacred "setuptools<81" rich PyYAML pandas \
    matplotlib seaborn scikit-learn scipy six tqdm cloudpickle "opencv-python-headless<4.11" tensorboard-logger \
    "pyglet==1.5.27" networkx pygame "lbforaging==2.0.0" "rware==2.0.0"
# marl_vec itself (its pettingzoo>=1.25 floor is the clash: --no-deps), then its needs.
pip_install --no-deps -e .
pip_install "gymnasium>=1.0" "PyYAML>=6.0" "pydantic>=2.5" "tqdm>=4.60" \
    "pytest>=7" "pytest-timeout>=2.1" psutil
# The StarCraft II family on pysc2's mock game (docs/faces/pymarl.md's 3m example; the game
# itself cannot be installed here): the sc2 extra's packages, as setup.cfg lists them (not
# `.[sc2]`: that would bring marl_vec's pettingzoo floor), then pysc2 --no-deps by install_sc2.sh.
pip_install "pys2clientprotocol>=1.0.2" "absl-py>=0.1" deepdiff dm-env-rpc mock mpyq "portpicker>=1.2" \
    s2protocol sk-video websocket-client requests typing-extensions
PIP_CONSTRAINT="$CONSTRAINTS" PYTHON="$VENV/bin/python" bash scripts/install/install_sc2.sh
"$VENV/bin/python" -c "import torch, numpy, pettingzoo, pymarlzooplus.run, marl_vec, pettingzoo.mpe, lbforaging; \
print('pymarl venv: torch', torch.__version__, 'numpy', numpy.__version__, 'pettingzoo', pettingzoo.__version__)"

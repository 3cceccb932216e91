#!/usr/bin/env bash
# Installs DeepMind's Melting Pot substrates (dm-meltingpot 2.4.1 on dmlab2d 1.0.2) into the
# ACTIVE Python environment, offline from the registries only (issue 36). One line per step;
# idempotent (returns at once when dm-meltingpot 2.4.1 is installed and its substrates import).
#
#   python3 -m venv .venv && . .venv/bin/activate
#   pip install -e ".[meltingpot]" && bash scripts/install/install_meltingpot.sh
#
# dm-meltingpot's sdist downloads an assets archive (the bots' saved models) at build time from
# outside the registries; its setup.py skips that when <tempdir>/meltingpot-assets-2.3.0.tar.gz
# exists. An empty archive holding an assets/ folder lets it build; substrates need no assets,
# scenarios (substrate + bots) do and cannot run here.
# --no-deps: the substrates' own needs (dmlab2d, reactivex, chex, dm-env, dm-tree, immutabledict,
# ml-collections, networkx) come with the `meltingpot` extra; its other declared needs are for
# bots, evaluation videos and human play: tensorflow (1.3 GB), opencv-python, pandas, pygame-ce.
# marl_vec imports meltingpot's substrate modules without the package's __init__ (which imports
# the bots and so tensorflow): see marl_vec/envs/meltingpot.py.
# Measured on the main venv (2 cores, warm pip cache): about 4 s.
set -euo pipefail
PY="$(command -v python || command -v python3)"
START=$SECONDS
say() { echo "install_meltingpot.sh: $* ($((SECONDS - START)) s so far)"; }
CHECK="from importlib.metadata import version as v; assert v('dm-meltingpot') == '2.4.1'
import importlib.util, sys  # the substrates without meltingpot/__init__.py (bots, tensorflow), as marl_vec does
sys.modules['meltingpot'] = importlib.util.module_from_spec(importlib.util.find_spec('meltingpot'))
from meltingpot import substrate; assert len(substrate.SUBSTRATES) == 49"
if "$PY" -c "$CHECK" >/dev/null 2>&1; then
    say "dm-meltingpot 2.4.1 is installed and its 49 substrates import: nothing to do"; exit 0
fi
say "the substrates' own needs: dmlab2d 1.0.2, reactivex, chex, dm-env, dm-tree, immutabledict, ml-collections, networkx"
"$PY" -m pip install -q dmlab2d==1.0.2 reactivex chex dm-env dm-tree immutabledict ml-collections networkx absl-py
TMP="$("$PY" -c 'import tempfile; print(tempfile.gettempdir())')"
ARCHIVE="$TMP/meltingpot-assets-2.3.0.tar.gz"
say "an empty assets archive at $ARCHIVE (the bots' models are not on the registries; substrates need none)"
[ -s "$ARCHIVE" ] || { D="$(mktemp -d)"; mkdir -p "$D/assets"; tar czf "$ARCHIVE" -C "$D" assets; rm -rf "$D"; }
say "dm-meltingpot 2.4.1 (--no-deps: tensorflow, opencv, pandas and pygame-ce serve bots and videos only)"
"$PY" -m pip install -q --no-deps dm-meltingpot==2.4.1
"$PY" -c "$CHECK"
say "done: the 49 substrates import"

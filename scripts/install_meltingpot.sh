#!/usr/bin/env bash
# Installs DeepMind's Melting Pot (dm-meltingpot 2.4.1 on dmlab2d 1.0.2) into the ACTIVE Python
# environment, offline from the registries only (issue 36). One line per step; idempotent.
#
# dm-meltingpot's sdist downloads an assets archive (the bots' saved models) at build time from
# outside the registries; its setup.py skips that when <tempdir>/meltingpot-assets-2.3.0.tar.gz
# exists. An empty archive holding an assets/ folder lets it build; substrates need no assets,
# scenarios (substrate + bots) do and cannot run here.
# `import meltingpot` imports tensorflow (meltingpot/__init__ -> bot -> saved_model_policy), so
# tensorflow-cpu is installed too: 2.21.0 moves none of numpy 2.4.6 / protobuf 7.36.2 / ml_dtypes
# (checked with pip --dry-run on the main venv). Measured on the main venv, warm pip cache:
# 3 s (dmlab2d + dm-meltingpot + reactivex), 34 s (tensorflow-cpu + pandas); tensorflow is 1.3 GB.
# `from meltingpot import substrate` then takes about 9 s (tensorflow's import).
set -euo pipefail
PY="$(command -v python || command -v python3)"
say() { echo "install_meltingpot.sh: $*"; }
if "$PY" -c "from importlib.metadata import version as v; assert v('dm-meltingpot') == '2.4.1'; import dmlab2d, reactivex, tensorflow, pandas, ml_collections, immutabledict, chex" >/dev/null 2>&1; then
    say "dm-meltingpot 2.4.1 already installed"; exit 0
fi
TMP="$("$PY" -c 'import tempfile; print(tempfile.gettempdir())')"
ARCHIVE="$TMP/meltingpot-assets-2.3.0.tar.gz"
say "empty assets archive at $ARCHIVE (substrates need no assets)"
[ -s "$ARCHIVE" ] || { D="$(mktemp -d)"; mkdir -p "$D/assets"; tar czf "$ARCHIVE" -C "$D" assets; rm -rf "$D"; }
say "dmlab2d 1.0.2, reactivex, pandas, ml_collections, immutabledict, chex, tensorflow-cpu 2.21.0"
"$PY" -m pip install -q dmlab2d==1.0.2 reactivex pandas ml_collections immutabledict chex tensorflow-cpu==2.21.0
say "dm-meltingpot 2.4.1 (--no-deps: its other deps are the ones above; opencv is for bots only)"
"$PY" -m pip install -q --no-deps dm-meltingpot==2.4.1
"$PY" -c "from meltingpot import substrate; assert len(substrate.SUBSTRATES) == 49"
say "done: from meltingpot import substrate works (49 substrates)"

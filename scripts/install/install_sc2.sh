#!/usr/bin/env bash
# Installs pysc2 4.0.0 in a working state on Python 3.11 (called by
# install_test_deps.sh after `pip install -e ".[test]"`; by hand: first
# `pip install 'marl_vec[sc2]'`, which brings pysc2's other dependencies).
#
# Why --no-deps: pysc2 depends on `s2clientprotocol`, whose generated _pb2 files
# only import with protobuf<=3.20, and pinning protobuf that low breaks Ray (and
# other protobuf users). `pys2clientprotocol` (declared in the sc2 extra) ships
# the same `s2clientprotocol` modules built for protobuf 6-7, so pysc2 is
# installed without its declared dependencies. The random.shuffle shim pysc2
# needs on Python 3.11 is applied at import time by marl_vec.envs.sc2_compat.
# Idempotent; one line per step, pip's own output only when it fails.
set -euo pipefail
PY="${PYTHON:-python}"
say() { echo "install_sc2.sh: $*"; }
if "$PY" -m pip show -q s2clientprotocol >/dev/null 2>&1; then
    say "replacing s2clientprotocol (protobuf<=3.20 only) with pys2clientprotocol"
    # Its files share the s2clientprotocol/ folder with pys2clientprotocol.
    "$PY" -m pip uninstall -q -y s2clientprotocol
    "$PY" -m pip install -q --force-reinstall --no-deps "pys2clientprotocol>=1.0.2"
fi
if ! "$PY" -m pip show -q pys2clientprotocol >/dev/null 2>&1; then
    say "pys2clientprotocol"
    "$PY" -m pip install -q "pys2clientprotocol>=1.0.2"
fi
say "pysc2 4.0.0 without its declared dependencies (the sc2 extra brings the others; the game is not installed)"
"$PY" -m pip install -q --no-deps "pysc2==4.0.0"
"$PY" -c "from marl_vec.envs.sc2_compat import import_pysc2; import_pysc2()"
say "pysc2 imports"

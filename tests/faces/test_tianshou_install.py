"""Without tianshou, the Tianshou face fails at import naming the extra and its venv script
(runs in any venv: tianshou is made unimportable in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
sys.modules["tianshou"] = None  # its import raises ImportError
from marl_vec.envs.extras import MissingExtraError
try:
    import marl_vec.compat.tianshou
except MissingExtraError as exc:
    print("MissingExtraError:", exc)
import marl_vec.compat
try:
    marl_vec.compat.TianshouVectorEnv
except MissingExtraError as exc:
    print("lazy name:", type(exc).__name__)
"""


def test_missing_tianshou_names_the_extra_and_the_venv_script():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first.startswith("MissingExtraError: tianshou is needed for marl_vec.compat.tianshou")
    assert "pip install 'marl_vec[tianshou]'" in first and "scripts/install/install_tianshou_venv.sh" in first
    assert second == "lazy name: MissingExtraError"

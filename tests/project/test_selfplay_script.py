"""scripts/train/selfplay_connect4.py (named in docs/families/turn_based.md) without torch or
matplotlib: one line naming the extra that installs them, status 2, no traceback, before
any game is played."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "train" / "selfplay_connect4.py"


def _run_without(module: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # None in sys.modules makes `import module` raise ModuleNotFoundError, as in a venv without it.
    code = (f"import runpy, sys; sys.modules[{module!r}] = None; sys.argv = [{str(SCRIPT)!r}, '--minutes', '0.01']; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("module, what", [("torch", "its policy (torch)"), ("matplotlib", "its plot (matplotlib)")])
def test_a_missing_extra_is_one_line_naming_it(module, what, tmp_path):
    out = _run_without(module, tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.splitlines() == [
        f"selfplay_connect4.py: {module} is needed for {what} but cannot be imported "
        f"(import of {module} halted; None in sys.modules); "
        "install it with: pip install 'marl_vec[pettingzoo,classic,examples]'"
    ], out.stderr
    assert out.stdout == "" and not list(tmp_path.iterdir())  # nothing ran, nothing written

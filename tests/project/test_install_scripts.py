"""The install scripts: valid bash, and install_football.sh's fast path when gfootball is installed.

The full install (apt, pip, compiling gfootball's engine) is what `.ci/run` does in a
fresh virtual environment; here only what is cheap is checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "install"


@pytest.mark.parametrize("script", sorted(SCRIPTS.parent.rglob("*.sh")), ids=lambda p: str(p.relative_to(SCRIPTS.parent)))
def test_script_is_valid_bash(script: Path):
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_install_football_returns_at_once_when_the_same_build_is_installed(tmp_path):
    try:
        installed = metadata.version("gfootball")
        import gfootball_engine  # noqa: F401
    except (metadata.PackageNotFoundError, ImportError):
        pytest.skip("gfootball is not installed here")
    if installed != "2.10.2":
        pytest.skip(f"gfootball {installed} is installed, not the 2.10.2 the script installs")
    # The active interpreter first on PATH, as after `. .venv/bin/activate`; an empty wheel cache.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MARL_VEC_WHEEL_CACHE": str(tmp_path / "wheels")}
    start = time.monotonic()
    out = subprocess.run(["bash", str(SCRIPTS / "install_football.sh")], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "install_football.sh: gfootball 2.10.2 is installed and its engine imports: nothing to do\n"
    assert out.stderr == ""
    assert time.monotonic() - start < 60  # it imported, and neither pip nor a compiler ran
    assert not (tmp_path / "wheels").exists()


def test_install_meltingpot_returns_at_once_when_installed():
    try:
        installed = metadata.version("dm-meltingpot")
    except metadata.PackageNotFoundError:
        pytest.skip("dm-meltingpot is not installed here")
    if installed != "2.4.1":
        pytest.skip(f"dm-meltingpot {installed} is installed, not the 2.4.1 the script installs")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(SCRIPTS / "install_meltingpot.sh")], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("install_meltingpot.sh: dm-meltingpot 2.4.1 is installed and its 49 substrates "
                                 "import: nothing to do (")
    assert out.stderr == ""

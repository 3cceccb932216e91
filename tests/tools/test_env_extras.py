"""`marl-vec list`'s claims about which envs need which extra, checked by importing them.

Each row of marl_vec.tools.env_extras.NEEDS says which modules an env needs beyond the
core install. In a fresh interpreter with those modules made unimportable
(``sys.modules[name] = None``), making the row's example env must fail with an
ImportError; with every extra's modules unimportable, the core rows' envs must
still make; and with everything installed here, every row's env makes (the
StarCraft II row up to the missing game).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from marl_vec.tools.env_extras import NEEDS, EnvNeeds, needs_for, sc2_path

ROOT = Path(__file__).resolve().parents[2]

MAKE = """
import sys
for name in sys.argv[1].split(","):
    if name:
        sys.modules[name] = None  # import of it raises ImportError
from marl_vec.envs.registry import make_env
for spec in sys.argv[2:]:
    family, env_id = spec.split("=", 1)
    try:
        make_env(family, env_id).close()
        if family == "starcraft2":  # the adapter imports pysc2 when it first launches the game
            import marl_vec.envs.sc2_compat
            marl_vec.envs.sc2_compat.import_pysc2()
        print(family, env_id, "made")
    except ImportError as exc:
        print(family, env_id, "ImportError", exc)
    except Exception as exc:
        print(family, env_id, type(exc).__name__)
"""

EXTRA_ROWS = [n for n in NEEDS if n.extra]
CORE_ROWS = [n for n in NEEDS if not n.extra]
# Modules only the extras install (and other heavy optional ones): none is needed by a core row.
EXTRA_MODULES = sorted({m for n in EXTRA_ROWS for m in n.modules} | {"ray", "torch", "cv2"})

def _make(blocked: list[str], rows: list[EnvNeeds], **env: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", MAKE, ",".join(blocked), *(f"{n.family}={n.example}" for n in rows)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()

def test_core_rows_make_without_any_extra():
    assert _make(EXTRA_MODULES, CORE_ROWS) == [f"{n.family} {n.example} made" for n in CORE_ROWS]

@pytest.mark.parametrize("row", EXTRA_ROWS, ids=[n.ids for n in EXTRA_ROWS])
def test_extra_rows_fail_without_their_modules(row: EnvNeeds, tmp_path):
    if row.game:  # the StarCraft II adapter looks for the game before anything else: give it a stand-in folder
        (tmp_path / "Versions").mkdir()
        (tmp_path / "Maps" / "SMAC_Maps").mkdir(parents=True)
        (tmp_path / "Maps" / "SMAC_Maps" / f"{row.example}.SC2Map").touch()
    (line,) = _make(list(row.modules), [row], SC2PATH=str(tmp_path))
    assert line.startswith(f"{row.family} {row.example} ImportError"), line
    assert any(m in line for m in row.modules), line

def test_every_row_makes_here():
    rows = [n for n in NEEDS if not [m for m in n.missing() if not m.startswith("the StarCraft II game")]]
    if len(rows) < len(NEEDS):
        pytest.skip(f"not installed here: {[n.ids for n in NEEDS if n not in rows]}")
    expected = []
    for n in rows:
        made = "made" if not (n.game and not os.path.isdir(os.path.join(sc2_path(), "Versions"))) else "GameNotFoundError"
        expected.append(f"{n.family} {n.example} {made}")
    assert _make([], rows) == expected

def test_needs_for_picks_the_longest_prefix():
    assert needs_for("pettingzoo", "mpe2.simple_spread_v3").extra is None
    assert needs_for("pettingzoo", "pettingzoo.butterfly.pistonball_v6").modules == ("pymunk",)
    assert needs_for("atari", "pettingzoo.atari.pong_v3").modules == ("ale_py", "multi_agent_ale_py")
    assert needs_for("atari", "ALE/Pong-v5").modules == ("ale_py",)
    assert needs_for("gym", "CartPole-v1").extra is None
    assert needs_for("pettingzoo", "some_other_package.env_v0") is None

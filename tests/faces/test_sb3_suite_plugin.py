"""scripts/ci/sb3_suite/sb3_face_plugin.py: the rules that make scripts/ci/run_sb3_suite.sh fail or pass.

Run on a small stand-in for SB3's tests folder, with the ``native`` backend (nothing
substituted), so only the plugin's own rules act: selection, strict expected failures,
stale entries. (The suite itself is run by scripts/ci/run_sb3_suite.sh in .ci/run.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "scripts" / "ci" / "sb3_suite"

TESTS = {
    "test_vec_things.py": (
        "def test_passes():\n    assert True\n\n"
        "def test_fails():\n    assert False, 'a difference'\n"
    ),
    "test_algos.py": (
        "DummyVecEnv = object\n\n"
        "def make_env():\n    return DummyVecEnv\n\n"
        "def test_builds_through_a_helper():\n    assert make_env()\n\n"
        "def test_has_nothing_to_do_with_vec_envs():\n    assert False, 'never selected'\n"
    ),
}


def run(tmp_path: Path, expected: str) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    for name, text in TESTS.items():
        (tests / name).write_text(text)
    (tmp_path / "expected.txt").write_text(expected)
    env = {**os.environ, "MARL_VEC_SB3_BACKEND": "native", "MARL_VEC_SB3_EXPECTED": str(tmp_path / "expected.txt"),
           "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "sb3_face_plugin", "-p", "no:cacheprovider",
                           "-q", "-rfEX", "tests"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_listed_failure_passes_the_run_and_unrelated_tests_are_not_selected(tmp_path):
    out = run(tmp_path, "native tests/test_vec_things.py::test_fails | a documented difference\n")
    assert out.returncode == 0, out.stdout
    assert "2 passed, 1 deselected, 1 xfailed" in out.stdout


def test_an_unlisted_failure_fails_the_run(tmp_path):
    out = run(tmp_path, "# nothing listed\n")
    assert out.returncode == 1
    assert "FAILED tests/test_vec_things.py::test_fails" in out.stdout


def test_a_listed_test_that_passes_fails_the_run(tmp_path):
    out = run(tmp_path, "native tests/test_vec_things.py::test_fails | a documented difference\n"
                        "native tests/test_vec_things.py::test_pass* | listed by mistake\n")
    assert out.returncode == 1
    assert "[XPASS(strict)] listed by mistake" in out.stdout


@pytest.mark.parametrize("line, message", [
    ("native tests/test_vec_things.py::test_gone | was fixed\n", "match no selected test (remove them)"),
    ("native tests/test_vec_things.py::test_fails\n", "expected '<backend> <nodeid pattern> | <reason>'"),
])
def test_a_stale_or_malformed_entry_is_an_error(tmp_path, line, message):
    out = run(tmp_path, line)
    assert out.returncode != 0
    assert message in out.stdout + out.stderr

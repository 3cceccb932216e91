"""A test that sends Ctrl-C to pytest's own process must make SIGINT raise for its duration.

A process started with SIGINT ignored (a background job, ``nohup``, some CI runners)
keeps it ignored in Python, so such a test passes or fails by how pytest was started
(three did fail so). The ``sigint_raises`` fixture or ``tests.helpers.sigint``'s
``python_sigint``/``interrupted`` make it hold either way.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
GUARDS = ("sigint_raises", "python_sigint", "interrupted(")


def test_tests_that_interrupt_pytest_make_sigint_raise():
    unguarded = []
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                body = ast.get_source_segment(source, node) or ""
                if "os.getpid(), signal.SIGINT" in body and not any(g in body for g in GUARDS):
                    unguarded.append(f"{path.relative_to(TESTS)}::{node.name}")
    assert unguarded == [], f"these send SIGINT to pytest without the sigint_raises fixture: {unguarded}"

"""Bugs the fuzzer meets that are open: each flag holds back the one call or check that meets it.

docs/fuzzing.md: while a bug is open its flag is here (one line each, saying what the bug
is) and a strict xfail test in ``test_fuzz_regressions.py`` (or beside it) replays it; when
the fix lands that test passes, and so fails the run: remove the mark, the flag and the
branch it guarded. ``MARL_VEC_FUZZ_ALL=1`` runs every rule anyway (how to see that the
fuzzer still finds a bug, or that a fix holds under it).
"""

from __future__ import annotations

import os

OPEN: dict[str, str] = {
}


def held_back(name: str) -> bool:
    """Whether the fuzzer holds back what meets the open bug ``name`` (``MARL_VEC_FUZZ_ALL=1``: never)."""
    if name not in OPEN:
        raise KeyError(f"no open bug {name!r}; open: {sorted(OPEN)}")
    return os.environ.get("MARL_VEC_FUZZ_ALL") != "1"

"""The test counts README.md and the docs state are today's, within a few percent.

The docs say how many tests each tier holds: ``default selection: about N tests`` (what
``python -m pytest`` runs) and ``long tier: about M tests`` (what ``.ci/run`` adds with
``-m "slow or matrix"``). The counts come from this session when it collected the whole
suite with the default selection (README's test command, CI's first pass); otherwise from a
``pytest --collect-only`` run (a few minutes on 2 cores).
"""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "getting_started.md", ROOT / "docs" / "contributing.md"]
STATED = re.compile(r"(default selection|long tier)[^.|]*?about ([\d,]+) tests")
TOLERANCE = 0.05  # "about": within 5% of the count


def default_markexpr() -> str:
    """The -m of setup.cfg's addopts: the default selection."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    args = shlex.split(cfg["tool:pytest"]["addopts"])
    return args[args.index("-m") + 1]


def stated_counts(text: str) -> list[tuple[str, int]]:
    """The tier counts a page states.

    Examples:
        >>> stated_counts("runs the default selection (about 2,400 tests); the long tier, about 150 tests, in CI")
        [('default selection', 2400), ('long tier', 150)]
    """
    return [(tier, int(n.replace(",", ""))) for tier, n in STATED.findall(" ".join(text.split()))]


def _whole_suite_collected(config: pytest.Config) -> bool:
    args = [Path(a.split("::")[0]).resolve() for a in config.args]
    return (args in ([ROOT / "tests"], [ROOT]) and not config.option.keyword
            and config.option.markexpr == default_markexpr() and not config.getoption("deselect", None))


def tier_counts(request: pytest.FixtureRequest) -> tuple[int, int]:
    """(default selection, long tier): this session's when it collected the whole suite, else collected anew."""
    if _whole_suite_collected(request.config):
        return len(request.session.items), len(conftest.DESELECTED)
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    found = re.search(r"^(\d+)/(\d+) tests collected \((\d+) deselected\)", out.stdout, re.M)
    assert found, out.stdout[-3000:] + out.stderr[-3000:]
    return int(found.group(1)), int(found.group(3))


def test_the_docs_state_each_tier_and_its_count(request):
    counts = dict(zip(("default selection", "long tier"), tier_counts(request)))
    wrong, seen = [], set()
    for page in PAGES:
        for tier, stated in stated_counts(page.read_text()):
            seen.add((page.name, tier))
            if abs(stated - counts[tier]) > TOLERANCE * counts[tier]:
                wrong.append(f"{page.relative_to(ROOT)} says the {tier} has about {stated:,} tests; it has {counts[tier]:,}")
    assert not wrong, "; ".join(wrong)
    assert {(p.name, t) for p in PAGES[:2] for t in counts} <= seen, (
        f"README.md and getting_started.md state both tiers' counts; found only {sorted(seen)}")

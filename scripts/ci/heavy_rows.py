#!/usr/bin/env python
"""Write tests/heavy_rows.txt: the rows of parametrized tests that go to the long tier by their
measured time, so that README's test command stays short while every test function keeps a row
in it.

    python -m pytest --junitxml=/tmp/default.xml         # the default selection, timed
    python scripts/ci/heavy_rows.py /tmp/default.xml      # then review the diff and commit it

The rule: of each parametrized test function, the cheapest row stays in the default selection
and every other row that took more than ``--seconds`` (2 s on 2 cores) is listed; tests/conftest.py
marks the listed rows ``matrix`` (the rest of a matrix beyond the rows that cover its concern),
which .ci/run's second pass runs. The doc examples (each block is an example of its own, run as
written) and the fuzzers (one state machine per row) keep every row. Rows listed before stay listed while they exist (the XML of a
default run no longer has them); rows no test has any more are dropped.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.heavy_rows import (
    HEAVY_ROWS_FILE,
    node_id,
    read_heavy_rows,
    write_heavy_rows,
)


def timed_rows(junit_xml: Path) -> dict[str, float]:
    """Each test's node id and its seconds (call, setup and teardown), from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        if case.find("skipped") is None:
            out[node_id(case.get("classname", ""), case.get("name", ""))] = float(case.get("time", 0))
    return out


# Files whose every row is a concern of its own.
KEEP_EVERY_ROW = ("tests/project/test_doc_examples.py", "tests/fuzz/")


def heavy_rows(times: dict[str, float], seconds: float) -> set[str]:
    """Every row but the cheapest of each parametrized function that took more than ``seconds``.

    Examples:
        >>> sorted(heavy_rows({"t.py::f[a]": 3.0, "t.py::f[b]": 5.0, "t.py::f[c]": 1.0, "t.py::g[a]": 9.0}, 2.0))
        ['t.py::f[a]', 't.py::f[b]']
    """
    functions: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for nodeid, took in times.items():
        if "[" in nodeid and not nodeid.startswith(KEEP_EVERY_ROW):
            functions[nodeid.split("[", 1)[0]].append((took, nodeid))
    out = set()
    for rows in functions.values():
        out.update(nodeid for took, nodeid in sorted(rows)[1:] if took > seconds)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("junit_xml", type=Path, help="pytest --junitxml of a default-selection run")
    parser.add_argument("--seconds", type=float, default=2.0, help="a row above this goes to the long tier")
    args = parser.parse_args()
    times = timed_rows(args.junit_xml)
    before = read_heavy_rows()
    rows = heavy_rows(times, args.seconds) | before
    write_heavy_rows(rows)
    added = len(rows - before)
    print(f"{HEAVY_ROWS_FILE.relative_to(ROOT)}: {len(rows)} rows ({added} added, "
          f"{sum(times.get(r, 0.0) for r in rows - before):.0f} s of this run's default selection moved)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""tests/heavy_rows.txt: rows of parametrized tests that the long tier runs, by measured time.

scripts/ci/heavy_rows.py writes it from a timed default run; tests/conftest.py marks the listed
rows ``matrix`` and, when a session collects the whole suite, fails on a listed row that no test
has any more (a renamed test or parameter), so that the list cannot rot silently.
"""

from __future__ import annotations

from pathlib import Path

HEAVY_ROWS_FILE = Path(__file__).resolve().parents[1] / "heavy_rows.txt"
HEADER = """\
# The rows of parametrized tests that go to the long tier (marker `matrix`) by their measured time:
# of each test function, the cheapest row stays in README's test command and every other row
# above 2 s on 2 cores is listed here. Written by scripts/ci/heavy_rows.py from a timed default
# run (see its docstring); tests/conftest.py marks these rows. One pytest node id per line.
"""


def node_id(classname: str, name: str) -> str:
    """A pytest node id from a JUnit ``classname`` (dotted module, maybe a class) and test name.

    Examples:
        >>> node_id("tests.core.test_x", "test_a[dummy]")
        'tests/core/test_x.py::test_a[dummy]'
        >>> node_id("tests.core.test_x.TestY", "test_b")
        'tests/core/test_x.py::TestY::test_b'
    """
    parts = classname.split(".")
    cls = [parts.pop()] if parts and parts[-1][:1].isupper() else []
    return "::".join(["/".join(parts) + ".py", *cls, name])


def read_heavy_rows(path: Path = HEAVY_ROWS_FILE) -> set[str]:
    """The node ids listed (comments and blank lines left out); none when there is no file."""
    if not path.exists():
        return set()
    lines = (line.strip() for line in path.read_text().splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def write_heavy_rows(rows: set[str], path: Path = HEAVY_ROWS_FILE) -> None:
    path.write_text(HEADER + "".join(f"{row}\n" for row in sorted(rows)))

"""tests/heavy_rows.txt, the rows moved to the long tier by their measured time: each names a
test function that exists, of a parametrized test whose cheapest row stays in the default
selection, and never a doc example or a fuzzer (every row of those is a concern of its own).

tests/conftest.py also fails a whole-suite session on a row no test has any more, or on a
function whose every row is listed; this test checks what it can without collecting."""

from __future__ import annotations

import re

from scripts.ci.heavy_rows import KEEP_EVERY_ROW
from tests.helpers.heavy_rows import HEAVY_ROWS_FILE, node_id, read_heavy_rows

ROOT = HEAVY_ROWS_FILE.parents[1]


def test_every_listed_row_is_a_row_of_a_test_function_that_exists():
    rows = read_heavy_rows()
    assert rows, f"{HEAVY_ROWS_FILE} is empty"
    for row in sorted(rows):
        base, _, param = row.partition("[")  # a parameter may hold "::" itself
        path, *names = base.split("::")
        function = names[-1]
        assert (ROOT / path).is_file(), f"{row}: no file {path}"
        assert param, f"{row}: not a row of a parametrized test"
        assert re.search(rf"^\s*def {re.escape(function)}\(", (ROOT / path).read_text(), re.MULTILINE), (
            f"{row}: {path} has no test {function}")
        assert not row.startswith(KEEP_EVERY_ROW), f"{row}: its file keeps every row in the default selection"



def test_junit_names_become_pytest_node_ids():
    """scripts/ci/heavy_rows.py matches rows by node id: a class (``TestFuzzRayLinked``) stays a
    ``::`` part, a parameter holding dots stays whole (doctests of tests/helpers are not run)."""
    assert node_id("tests.backends.test_ray", "test_a[auto]") == "tests/backends/test_ray.py::test_a[auto]"
    assert node_id("tests.fuzz.test_fuzz_ray.TestFuzzRayLinked", "runTest") == (
        "tests/fuzz/test_fuzz_ray.py::TestFuzzRayLinked::runTest")
    assert node_id("tests.project.test_doc_examples", "test_b[docs/x.md:L3]") == (
        "tests/project/test_doc_examples.py::test_b[docs/x.md:L3]")

"""Docstrings are Markdown that mkdocstrings (Google style) renders as written: the API
reference must not show raw reST (issue 38).

Checked on the source, without mkdocs (tests/project/test_docs_html.py checks the built
pages): no Sphinx role (``:class:`X```: mkdocstrings prints it literally; write
``[`X`][marl_vec.path.X]`` for an object the reference renders, else `` `X` ``), no
``# doctest:`` directive, no ``Example:`` title (griffe reads only ``Examples:`` as the
section that renders doctests as code; the singular is an admonition whose ``>>>`` lines
render as block quotes), and every ``>>>`` line inside an ``Examples:`` section or a
fenced block. /work/wt/firsthour_roles.py (issue 38) converted the old docstrings.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|exc|obj):`")
SECTION = re.compile(r"^(\s*)Examples:\s*$")


def _docstrings():
    """(file:line, text) of every module, class and function docstring of the package."""
    for path in sorted((ROOT / "marl_vec").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    line = node.body[0].lineno if node.body else 1
                    yield f"{path.relative_to(ROOT)}:{line}", doc


def _bare_doctests(doc: str) -> list[str]:
    """``>>>`` lines outside an Examples section and outside a fenced block."""
    bare, section, fenced = [], None, False
    for line in doc.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip() and section is not None and indent <= section and not line.lstrip().startswith(">>>"):
            section = None
        if SECTION.match(line):
            section = indent
        elif line.lstrip().startswith(">>>") and section is None:
            bare.append(line.strip())
    return bare


def test_the_package_has_docstrings_to_check():
    assert sum(1 for _ in _docstrings()) > 500


def test_no_docstring_has_a_sphinx_role():
    found = [f"{where}: {m.group(0)}" for where, doc in _docstrings() for m in ROLE.finditer(doc)]
    assert not found, f"{len(found)} Sphinx roles (mkdocstrings prints them raw): {found[:20]}"


def test_no_docstring_has_a_doctest_directive_or_a_singular_example_title():
    found = [where for where, doc in _docstrings()
             if "# doctest:" in doc or re.search(r"^\s*Example:\s*$", doc, re.M)]
    assert not found, f"'# doctest:' or 'Example:' (write 'Examples:') in {found[:20]}"


def test_every_doctest_is_in_an_examples_section_or_a_fence():
    found = [f"{where}: {line}" for where, doc in _docstrings() for line in _bare_doctests(doc)]
    assert not found, f"{len(found)} '>>>' lines render as block quotes: {found[:20]}"

"""The built API reference shows no raw reST (issue 38): no Sphinx role, no doctest
directive, no doctest rendered as block quotes, and signatures formatted over lines.

It builds the site (``mkdocs build --strict``, about 15 s) and reads its HTML, so it
needs the docs extra; .ci/run's docs step runs it after its own build. The docstrings'
source is checked without mkdocs by test_docstring_markdown.py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None,
    reason="needs the docs extra (pip install -e '.[docs]'); .ci/run's docs step runs it")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    return out


PAGES = ["reference/index.html", "reference/compat/index.html"]


@pytest.mark.parametrize("page", PAGES)
def test_the_reference_shows_no_raw_rest(site, page):
    html = (site / page).read_text()
    text = re.sub(r"<[^>]+>", "", html)  # what a reader sees
    assert not ROLE.findall(text), sorted(set(re.findall(r".{30}:(?:mod|class|func|meth|attr):.{30}", text)))[:10]
    assert "doctest:" not in text
    # a doctest outside an Examples section renders as nested block quotes
    assert not re.search(r"<blockquote>\s*<blockquote>", html)


@pytest.mark.parametrize("page", PAGES)
def test_the_reference_links_its_objects_and_splits_long_signatures(site, page):
    html = (site / page).read_text()
    assert html.count('class="autorefs autorefs-internal"') > 20  # cross-references that link
    # make_vec's signature is one parameter a line (ruff formats it), not one cut-off line
    if page == "reference/index.html":
        signature = re.search(r'id="marl_vec.vec.factory.make_vec".*?<div class="[^"]*doc-signature[^"]*">(.*?)</div>',
                              html, re.S)
        assert signature and signature.group(1).count("\n") >= 5, signature and signature.group(1)[:500]

"""The documentation site covers the public API and lists every page.

``mkdocs build --strict`` (run by .ci/run) fails on broken links and on
references to objects that do not exist; these checks catch what it cannot: a
public name that no reference page mentions, and they run without mkdocs.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import marl_vec
import marl_vec.compat

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _referenced() -> set[str]:
    """The last part of every ``::: module.name`` directive in docs/reference/."""
    names = set()
    for page in (DOCS / "reference").glob("*.md"):
        names.update(m.group(1).rsplit(".", 1)[-1] for m in re.finditer(r"^::: ([\w.]+)", page.read_text(), re.M))
    return names


def test_every_public_name_has_an_api_reference():
    missing = sorted(set(marl_vec.__all__) - _referenced())
    assert not missing, f"docs/reference/ has no '::: ...' entry for marl_vec.{missing}"


def test_every_face_has_an_api_reference():
    missing = sorted(set(marl_vec.compat.__all__) - _referenced())
    assert not missing, f"docs/reference/ has no '::: ...' entry for marl_vec.compat.{missing}"


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return [p for item in node for p in _nav_pages(item)]


def test_every_page_is_in_the_navigation_and_every_nav_entry_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, (f"pages not in mkdocs.yml's nav: {sorted(set(pages) - set(nav))}; "
                                       f"nav entries without a page: {sorted(set(nav) - set(pages))}")


def test_docs_extra_installs_the_site_builders():
    cfg = (ROOT / "setup.cfg").read_text()
    docs = re.search(r"^docs =\n((?:    .*\n)+)", cfg, re.M)
    assert docs, "setup.cfg has no docs extra"
    assert {"mkdocs", "mkdocs-material", "mkdocstrings[python]"} <= {
        re.split(r"[<>=]", line.strip())[0] for line in docs.group(1).splitlines() if not line.strip().startswith("#")}

"""The Python examples of the docs pages run as written (docs/families/lbf_rware.md, docs/faces/tianshou.md).

Each ```python block of a page runs by itself in a fresh process from an empty
directory, as README's examples do, with the markers of tests/test_readme_examples.py
(``<!-- needs: module, ... -->`` skips a block whose modules are missing here, e.g.
tianshou outside its own venv; ``<!-- fragment -->`` and ``<!-- not run: REASON -->``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_readme_examples import (ROOT, _run, _unavailable, bare_expressions, cli_bin,  # noqa: F401
                                        readme_blocks, workdir)

PAGES = ["docs/families/lbf_rware.md", "docs/faces/tianshou.md"]
BLOCKS = [pytest.param(page, b, id=f"{Path(page).stem}-L{b.line}")
          for page in PAGES if (ROOT / page).exists() for b in readme_blocks(ROOT / page) if b.lang in ("python", "py")]


def test_pages_have_examples():
    assert {p for p, *_ in (b.values for b in BLOCKS)} == set(PAGES)


@pytest.mark.parametrize("page, block", BLOCKS)
def test_python_block_runs(page: str, block, workdir: Path):
    if "fragment" in block.markers or "not run" in block.markers:
        pytest.skip(f"{page}:{block.line} is marked {', '.join(block.markers)}")
    missing = _unavailable(block.markers.get("needs", ""))
    if missing:
        pytest.skip(f"{page}:{block.line} needs {', '.join(missing)}")
    assert not bare_expressions(block.text), f"{page}:{block.line}: a bare expression prints nothing; print() it"
    script = workdir / f".docs_block_{Path(page).stem}_{block.line}.py"
    script.write_text(block.text + "\n")
    out = _run([sys.executable, script.name], workdir, f"{page}:{block.line}")
    assert out.returncode == 0, f"{page}:{block.line} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"

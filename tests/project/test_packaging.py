"""What setup.cfg promises a user who installs marl_vec: the license file, and extras as light as they say."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()  # setup.cfg's %(x)s lines come interpolated
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _requirement_names(extra: str) -> list[str]:
    lines = [line.strip() for line in _setup_cfg()["options.extras_require"][extra].splitlines()]
    return sorted(re.split(r"[<>=!\[ ]", line)[0].lower() for line in lines if line and not line.startswith("#"))


def test_the_license_file_is_the_mit_license_setup_cfg_names():
    metadata = _setup_cfg()["metadata"]
    assert metadata["license"] == "MIT" and metadata["license_files"] == "LICENSE"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) the marl_vec authors\n")
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_the_pictures_extra_is_light():
    """`pictures` installs what GIFs and plots need (marl_vec.tools.render, marl_vec.tools.plots), and no trainer (torch)."""
    assert _requirement_names("pictures") == ["matplotlib", "pillow"]
    assert set(_requirement_names("pictures")) <= set(_requirement_names("examples"))
    assert set(_requirement_names("pictures")) <= set(_requirement_names("test"))


def _section(page: Path, heading: str) -> str:
    """The text of a page's ``## heading`` section, up to the next ``## `` heading."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_getting_started_lists_every_extra_setup_cfg_has():
    """The Extras table of docs/getting_started.md names each extra of setup.cfg, and no other."""
    rows = [line for line in _section(ROOT / "docs" / "getting_started.md", "Extras").splitlines()
            if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([\w-]+)`", row.split("|")[1])}
    extras = set(_setup_cfg()["options.extras_require"])
    assert listed == extras, f"missing from the table: {sorted(extras - listed)}; not extras: {sorted(listed - extras)}"


def test_getting_started_names_every_step_of_the_test_install():
    """What `install_test_deps.sh` runs besides pip (the Football compile, pysc2, JAX, Melting Pot)
    is named where getting_started says what the test command installs and how long it takes."""
    script = (ROOT / "scripts" / "install" / "install_test_deps.sh").read_text()
    steps = sorted(set(re.findall(r"scripts/[\w/]*install_\w+\.sh", script)))
    assert len(steps) >= 4, steps
    install = _section(ROOT / "docs" / "getting_started.md", "Install")
    assert [s for s in steps if s not in install] == []

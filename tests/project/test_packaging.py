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

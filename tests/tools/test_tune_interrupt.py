"""Ctrl-C in `marl-vec tune`: the table so far, one line, no process or shared memory left, nothing cached, exit 130.

Runs the real command as tests/tools/test_cli_interrupt.py runs `run` and `bench`
(its Command and checks), interrupting while a worker process steps.
"""

from __future__ import annotations

import re

import pytest

from tests.tools.test_cli_interrupt import Command, _interrupt_and_check


@pytest.mark.parametrize("group", [True, False], ids=["ctrl-c-to-group", "sigint-to-cli"])
def test_tune_interrupted_leaves_nothing_behind(group: bool, tmp_path, monkeypatch):
    cache = tmp_path / "tune-cache"
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(cache))
    cmd = Command(["tune", "gym/cartpole", "-o", "vec.num_envs=2", "--seconds", "4"], tmp_path)
    try:
        cmd.wait_for(r"^subproc, 1 worker: \d+/\d+ env-steps \(\d+%\)")
        steps, out = _interrupt_and_check(cmd, group, workers=1)
    finally:
        cmd.kill()
    assert steps > 0
    assert re.search(r"^. dummy +- x 2 +[\d,]+ ", out, re.M), out  # measured before the interrupt
    assert re.search(r"^. subproc, 1 worker +1 x 2 +[\d,]+ .*\(interrupted\)$", out, re.M), out
    assert "subproc, 2 workers" not in out and "fastest" not in out
    assert out.rstrip().endswith("nothing cached or written")
    assert not cache.exists() or not list(cache.iterdir())

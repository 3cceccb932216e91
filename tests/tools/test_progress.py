"""Progress display: a tqdm bar on a terminal, a few plain lines in a log (marl_vec.tools.progress)."""

from __future__ import annotations

import io
import re

import pytest

from marl_vec.tools import progress as progress_module
from marl_vec.tools.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plain(lines: str) -> list[str]:
    """Lines with their elapsed seconds blanked (timing varies)."""
    return [re.sub(r"in \d+\.\d s", "in T s", line) for line in lines.splitlines()]


def test_plain_lines_at_each_quarter_when_not_a_terminal():
    out = io.StringIO()
    with Progress(10, "dummy, 2 envs", stream=out) as bar:
        for i in range(10):
            if i == 6:
                bar.set_postfix(episodes=3, ret="-24.5")
            bar.update()
    assert _plain(out.getvalue()) == [
        "dummy, 2 envs: 3/10 steps (30%) in T s",
        "dummy, 2 envs: 5/10 steps (50%) in T s",
        "dummy, 2 envs: 8/10 steps (80%) in T s, episodes 3, ret -24.5",
        "dummy, 2 envs: 10/10 steps (100%) in T s, episodes 3, ret -24.5",
    ]
    assert "\r" not in out.getvalue()


def test_a_long_run_still_prints_a_line_a_minute(monkeypatch):
    clock = iter([0.0, 1.0, 61.0, 62.0, 130.0])
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    out = io.StringIO()
    bar = Progress(1000, "x", stream=out)  # reads the clock once
    for _ in range(4):
        bar.update()
    assert out.getvalue().splitlines() == ["x: 2/1000 steps (0%) in 61.0 s", "x: 4/1000 steps (0%) in 130.0 s"]


def test_a_terminal_gets_a_tqdm_bar():
    out = Terminal()
    with Progress(4, "subproc, 8 envs", stream=out) as bar:
        bar.update(4)
        assert bar._bar is not None
    assert "subproc, 8 envs" in out.getvalue() and "\r" in out.getvalue()


@pytest.mark.parametrize("stream", [io.StringIO(), Terminal()])
def test_disabled_shows_nothing(stream):
    with Progress(4, "x", enabled=False, stream=stream) as bar:
        bar.update(4)
    assert stream.getvalue() == "" and bar.done == 4


def test_a_new_total_moves_the_quarters():
    out = io.StringIO()
    with Progress(4, "tune", stream=out, unit="env-step") as bar:
        bar.update()  # 1/4: the first quarter
        bar.set_total(100)  # a run that ends by the clock re-estimates its total
        bar.update(49)
        bar.set_total(60)
        bar.update(10)
    assert _plain(out.getvalue()) == [
        "tune: 1/4 env-steps (25%) in T s",
        "tune: 50/100 env-steps (50%) in T s",
        "tune: 60/60 env-steps (100%) in T s",
    ]

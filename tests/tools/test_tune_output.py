"""What `marl-vec tune` prints: one header, progress lines that reach 100 %, and what to do
with the result (``backend: auto`` takes it, ``--write`` sets it, or paste the vec section).

Measurements are 0.2 s on CartPole with 4 envs.
"""

from __future__ import annotations

import re

import pytest

from marl_vec.tools.cli import main
from marl_vec.tools.tuner import usable_cores, worker_counts

ARGS = ["tune", "gym/cartpole", "--seconds", "0.2", "-o", "vec.num_envs=4"]
HOW_TO_USE = [
    "to use it        backend: auto (the default) now takes this choice for this config on this machine;",
    "                 or run again with --write to set it in your YAML file, or paste the vec section",
]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Each test its own tune cache."""
    path = tmp_path / "tune-cache"
    monkeypatch.setenv("MARL_VEC_TUNE_CACHE", str(path))
    return path


def _headers(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("marl-vec tune:")]


def test_one_header_progress_to_100_percent_and_how_to_use_the_result(capsys, tmp_path):
    config = tmp_path / "cartpole.yaml"
    config.write_text("env: {family: gym, id: CartPole-v1}\nvec: {num_envs: 4}\n")  # backend: auto, the default
    assert main(["tune", str(config), "--seconds", "0.2"]) == 0
    out, err = capsys.readouterr()
    assert _headers(out) == ["marl-vec tune: measuring %d choices for gym CartPole-v1, 4 envs, 0.2 s each"
                             % (1 + len(worker_counts(4, usable_cores())) + (usable_cores() >= 2))]
    assert out.splitlines()[-2:] == HOW_TO_USE
    # Off a terminal each choice's progress is a few plain lines; the last of each says 100 %.
    labels = ["dummy"] + [f"subproc, {n} worker{'s' * (n > 1)}" for n in worker_counts(4, usable_cores())]
    for label in labels:
        lines = [line for line in err.splitlines() if line.startswith(label + ": ")]
        assert lines, (label, err)
        done, total, pct = re.match(r".*: (\d+)/(\d+) env-steps \((\d+)%\)", lines[-1]).groups()
        assert (done, pct) == (total, "100"), lines
        assert sum(line.endswith("(100%)") or "(100%) " in line for line in lines) == 1, lines


def test_a_cached_result_has_one_header_and_says_how_to_use_it_too(capsys):
    assert main(ARGS) == 0
    capsys.readouterr()
    assert main(ARGS) == 0  # the shipped gym/cartpole names backend: dummy
    out = capsys.readouterr().out
    assert _headers(out) == ["marl-vec tune: gym CartPole-v1, 4 envs, 0.2 s per choice"]
    assert "cached result    " in out
    assert out.splitlines()[-2:] == [
        "to use it        this config names backend: dummy; set backend: auto to take this choice on this machine;",
        HOW_TO_USE[1],
    ]


def test_write_says_what_it_wrote_instead(capsys, tmp_path):
    config = tmp_path / "cartpole.yaml"
    config.write_text("env: {family: gym, id: CartPole-v1}\nvec: {num_envs: 4}\n")
    assert main(["tune", str(config), "--seconds", "0.2", "--write"]) == 0
    out = capsys.readouterr().out
    last = out.splitlines()[-1]
    assert last.startswith("wrote            ") and last.endswith(f" into {config}"), last
    assert "to use it" not in out

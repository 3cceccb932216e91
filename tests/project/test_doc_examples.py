"""Every example in README.md and the documentation site (docs/**/*.md) runs as written.

Blocks are found generically, so an example added anywhere in README.md or in a
page under docs/ is run too. What runs:

- ```python blocks: each is written to a file and run by itself in a fresh
  Python process (``python block.py``), with a time limit. It must exit 0. A
  top-level bare expression (``batch.obs.shape``) is an error: a script would
  print nothing; ``print()`` it.
- ```bash / ```sh blocks: every ``marl-vec ...`` command in them (also after
  ``&&`` or ``;`` on a line) runs through bash and must exit 0. Other commands
  (pip, install scripts, pytest, ray start) are not run here.
- Plain ``` blocks whose lines start with ``$ marl-vec``: the command runs and
  the lines after it are its expected output (stdout and stderr together),
  each matching a whole line, where ``...`` stands for any text.
- ```yaml blocks: each must load as a config (a block holding only some
  sections is completed with the default config's ``env``); a block whose
  first line is ``# path/to/file.yaml`` of an existing file must equal it.

Markers: an HTML comment on the line(s) right before a block's opening fence.

- ``<!-- fragment -->``: the block is part of a bigger program (the text must
  say so); it is not run.
- ``<!-- not run: REASON -->``: the block is not run, for REASON (e.g. it needs
  a Ray cluster started by hand).
- ``<!-- needs: NAME, ... -->``: skip (with the reason) unless every NAME is
  available: an importable module (``ray``, ``gfootball``, ``ale_py``), or
  ``sc2-game`` (the StarCraft II game at SC2PATH).

Each block runs in an empty working directory of its own, so no example relies
on the repo's layout (configs are named as shipped, ``mpe/simple_spread``), and
files an example writes (``run.gif``) stay out of the repo; PYTHONPATH is the
repo root and ``marl-vec`` runs this checkout's CLI with this test's Python.
Failures name the file and line of the block (``docs/concepts/spaces.md:12``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from marl_vec.tools.config import load_config, resolve_config_path
from marl_vec.tools.env_extras import sc2_path
from tests.helpers.shown_values import RUNNER, matches, shown_values

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_FILES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK_TIMEOUT = 240  # seconds per block

FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*(.*)$")
MARKER = re.compile(r"^<!--\s*(fragment|not run|needs)\s*:?\s*(.*?)\s*-->$")


@dataclass
class Block:
    lang: str
    where: str  # the file, relative to the repo root (README.md, docs/concepts/spaces.md)
    line: int  # 1-based line of the opening fence
    heading: str  # the section it is in
    text: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")[:40]
        return f"{self.where}:L{self.line}-{self.lang or 'text'}-{slug}"

    @property
    def at(self) -> str:
        """Where the block is, for messages: ``README.md:12``."""
        return f"{self.where}:{self.line}"


def doc_blocks(path: Path = README) -> list[Block]:
    """The fenced blocks of ``path``, each with its language, line, section and markers."""
    lines = path.read_text().splitlines()
    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    blocks: list[Block] = []
    heading = "top"
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        m = FENCE.match(line)
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise AssertionError(f"{where}:{i + 1}: a ``` block is never closed")
        markers: dict[str, str] = {}
        k = i - 1
        while k >= 0 and (mm := MARKER.match(lines[k].strip())):
            markers[mm.group(1)] = mm.group(2)
            k -= 1
        blocks.append(Block(lang, where, i + 1, heading, "\n".join(lines[i + 1:end]), markers))
        i = end + 1
    return blocks


BLOCKS = [block for path in DOC_FILES for block in doc_blocks(path)]


def _blocks(*langs: str) -> list:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.lang in langs]


def _shell_blocks() -> list:
    return [pytest.param(b, id=b.id) for b in BLOCKS
            if b.lang in ("", "console", "text") and any(ln.startswith("$ marl-vec") for ln in b.text.splitlines())]


def _unavailable(needs: str) -> list[str]:
    missing = []
    for name in (n.strip() for n in needs.split(",") if n.strip()):
        if name == "sc2-game":
            if not os.path.isdir(sc2_path()):
                missing.append(f"the StarCraft II game (none at {sc2_path()}; set SC2PATH)")
        elif importlib.util.find_spec(name) is None:
            missing.append(f"module {name}")
    return missing


def _skip_or_run(block: Block) -> None:
    if "not run" in block.markers:
        reason = block.markers["not run"]
        assert reason, f"{block.at}: <!-- not run: REASON --> needs a reason"
        pytest.skip(f"{block.at} is marked not run: {reason}")
    if "fragment" in block.markers:
        pytest.skip(f"{block.at} is marked as a fragment")
    missing = _unavailable(block.markers.get("needs", ""))
    if missing:
        pytest.skip(f"{block.at} needs {', '.join(missing)}")


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    """A folder holding a ``marl-vec`` that runs this checkout's CLI with this test's Python."""
    bin_dir = tmp_path_factory.mktemp("bin")
    cli = bin_dir / "marl-vec"
    cli.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m marl_vec.tools.cli \"$@\"\n")
    cli.chmod(0o755)
    return bin_dir


@pytest.fixture
def workdir(tmp_path, bin_dir) -> Path:
    """An empty working directory for one block, ``marl-vec`` on PATH (see ``_env``)."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "bin").symlink_to(bin_dir)
    return work


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(work.parent / "bin"), os.path.dirname(sys.executable), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    return env


def _run(args: list[str], work: Path, what: str) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(args, cwd=work, env=_env(work), capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{what} did not finish in {BLOCK_TIMEOUT} s; output so far:\n{exc.stdout}\n{exc.stderr}")
    return out


def bare_expressions(source: str) -> list[int]:
    """Lines of top-level expression statements that only compute a value (a script shows nothing).

    >>> bare_expressions("x = 1\\nx\\nprint(x)\\n'''doc'''")
    [2]
    """
    tree = ast.parse(source)
    return [node.lineno for i, node in enumerate(tree.body)
            if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom))
            and not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))]


@pytest.mark.parametrize("block", _blocks("python", "py"))
def test_python_block_runs(block: Block, workdir: Path):
    _skip_or_run(block)
    bare = bare_expressions(block.text)
    assert not bare, (f"{block.at}: bare expression(s) on block line(s) {bare} print nothing when run "
                      "as a script; wrap them in print()")
    shown = shown_values(block.text)
    unprinted = [f"line {s.line}: {s.value}" for s in shown if not s.lines]
    assert not unprinted, (f"{block.at}: shown value(s) on a line that prints nothing ({'; '.join(unprinted)}): "
                           "print() the value, or mark it as an example with `# e.g. ...`")
    script = workdir.parent / f"block_{block.line}.py"  # beside the working directory, which stays empty
    script.write_text(block.text + "\n")
    args = [sys.executable, str(script)]
    if shown:  # run through the runner that records what each line printed
        runner, record = workdir.parent / "shown_runner.py", workdir.parent / f"printed_{block.line}.json"
        runner.write_text(RUNNER)
        args = [sys.executable, str(runner), str(script), str(record)]
    out = _run(args, workdir, block.at)
    assert out.returncode == 0, (f"{block.at} ({block.heading}) failed with exit code "
                                 f"{out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
    if shown:
        printed = {int(line): text for line, text in json.loads(record.read_text()).items()}
        wrong = []
        for s in shown:
            got = next((printed[n] for n in s.lines if n in printed), None)
            if got is None or not matches(s.value, got):
                wrong.append(f"line {s.line} shows {s.value!r} but " +
                             ("its print never ran" if got is None else f"printed {got.rstrip()!r}"))
        assert not wrong, f"{block.at}: " + "; ".join(wrong)


def marl_vec_commands(text: str) -> list[str]:
    """The ``marl-vec ...`` commands of a shell block, one per line or ``&&``/``;`` part.

    >>> marl_vec_commands("pip install -e . && marl-vec run   # go\\nbash x.sh\\n")
    ['marl-vec run   # go']
    """
    commands = []
    for line in text.splitlines():
        for part in re.split(r"&&|;", line):
            if part.strip().startswith("marl-vec"):
                commands.append(part.strip())
    return commands


def _command_blocks() -> list:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.lang in ("bash", "sh", "shell") and marl_vec_commands(b.text)]


@pytest.mark.parametrize("block", _command_blocks())
def test_shell_block_marl_vec_commands_run(block: Block, workdir: Path):
    _skip_or_run(block)
    for command in marl_vec_commands(block.text):
        out = _run(["bash", "-c", command], workdir, f"{block.at}: {command}")
        assert out.returncode == 0, (f"{block.at}: `{command}` failed with exit code {out.returncode}:\n"
                                     f"{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
        assert "Traceback" not in out.stderr, f"{block.at}: `{command}` printed a traceback:\n{out.stderr}"


def unmatched_lines(expected: list[str], actual: str) -> list[str]:
    """The expected lines that match no line of ``actual``; ``...`` in one stands for any text.

    >>> unmatched_lines(["a ... c", "b: 1, ...", "zz"], "a long c\\nb: 1, 2, 3\\n")
    ['zz']
    """
    got = [line.rstrip() for line in actual.splitlines()]
    unmatched = []
    for want in expected:
        pattern = re.compile(".*".join(re.escape(part) for part in want.rstrip().split("...")))
        if not any(pattern.fullmatch(line) for line in got):
            unmatched.append(want)
    return unmatched


@pytest.mark.parametrize("block", _shell_blocks())
def test_shown_command_output_matches(block: Block, workdir: Path):
    _skip_or_run(block)
    sessions: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions and line.strip():
            sessions[-1][1].append(line)
    for command, expected in sessions:
        out = _run(["bash", "-c", command], workdir, f"{block.at}: {command}")
        missing = unmatched_lines(expected, out.stdout + out.stderr)
        assert not missing, (f"{block.at}: `{command}` did not print {missing}; it printed:\n"
                             f"{out.stdout}{out.stderr}")


@pytest.mark.parametrize("block", _blocks("yaml", "yml"))
def test_yaml_block_is_a_valid_config(block: Block, workdir: Path):
    _skip_or_run(block)
    data = yaml.safe_load(block.text)
    assert isinstance(data, dict), f"{block.at}: a yaml block must be a mapping of config sections"
    if "env" not in data:  # a snippet of some sections: complete it with the default config's env
        data = {**load_config().model_dump(by_alias=True, include={"env"}), **data}
    cfg = load_config(data)  # raises ConfigError naming the bad key
    first = block.text.splitlines()[0]
    if first.startswith("# ") and first[2:].strip().endswith((".yaml", ".yml")):
        path = ROOT / first[2:].strip()
        assert path.is_file(), f"{block.at} names {first[2:].strip()}, which does not exist"
        assert cfg == load_config(resolve_config_path(path)), (
            f"{block.at} shows {path.relative_to(ROOT)} but differs from the file")


def test_the_docs_have_examples_of_each_kind():
    """The collection above found the examples (a parser bug would silently test nothing)."""
    langs = [b.lang for b in BLOCKS]
    assert langs.count("python") >= 15 and langs.count("bash") >= 5 and "yaml" in langs
    assert _shell_blocks(), "the docs show a `$ marl-vec` command with its output"
    assert any(b.lang == "python" and b.where == "README.md" for b in BLOCKS), "README.md has its trainer loop"
    pages = {b.where for b in BLOCKS}
    assert "docs/getting_started.md" in pages and "docs/concepts/autoreset.md" in pages


def test_markers_and_lines_are_read(tmp_path):
    """How blocks are found: the marker lines right above a fence, the line of the fence, the section."""
    readme = tmp_path / "README.md"
    readme.write_text("# Top\n\n## Part one\n<!-- fragment -->\n```python\nx\n```\n\n"
                      "<!-- needs: ray, sc2-game -->\n<!-- not run: too slow -->\n```bash\nmarl-vec run\n```\n"
                      "```\n$ marl-vec list\n```\n")
    blocks = doc_blocks(readme)
    assert {b.where for b in blocks} == {"README.md"}
    assert [(b.lang, b.line, b.heading, b.text) for b in blocks] == [
        ("python", 5, "Part one", "x"), ("bash", 11, "Part one", "marl-vec run"), ("", 14, "Part one", "$ marl-vec list")]
    assert blocks[0].markers == {"fragment": ""}
    assert blocks[1].markers == {"needs": "ray, sc2-game", "not run": "too slow"}
    assert blocks[2].markers == {}
    assert _unavailable("sys, no_such_module_here") == ["module no_such_module_here"]
    assert bare_expressions("import os\nos.sep\n") == [2]


def test_a_broken_block_fails(workdir):
    """A block that raises makes its test fail, naming the file and line (what CI relies on)."""
    block = Block("python", "docs/x.md", 7, "Example", "import marl_vec as mv\nprint(actions)")
    with pytest.raises(AssertionError, match=r"docs/x.md:7 \(Example\) failed with exit code 1:(.|\n)*NameError"):
        test_python_block_runs(block, workdir)


def test_a_block_runs_in_an_empty_directory(workdir):
    """No example may rely on the repo's layout: its working directory holds nothing."""
    block = Block("python", "docs/x.md", 3, "Example",
                  "import os\nassert os.listdir('.') == [], os.listdir('.')\nassert not os.path.exists('configs')")
    test_python_block_runs(block, workdir)


def test_a_wrong_shown_value_fails(workdir):
    """A value shown in a comment is compared with what its print printed (device_arrays.md once
    showed (8, 3, 16) for vmas/balance's 4 agents); a right one passes."""
    text = "import numpy as np\nx = np.zeros((8, 4, 16))\nprint(x.shape)  # (8, 3, 16): 3 agents\n"
    block = Block("python", "docs/x.md", 7, "Example", text)
    with pytest.raises(AssertionError, match=r"^docs/x.md:7: line 3 shows '\(8, 3, 16\)' but printed '\(8, 4, 16\)'\n"):
        test_python_block_runs(block, workdir)
    right = Block("python", "docs/x.md", 7, "Example", text.replace("(8, 3, 16)", "(8, 4, 16)"))
    test_python_block_runs(right, workdir)


def test_a_shown_value_that_is_not_printed_fails(workdir):
    """``type(r.obs)  # torch.Tensor, shape (8, 3, 16)`` shows a value a script never prints."""
    block = Block("python", "docs/x.md", 7, "Example", "x = (8, 4, 16)\ntype(x)  # torch.Tensor, shape (8, 3, 16)\n")
    with pytest.raises(AssertionError, match=r"docs/x.md:7: shown value\(s\) on a line that prints nothing "
                                             r"\(line 2: torch.Tensor, shape \(8, 3, 16\)\)"):
        test_python_block_runs(block, workdir)


def test_the_recording_print_passes_for_the_builtin(workdir):
    """Libraries that look print up again by its name and module (numba, in Tianshou's venv:
    ``getattr(sys.modules[f.__module__], f.__name__) is f``) see the builtin's name; a block
    importing numba once failed with "module '__main__' has no attribute '_recording_print'"."""
    text = ("import builtins, sys\nf = builtins.print\n"
            "assert getattr(sys.modules[f.__module__], f.__name__) is f, (f.__module__, f.__name__)\n"
            "print(1)  # 1\n")
    test_python_block_runs(Block("python", "docs/x.md", 7, "Example", text), workdir)

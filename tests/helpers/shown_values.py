"""The values a doc example shows in its comments, and what the example printed on those lines.

A python block in the docs may show what a line prints, in a comment on the print's line
(``print(r.obs.shape)  # (4, 3, 18)``) or on a comment line right above it. Such a shown
value is checked: tests/project/test_doc_examples.py runs the block through
``RUNNER``, which records what each ``print`` of the block printed, line by line, and
compares it with the value shown. A comment is a shown value when it starts like a
Python value (``->`` may come first): a bracketed group holding a digit, a quote or
``True``/``False``/``None``; a quoted string; a number or ``True``/``False``/``None`` not
followed by a word (``# 11 frames`` is prose); ``torch.`` or ``Tensor``. The value
ends at a ``: `` or ``; `` outside brackets and quotes (what follows explains it). ``...`` in a shown value stands for any text, and runs of spaces count as one. A
value that is only an example (a timing, a machine's choice) says so: ``# e.g. ...``
is not checked. A shown value on a line that prints nothing is an error: a script of
the block would show nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

VALUE_START = re.compile(r"^(?:[(\[{'\"]|-?\d|True\b|False\b|None\b|torch\.|Tensor\b|tensor\(|array\()")
VALUE_CONTENT = re.compile(r"\d|['\"]|\bTrue\b|\bFalse\b|\bNone\b")
SCALAR = re.compile(r"^(?:-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|True|False|None)")
WORD = re.compile(r"^ +(?!True\b|False\b|None\b)[A-Za-z]")  # prose after a number: "11 frames", "True on 2 cores"

# Runs a block as its __main__ and records, per line of the block, what its first print there
# printed to stdout (workers and other files are not recorded). Line numbers stay the block's own.
RUNNER = '''\
import builtins, io, json, os, runpy, sys
script, record = sys.argv[1], sys.argv[2]
sys.argv = [script]
printed, pid, _print = {}, os.getpid(), builtins.print
def _recording_print(*args, **kwargs):
    frame = sys._getframe(1)
    while frame.f_back is not None and "print" in frame.f_code.co_name:  # a library's print over ours (Ray's)
        frame = frame.f_back
    if os.getpid() == pid and frame.f_code.co_filename == script and kwargs.get("file") in (None, sys.stdout):
        text = io.StringIO()
        _print(*args, **{**kwargs, "file": text})
        printed.setdefault(frame.f_lineno, text.getvalue())
    _print(*args, **kwargs)
# Named as the builtin it stands in for: numba (Tianshou's venv) registers print by looking it
# up again as getattr(sys.modules[f.__module__], f.__name__) and fails on any other name.
_recording_print.__name__ = _recording_print.__qualname__ = "print"
_recording_print.__module__ = "builtins"
builtins.print = _recording_print
try:
    runpy.run_path(script, run_name="__main__")
finally:
    with open(record, "w") as f:
        json.dump(printed, f)
'''


@dataclass(frozen=True)
class Shown:
    line: int  # 1-based line of the block holding the comment
    value: str  # the shown value, without ``->`` and the explanation after it
    lines: tuple[int, ...]  # the block's lines of the print it belongs to (empty: none)


def shown_value(comment: str) -> str | None:
    """The value a comment shows, or None if it shows none.

    Examples:
        >>> shown_value("(4, 3, 18) (4, 54): per-agent obs, the critic's state")
        '(4, 3, 18) (4, 54)'
        >>> shown_value("{'episode_limit': True}: cut by the time limit")
        "{'episode_limit': True}"
        >>> print(shown_value("-> 0.53"), shown_value("means over the last 100 episodes"), shown_value("e.g. 1.5"))
        0.53 None None
        >>> [shown_value(c) for c in ("(E, A) integers", "11 frames: one per step", "True on 2 cores", "4 copies")]
        [None, None, None, None]
        >>> shown_value("4 2"), shown_value("False True"), shown_value("Tensor torch.bool")
        ('4 2', 'False True', 'Tensor torch.bool')
    """
    text = re.sub(r"^->\s*", "", comment.strip())
    first = _first_token(text)
    if not VALUE_START.match(text) or (first[:1] in "([{" and not VALUE_CONTENT.search(first)):
        return None
    scalar = SCALAR.match(text)
    if scalar and WORD.match(text[scalar.end():]):
        return None
    for i, ch, depth in _unquoted(text):
        if depth == 0 and text[i:i + 2] in (": ", "; "):
            return text[:i].rstrip()
    return text


def _unquoted(text: str) -> Iterator[tuple[int, str, int]]:
    """Each character outside quoted strings (quotes included), as (index, char, bracket depth
    after it): the one scanner the comment, token and value ends share."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
            continue
        if ch in "'\"":
            quote = ch
            continue
        depth += (ch in "([{") - (ch in ")]}")
        yield i, ch, depth


def _first_token(text: str) -> str:
    """A comment's first token: a bracketed group (with its brackets), a quoted string or a word."""
    for i, ch, depth in _unquoted(text):
        if depth == 0 and ch in ")]}":
            return text[:i + 1]
        if depth == 0 and ch == " ":
            return text[:i]
    return text


def _comment(line: str) -> str | None:
    """The comment of a source line (a ``#`` outside strings), or None."""
    return next((line[i + 1:] for i, ch, _ in _unquoted(line) if ch == "#"), None)


def shown_values(source: str) -> list[Shown]:
    """The shown values of a block, each with the lines of the print it belongs to.

    Examples:
        >>> [(s.line, s.value, s.lines) for s in shown_values("x = 1\\n# (1,)\\nprint((x,))\\nprint(x)  # 2")]
        [(2, '(1,)', (3,)), (4, '2', (4,))]
        >>> [(s.value, s.lines) for s in shown_values("type(x)  # int, 3\\ny = f()  # 0.5")]
        [('0.5', ())]
    """
    lines = source.splitlines()
    prints: dict[int, tuple[int, ...]] = {}  # a line of a print call -> all its lines
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            span = tuple(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            for n in span:
                prints[n] = span
    out = []
    for number, line in enumerate(lines, start=1):
        comment = _comment(line)
        value = None if comment is None else shown_value(comment)
        if value is None:
            continue
        if line.strip().startswith("#"):  # a comment line: it shows the print right below it
            below = number + 1
            while below <= len(lines) and lines[below - 1].strip().startswith("#"):
                below += 1
            out.append(Shown(number, value, prints.get(below, ())))
        else:
            out.append(Shown(number, value, prints.get(number, ())))
    return out


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what ``shown`` shows: ``...`` is any text, runs of spaces are one.

    Examples:
        >>> matches("[ True ... True]", "[ True  True  True]\\n"), matches("(8, 3, 16)", "(8, 4, 16)")
        (True, False)
    """
    def norm(text: str) -> str:
        return " ".join(text.split())

    pattern = ".*".join(re.escape(part) for part in norm(shown).split("..."))
    return re.fullmatch(pattern, norm(printed), re.DOTALL) is not None

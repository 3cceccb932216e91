"""Change a few keys of a YAML file in place, keeping everything else: comments, order, layout.

PyYAML has no round trip (a load and dump loses the comments), so this edits the
lines: a key of a block mapping gets its new value on its own line (its comment
kept), a flow mapping (``kwargs: {N: 3}``) is rewritten on its line, a missing key
is added at the end of its section, and `DELETE` removes a key. The result
is loaded again and must equal the old data with the changes; otherwise
`YamlEditError` says so and nothing is written.

Examples:
    >>> text = "env:\\n  kwargs: {N: 3}  # three agents\\nvec:\\n  backend: dummy  # here\\n  num_workers: 4\\n"
    >>> print(set_keys(text, {("vec", "backend"): "subproc", ("vec", "num_workers"): DELETE,
    ...                       ("env", "kwargs", "engine"): "python"}), end="")
    env:
      kwargs: {N: 3, engine: python}  # three agents
    vec:
      backend: subproc  # here
"""

from __future__ import annotations

import copy
import re
from typing import Any, Mapping

import yaml

DELETE = object()  # as a value in set_keys: remove the key
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*)\s*:(?P<rest>.*)$")


class YamlEditError(ValueError):
    """The file's layout is one this editor cannot change safely."""


def scalar(value: Any) -> str:
    """A value in YAML flow style, on one line."""
    return yaml.safe_dump([value], default_flow_style=True, sort_keys=False, width=10**6).strip()[1:-1]


def _split_comment(rest: str) -> tuple[str, str]:
    """``' dummy  # here'`` -> (``'dummy'``, ``'  # here'``); a ``#`` inside quotes is no comment."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] in " \t"):
            value = rest[:i].rstrip()
            return value.strip(), rest[len(value):].rstrip("\n")
    return rest.strip(), ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(lines: list[str], start: int, end: int, indent: int) -> int:
    """The end of the lines after ``start`` indented deeper than ``indent`` (a key's nested block)."""
    i = start + 1
    last = start
    while i < end:
        if _is_content(lines[i]):
            if _indent(lines[i]) <= indent:
                break
            last = i
        i += 1
    return last + 1


def _new_lines(key: str, value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping) and value:
        out = [f"{pad}{key}:"]
        for k, v in value.items():
            out += _new_lines(str(k), v, indent + 2)
        return out
    return [f"{pad}{key}: {scalar(value)}"]


def _nest(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _edit(lines: list[str], start: int, end: int, parent_indent: int, path: tuple[str, ...], value: Any) -> None:
    """Set ``path`` to ``value`` in the block mapping on ``lines[start:end]`` (whose keys sit deeper than ``parent_indent``)."""
    content = [i for i in range(start, end) if _is_content(lines[i])]
    indent = _indent(lines[content[0]]) if content else parent_indent + 2
    if start == 0 and parent_indent < 0:
        indent = 0
    key = path[0]
    for i in content:
        m = _KEY.match(lines[i])
        if not m or len(m.group("indent")) != indent or m.group("key") != key:
            continue
        body, comment = _split_comment(m.group("rest"))
        nested_end = _block_end(lines, i, end, indent)
        if len(path) == 1:
            if value is DELETE:
                del lines[i:nested_end]
            else:
                lines[i:nested_end] = [f"{' ' * indent}{key}: {scalar(value)}{comment}"]
            return
        if not body:  # a nested block mapping
            _edit(lines, i + 1, nested_end, indent, path[1:], value)
            return
        if not body.startswith("{"):
            raise YamlEditError(f"{'.'.join(path)}: {key} holds {body!r}, not a mapping")
        mapping = yaml.safe_load(body) or {}
        node = mapping
        for part in path[1:-1]:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        lines[i] = f"{' ' * indent}{key}: {scalar(mapping)}{comment}"
        return
    if value is DELETE:
        return  # nothing to remove
    at = content[-1] + 1 if content else start
    if content:
        at = _block_end(lines, content[-1], end, indent)
    lines[at:at] = _new_lines(key, _nest(path[1:], value), indent)


def _expected(data: Any, updates: Mapping[tuple[str, ...], Any]) -> Any:
    data = copy.deepcopy(data) if isinstance(data, dict) else {}
    for path, value in updates.items():
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise YamlEditError(f"{'.'.join(path)}: {part} holds {node!r}, not a mapping")
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return data


def set_keys(text: str, updates: Mapping[tuple[str, ...], Any]) -> str:
    """``text`` with each key path of ``updates`` set to its value (or removed: `DELETE`).

    Raises `YamlEditError` when the edited text would not load as the old
    data with these changes (a layout this editor does not handle).
    """
    lines = text.splitlines()
    for path, value in updates.items():
        _edit(lines, 0, len(lines), -1, tuple(path), value)
    new = "\n".join(lines) + "\n"
    expected = _expected(yaml.safe_load(text), updates)
    try:
        got = yaml.safe_load(new)
    except yaml.YAMLError as exc:
        raise YamlEditError(f"editing the keys {sorted('.'.join(p) for p in updates)} broke the YAML: {exc}") from None
    if got != expected:
        raise YamlEditError(f"could not set {sorted('.'.join(p) for p in updates)} in this file's layout")
    return new

"""CPU time and memory of this process and its child processes (its worker processes).

Read from ``/proc`` on Linux, no psutil needed: CPU time is ``utime + stime`` of each
process of the tree (a process's threads included), memory the sum of each
process's PSS (``/proc/<pid>/smaps_rollup``: pages shared between the main process
and forked workers are split between them, not counted twice), else its RSS.
Elsewhere only this process is seen (`tree_pids` is then just it).

Examples:
    >>> before = cpu_seconds(tree_pids())
    >>> _ = sum(i * i for i in range(10**5))
    >>> cpu_seconds(tree_pids()) >= before
    True
    >>> size, kind = memory(tree_pids())
    >>> size > 0 and kind in ("PSS", "RSS", "max RSS")
    True
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROC = Path("/proc")


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (over all its threads), from /proc."""
    children: list[int] = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return children
    for task in tasks:
        try:
            children.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:  # the thread ended, or a kernel without CONFIG_PROC_CHILDREN
            continue
    return children


def tree_pids(pid: int | None = None) -> list[int]:
    """``pid`` (default: this process) and all its descendants that are alive now."""
    root = os.getpid() if pid is None else pid
    if not sys.platform.startswith("linux"):
        return [root]
    seen, todo = [root], [root]
    while todo:
        for child in _children(todo.pop()):
            if child not in seen:
                seen.append(child)
                todo.append(child)
    return seen


def _stat_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds (0.0 if it is gone)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return 0.0
    fields = text.rpartition(")")[2].split()  # after the command name, which may hold spaces
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds used so far by ``pids`` (this process counted with its reaped children)."""
    total = 0.0
    for pid in pids:
        if pid == os.getpid():
            t = os.times()
            total += t.user + t.system + t.children_user + t.children_system
        else:
            total += _stat_cpu(pid)
    return total


def _kib(path: Path, field: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory(pids: list[int]) -> tuple[int, str]:
    """Bytes of memory of ``pids`` and how it was measured: ``PSS`` (summed), ``RSS`` (summed:
    shared pages counted once per process) or ``max RSS`` (this process's peak, off Linux)."""
    if not sys.platform.startswith("linux"):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak * (1 if sys.platform == "darwin" else 1024), "max RSS"  # macOS counts bytes, others KiB
    pss = [_kib(PROC / str(pid) / "smaps_rollup", "Pss") for pid in pids]
    if all(v is not None for v in pss):
        return sum(v for v in pss if v is not None) * 1024, "PSS"
    rss = [_kib(PROC / str(pid) / "status", "VmRSS") or 0 for pid in pids]
    return sum(rss) * 1024, "RSS"

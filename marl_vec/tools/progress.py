"""Progress of a loop of steps: a tqdm bar on a terminal, a few plain lines in a log.

In a log file a tqdm bar leaves carriage-return frames (``1999/2000``) and blank
lines, so when the stream is not a terminal this prints a plain line at each
quarter of the run (and at least once a minute) instead.

Examples:
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(4, "dummy, 2 envs", stream=out) as bar:
    ...     for _ in range(4):
    ...         bar.update()
    >>> print(out.getvalue().splitlines()[0])
    dummy, 2 envs: 1/4 steps (25%) in ... s
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


PLAIN_LINES = 4  # plain lines per run (one at each quarter), besides the time-based ones
PLAIN_MAX_SILENCE = 60.0  # seconds: a long run still shows it is alive


class Progress:
    """Counts steps towards ``total`` and shows it: tqdm on a terminal, plain lines elsewhere.

    ``enabled=False`` shows nothing. ``stream`` defaults to stderr, where tqdm draws.
    """

    def __init__(self, total: int, label: str, enabled: bool = True, stream: TextIO | None = None, unit: str = "step"):
        self.total = total
        self.label = label
        self.unit = unit
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.postfix: dict[str, Any] = {}
        self._bar: Any = None
        self._plain = False
        if not enabled:
            return
        isatty = getattr(self.stream, "isatty", None)
        if callable(isatty) and isatty():
            from tqdm.auto import tqdm  # on first use: it loads asyncio (~4 MB), which workers never need

            self._bar = tqdm(total=total, unit=unit, desc=label, leave=False, file=self.stream)
        else:
            self._plain = True
            self._start = self._last_line = time.perf_counter()
            self._next_mark = 1

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._plain:
            now = time.perf_counter()
            mark = self.done * PLAIN_LINES // max(self.total, 1)
            if mark >= self._next_mark or now - self._last_line >= PLAIN_MAX_SILENCE:
                self._next_mark = mark + 1
                self._last_line = now
                self._line(now)

    def set_total(self, total: int) -> None:
        """A new total: for a run that ends by the clock, an estimate that improves as it goes."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def finish(self) -> None:
        """End a run whose total was an estimate (one that ends by the clock): what was done
        becomes the total, so the last line says 100% (plain lines: printed unless it was)."""
        self.set_total(self.done)
        if self._plain and self._next_mark <= PLAIN_LINES:
            self._next_mark = PLAIN_LINES + 1
            self._line(time.perf_counter())

    def set_postfix(self, **stats: Any) -> None:
        """Figures shown after the count (tqdm's postfix; the end of each plain line)."""
        self.postfix = stats
        if self._bar is not None:
            self._bar.set_postfix(**stats, refresh=False)

    def _line(self, now: float) -> None:
        pct = 100 * self.done // max(self.total, 1)
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        print(f"{self.label}: {self.done}/{self.total} {self.unit}s ({pct}%) in {now - self._start:.1f} s{extra}",
              file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._plain = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""Ctrl-C in tests that run however pytest was launched, also with SIGINT ignored.

A process started with SIGINT ignored (``nohup pytest ... &``, ``trap "" INT``,
some CI runners) passes that to every process it starts, and Python then keeps
it ignored instead of raising KeyboardInterrupt. Tests of Ctrl-C therefore give
the processes they start SIGINT's default (:func:`default_sigint`, as
``preexec_fn``), and a test that interrupts pytest's own process installs
Python's handler for its duration (:func:`python_sigint`).

Example::

    subprocess.Popen([sys.executable, "-m", "marl_vec.tools.cli", "run"], preexec_fn=default_sigint)
    with python_sigint():
        os.kill(os.getpid(), signal.SIGINT)  # raises KeyboardInterrupt
"""

from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator


def default_sigint() -> None:
    """In a child before it runs its program: SIGINT back to its default, so Python makes it KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def python_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process inside the block, then is as it was."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def interrupted(call: Callable[[], object], after: float) -> None:
    """Run ``call()`` with Ctrl-C (SIGINT to this process) after ``after`` s; it must raise KeyboardInterrupt."""
    import os
    import threading

    import pytest

    timer = threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT))
    with python_sigint():  # also when pytest was started with SIGINT ignored
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                call()
        finally:
            timer.cancel()

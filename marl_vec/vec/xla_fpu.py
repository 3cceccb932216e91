"""The float mode envs step in when XLA calls them: denormals kept, as in plain Python.

XLA's CPU runtime runs a compiled program with denormals flushed to zero (the
FTZ and DAZ bits of the x86 MXCSR register; FZ of the ARM FPCR), and a host
callback runs in that thread with the same bits set. An env stepped there (in
this process: DummyVecEnv, the block of a SubprocVecEnv that steps in the main
process) would compute slightly different numbers from the same env stepped
from Python: MPE's observations differ in values below 1.2e-38, found by
tests/backends/test_xla_parity.py. `python_float_mode` clears those bits
around a host call and restores XLA's after it, through libc's
``fegetenv``/``fesetenv`` (glibc on x86-64 and aarch64); elsewhere it does nothing.

Examples:
    >>> import numpy as np
    >>> with python_float_mode():
    ...     float(np.float32(1e-38) * np.float32(1e-7)) > 0
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import platform
import sys
import threading
from typing import Iterator

__all__ = ["python_float_mode"]

# (byte offset of the control register in glibc's fenv_t, the flush bits in it)
_LAYOUTS = {"x86_64": (28, 0x8040), "AMD64": (28, 0x8040), "aarch64": (0, 1 << 24), "arm64": (0, 1 << 24)}


def _libm() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux") or platform.machine() not in _LAYOUTS:
        return None
    name = ctypes.util.find_library("m")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBM = _libm()
if _LIBM is not None:
    _LIBM.fegetenv.argtypes = _LIBM.fesetenv.argtypes = [ctypes.c_void_p]
_OFFSET, _FLUSH = _LAYOUTS.get(platform.machine(), (0, 0))
_local = threading.local()  # per thread: the two fenv_t buffers, made once (a call costs a few us)


def _buffers() -> tuple[ctypes.Array, ctypes.Array]:
    pair = getattr(_local, "pair", None)
    if pair is None:  # fenv_t is 32 bytes (x86-64) or 8 (aarch64)
        pair = _local.pair = (ctypes.create_string_buffer(64), ctypes.create_string_buffer(64))
    return pair


@contextlib.contextmanager
def python_float_mode() -> Iterator[None]:
    """Run the block with denormals kept (the mode Python starts in); restore the caller's mode after."""
    if _LIBM is None:
        yield
        return
    saved, plain = _buffers()
    _LIBM.fegetenv(saved)
    word = int.from_bytes(saved.raw[_OFFSET:_OFFSET + 4], sys.byteorder)
    if not word & _FLUSH:  # nothing to change (called from Python, not from XLA)
        yield
        return
    ctypes.memmove(plain, saved, 64)
    plain[_OFFSET:_OFFSET + 4] = (word & ~_FLUSH).to_bytes(4, sys.byteorder)
    _LIBM.fesetenv(plain)
    try:
        yield
    finally:
        _LIBM.fesetenv(saved)

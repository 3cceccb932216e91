"""Threads of this process that make ``fork`` unsafe: every native thread but the main one
and OpenBLAS's idle workers.

A forked child has only the thread that forked; a lock another thread held at that
moment (in malloc, in a thread pool, in the interpreter) stays locked in the child
forever. Python threads are native threads, and so are those of JAX/XLA (about 16
after its first computation), torch's intra-op pool (``torch.set_num_threads``, its
first parallel op), EnvPool's and ale-py's ``AtariVectorEnv`` workers, and OpenMP
pools: ``threading.active_count()`` sees none of the native ones, ``/proc/self/task``
sees them all.

One kind is left out: the worker threads of OpenBLAS, which numpy (and scipy) load at
import, one per core but one. OpenBLAS shuts its pool down before a fork (its own
``pthread_atfork`` handler) and starts it again at the next BLAS call, so forking
beside it is safe; counting it would make every process that imported numpy look
threaded. Its size is read from each loaded OpenBLAS library (``blas_server_avail``,
``blas_num_threads``); where that cannot be read, none are left out (the safe side).

Examples:
    >>> import numpy  # its OpenBLAS pool is not counted
    >>> threads_beside_main() >= 0
    True
"""

from __future__ import annotations

import ctypes
import os

_libraries: dict[str, ctypes.CDLL | None] = {}  # path -> the loaded OpenBLAS (None: not readable)


def native_threads() -> int:
    """Native threads of this process (the main one included); 1 where ``/proc`` is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def openblas_workers() -> int:
    """Worker threads that the OpenBLAS libraries loaded in this process run now."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return 0
    workers = 0
    for path in paths:
        if not path.startswith("/"):
            continue
        if path not in _libraries:
            try:
                _libraries[path] = ctypes.CDLL(path)  # already loaded: a handle to it, nothing runs
            except OSError:
                _libraries[path] = None
        library = _libraries[path]
        try:
            running = ctypes.c_int.in_dll(library, "blas_server_avail").value if library else 0
            size = ctypes.c_int.in_dll(library, "blas_num_threads").value if library else 1
        except ValueError:  # an OpenBLAS that does not export them: its threads count
            continue
        if running:
            workers += max(0, size - 1)  # the pool runs blas_num_threads - 1 threads beside the caller
    return workers


def threads_beside_main() -> int:
    """Native threads other than the main one and OpenBLAS's idle workers (see the module doc)."""
    return max(0, native_threads() - 1 - openblas_workers())

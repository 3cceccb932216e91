"""The arrays that ``copy=True`` results hand out: fresh for the caller, cheap for large ones.

A copy into newly allocated memory costs more than the copy: the kernel zeroes
each fresh page on its first write, and glibc returns large freed blocks to the
kernel, so a batch of pixel or many-agent observations (megabytes per step) paid
for its memory twice on every step. Measured on MAgent2 gather (4 envs, 8.9 MB
of observations and 3.2 MB of state a step): 4.6 ms a step for the returned
copies and zeros, 0.4 ms for the copies themselves.

- `Recycler` copies a buffer into the memory of an earlier copy of it
  once the caller has dropped every reference to that copy (its views, and the
  objects that borrow its memory such as memoryviews and ``torch.from_numpy``
  tensors, all hold one), else into a new array. A result the caller still
  holds is never written.
- `fresh_zeros` gives zeros that cost nothing until written: large ones
  are anonymous memory maps, whose pages the kernel supplies (zeroed) on first
  touch, never taken from memory a copy used.

Arrays below `LARGE` bytes are allocated as usual: for them the allocator
is the cheapest way.

Examples:
    >>> import numpy as np
    >>> buffer, recycler = np.ones((512, 512)), Recycler()
    >>> first = recycler.copy(buffer)
    >>> second = recycler.copy(buffer)  # `first` is still referenced: new memory
    >>> np.shares_memory(first, second)
    False
    >>> del first
    >>> third = recycler.copy(buffer)   # reuses the memory `first` had
    >>> fresh_zeros((512, 512), np.float64).any()
    False
"""

from __future__ import annotations

import functools
import math
import mmap
import sys
from typing import Any, Callable

import numpy as np

# Arrays of at least this many bytes are recycled, and their zeros memory-mapped.
LARGE = 1 << 16


def _references_of_unheld() -> int:
    """``sys.getrefcount`` of an array referenced only by a list slot, read as
    `Recycler.copy` reads it (interpreters differ in what the call adds)."""
    held = [np.empty(1)]
    return sys.getrefcount(held[0])


_UNHELD = _references_of_unheld()


class Recycler:
    """Copies of one buffer field, reusing the memory of copies nobody references.

    Args:
        depth: earlier copies looked at, newest kept (a caller that keeps every
            result, such as a rollout storing observations, gets new arrays, as
            without recycling; two are enough for ``r = venv.step(a)``, which
            holds the last result while the next is made).
    """

    def __init__(self, depth: int = 3):
        self.depth = depth
        self._held: list[np.ndarray] = []

    def copy(self, src: np.ndarray) -> np.ndarray:
        """A copy of ``src`` that shares memory with no array the caller can reach."""
        if src.nbytes < LARGE:
            return src.copy()
        held = self._held
        for i in range(len(held)):
            if sys.getrefcount(held[i]) <= _UNHELD:
                out = held[i]
                if out.shape == src.shape and out.dtype == src.dtype:
                    np.copyto(out, src)
                    return out
        out = src.copy()
        if len(held) >= self.depth:
            del held[0]
        held.append(out)
        return out


def copier_for(array: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """How copies of ``array`` (a buffer field) are made: a `Recycler` for large
    ones, else ``ndarray.copy`` (the allocator is the cheapest way for small ones)."""
    if array is not None and array.nbytes >= LARGE and not array.dtype.hasobject:
        return Recycler().copy
    return np.ndarray.copy


def fresh_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Writable zeros of their own memory; large ones untouched until written.

    ``np.zeros`` of a large array may be served from memory the allocator kept
    (a freed copy), which it must then clear: a full write per call.
    """
    return zeros_maker(shape, dtype)()


def zeros_maker(shape: tuple[int, ...], dtype: Any) -> Callable[[], np.ndarray]:
    """A function giving `fresh_zeros` of ``shape`` and ``dtype`` (decided once,
    for a caller that needs them at every step)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if dtype.hasobject:  # object arrays (Text, Graph, ...) cannot live in a map; blank is None (see blank_rows)
        return functools.partial(np.full, shape, None, dtype)
    if nbytes < LARGE:
        return functools.partial(np.zeros, shape, dtype)
    return functools.partial(_mapped_zeros, shape, dtype, nbytes)


def blank_rows(array: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``array`` (a copy the caller owns) with the rows that boolean mask ``rows`` selects
    blanked: zeros (False), or None in object arrays (Text, Graph, ... leaves). The one
    rule for ``final_*`` rows where ``done`` is False. None: nothing to blank.

    ```pycon
    >>> blank_rows(np.ones((3, 2)), np.array([True, False, True]))[:, 0].tolist()
    [0.0, 1.0, 0.0]
    ```
    """
    if rows is not None:
        array[rows] = None if array.dtype.hasobject else 0
    return array


def _mapped_zeros(shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> np.ndarray:
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype).reshape(shape)


def zeros_makers(arrays: list[np.ndarray | None]) -> Callable[[], list[np.ndarray | None]]:
    """A function giving `fresh_zeros` like each of ``arrays`` (None stays None) at once.

    The large ones share one memory map, each its own page-aligned part (they share no
    memory). A map whose arrays the caller has dropped (as `Recycler` sees it) is
    used again, its pages handed back to the kernel (``madvise(MADV_DONTNEED)``: they
    read as zeros again and cost nothing until touched). A new map and its unmapping
    cost 20 us a step, and unmapping interrupts every thread of the process (a native
    engine's workers) to flush their address translations; this costs 1-2 us.
    """
    large = [a is not None and a.nbytes >= LARGE and not a.dtype.hasobject for a in arrays]
    if not any(large):
        makers = [None if a is None else zeros_maker(a.shape, a.dtype) for a in arrays]
        return lambda: [None if make is None else make() for make in makers]
    page = mmap.PAGESIZE
    parts, offset = [], 0
    for a, big in zip(arrays, large):
        if big:
            assert a is not None
            parts.append((offset, a.shape, a.dtype))
            offset += -(-a.nbytes // page) * page
    maps = _ZeroMaps(parts, offset)
    small = [None if a is None or big else zeros_maker(a.shape, a.dtype) for a, big in zip(arrays, large)]

    def make() -> list[np.ndarray | None]:
        mapped = iter(maps.take())
        return [next(mapped) if big else (None if maker is None else maker()) for big, maker in zip(large, small)]
    return make


class _ZeroMaps:
    """Memory maps of zeros, each holding one array per part, reused once the caller
    has dropped all of a map's arrays.

    Args:
        parts: (byte offset, shape, dtype) of each array in a map.
        total: a map's size in bytes (a whole number of pages).
        depth: maps kept for reuse (as `Recycler`'s ``depth``).
    """

    def __init__(self, parts: list[tuple[int, tuple[int, ...], np.dtype]], total: int, depth: int = 3):
        self.parts, self.total, self.depth = parts, total, depth
        self._held: list[tuple[mmap.mmap, list[np.ndarray]]] = []

    def take(self) -> list[np.ndarray]:
        """Zero arrays, one per part, sharing memory with no array the caller can reach."""
        held = self._held
        for shared, arrays in held:
            if all(sys.getrefcount(arrays[k]) <= _UNHELD for k in range(len(arrays))):
                if _DONTNEED is None:
                    for k in range(len(arrays)):
                        arrays[k].fill(0)
                else:
                    shared.madvise(_DONTNEED)  # untouched pages: nearly free; written ones read as zeros again
                return arrays
        shared = mmap.mmap(-1, self.total, **_PRIVATE)  # private: MADV_DONTNEED zeroes it (a shared one keeps its data)
        # Each array is made straight on the map (no reshape of a flat view), so that every
        # view a caller takes of it has it as its base: the reference count then sees them.
        arrays = [np.ndarray(shape, dtype=dtype, buffer=shared, offset=start) for start, shape, dtype in self.parts]
        if len(held) >= self.depth:
            del held[0]
        held.append((shared, arrays))
        return arrays


# Linux drops a private anonymous map's pages on MADV_DONTNEED: they read as zeros again.
# Elsewhere (macOS) it is only advice, so the arrays are cleared by hand.
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None) if sys.platform.startswith("linux") else None
_PRIVATE: dict[str, int] = {"flags": mmap.MAP_PRIVATE} if _DONTNEED is not None else {}

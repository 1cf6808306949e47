"""Keep the resident size of memory-mapped index files bounded.

Pages of a memory-mapped file that a process touches count in its resident
size until it unmaps them. Estimating candidates touches signature rows
spread over a matrix of hundreds of megabytes at 10^6 documents; after each
batch, :func:`release` tells the kernel this process no longer needs the
pages (``MADV_DONTNEED``): they stay in the page cache, but stop counting
against the process.
"""

from __future__ import annotations

import mmap

import numpy as np


def _mapping(arr: np.ndarray):
    while arr is not None:
        m = getattr(arr, "_mmap", None)
        if m is not None:
            return m
        arr = getattr(arr, "base", None)
        if isinstance(arr, mmap.mmap):
            return arr
    return None


def release(*arrays: np.ndarray) -> None:
    """Drop the pages of the memory maps behind ``arrays`` from this process (not from the cache)."""
    for arr in arrays:
        m = _mapping(arr)
        if m is not None and hasattr(m, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            try:
                m.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass

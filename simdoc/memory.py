"""Keep the resident size of memory-mapped index files bounded.

Pages of a memory-mapped file that a process touches count in its resident
size until it unmaps them. Estimating candidates touches signature rows
spread over a matrix of hundreds of megabytes at 10^6 documents; after each
batch, :func:`release` tells the kernel this process no longer needs the
pages (``MADV_DONTNEED``): they stay in the page cache, but stop counting
against the process.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
from collections.abc import Iterator

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


def discard(arr: np.ndarray) -> bool:
    """Free the whole pages that ``arr``'s bytes fill in the file mapped (shared, writable) behind
    it, and the file's blocks under them: a hole is punched (``MADV_REMOVE``), the file reads as
    zeros there. For rows of an unlinked file that are no longer needed. Whether it was done
    (False: not mapped, not writable, or a file system that cannot punch holes; then the mapping's
    pages are only dropped from this process, as :func:`release` does).

    The pages freed this way are taken again at once by the next file written, warm: on a virtual
    machine whose free memory the host takes back, fresh page-cache pages cost about ten times as
    much to write (the signature matrix of 10^6 records, 512 MB, gathered from the staging files:
    1.6 s of pwrite into fresh pages, 0.2 s into the staging files' pages)."""
    m = _mapping(arr)
    if m is None or not hasattr(mmap, "MADV_REMOVE") or not hasattr(m, "madvise") or not arr.flags.c_contiguous:
        release(arr)
        return False
    try:
        view = np.frombuffer(m, dtype=np.uint8)
        start = arr.ctypes.data - view.ctypes.data
        del view
        page = mmap.PAGESIZE
        a = -(-start // page) * page
        b = (start + arr.nbytes) // page * page
        if 0 <= a < b <= len(m):
            m.madvise(mmap.MADV_REMOVE, a, b - a)
    except (OSError, ValueError, TypeError):
        release(arr)
        return False
    return True


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 1 << 17  # its initial value: blocks of 128 KiB or more are mapped apart


def return_freed_blocks() -> None:
    """Keep glibc giving large blocks (numpy arrays) back to the system as soon as they are freed.

    glibc maps a block of 128 KiB or more apart, and unmaps it when freed; but
    each time it frees one it raises that threshold to the block's size (up to
    32 MiB), so arrays of a few MB made after that come from the heap, and the
    holes they leave there stay resident. The docs table of 10^6 records is
    built from such arrays, one task's columns at a time: measured on that
    build, the main process kept ~450 MB more without this. Setting the
    threshold fixes it at its initial value. Elsewhere than glibc, nothing.
    """
    _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


@contextlib.contextmanager
def heap_reused() -> Iterator[None]:
    """Within: freed blocks of up to 32 MiB stay in the heap and are reused (as in a worker,
    :func:`reuse_freed_blocks`); after: blocks of 128 KiB or more are mapped apart again
    (:func:`return_freed_blocks`), glibc's trim threshold is its default again, and the free
    pages of the heap go back to the system (``malloc_trim``): what stays resident is what is
    still in use.

    For a burst of the main process that makes and drops many arrays of a few MB
    one after the other (the join of a big file's ranges: 10^6 documents' columns
    concatenated, sorted and taken), each of which would otherwise be fresh pages,
    zeroed by the kernel. Elsewhere than glibc, nothing.
    """
    tuned = reuse_freed_blocks()
    try:
        yield
    finally:
        if tuned:
            _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
            _mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
            _malloc_trim()


def _malloc_trim() -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        trim = _libc().malloc_trim
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        trim(0)


M_TRIM_THRESHOLD = -1
TRIM_THRESHOLD = 1 << 17  # glibc's default: free memory at the top of the heap beyond this goes back
WORKER_MMAP_THRESHOLD = 32 << 20  # the most glibc's own threshold rises to
WORKER_TRIM_THRESHOLD = 64 << 20  # twice that, as glibc sets it when it raises the threshold


def reuse_freed_blocks() -> bool:
    """In a worker process: let glibc reuse freed blocks of up to 32 MiB from the heap again.

    A worker forked from the main process inherits :func:`return_freed_blocks`:
    every block of 128 KiB or more is then mapped when made and unmapped when
    freed, and a task's texts, lines and rows (a few MB each, made anew by
    every task) are fresh pages each time, zeroed by the kernel: at 10^6
    records, half of all page faults of a build, system time on the cores
    that sign. A worker's memory is bounded by its task, so it keeps freed
    blocks for the next task instead, as glibc does by itself once it has
    raised its threshold (to at most 32 MiB). Elsewhere than glibc, nothing
    (False).
    """
    return _mallopt(M_MMAP_THRESHOLD, WORKER_MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD, WORKER_TRIM_THRESHOLD)


def _mallopt(param: int, value: int) -> bool:
    """glibc's mallopt(param, value); False where there is none, or it refused."""
    import ctypes

    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(param, value))


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library, loaded once (OSError where there is none to load): the process's own symbols,
    where the C library's are (``find_library`` ran ``ldconfig -p``: a process and ~3 ms of
    every command's start, on Linux)."""
    import ctypes

    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # no dlopen(NULL) here (Windows): the library by its name
        import ctypes.util

        return ctypes.CDLL(ctypes.util.find_library("c") or None)

"""Keep the resident size of memory-mapped index files bounded.

Pages of a memory-mapped file that a process touches count in its resident
size until it unmaps them, and the kernel maps up to 64 KiB around every
page fault ("fault-around"). Verifying candidates touches rows spread over a
file of many gigabytes, so without help the whole file ends up resident.
After each batch, :func:`release` tells the kernel this process no longer
needs the pages (``MADV_DONTNEED``): they stay in the page cache for the
next batch, but stop counting against the process.
"""

from __future__ import annotations

import mmap
import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from simdoc.errors import UsageError

# Ranges averaging fewer elements than this are gathered with a position array, not sliced:
# below it, one Python-level slice per range costs more than the gather.
_SLICES_PER_GATHER = 64


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


def _backing_file(arr: np.ndarray) -> tuple[str, int] | None:
    """(file name, byte offset of arr[0]) if ``arr`` is a contiguous view of a np.memmap."""
    base = arr
    while base is not None and not isinstance(base, np.memmap):
        base = getattr(base, "base", None)
    if base is None or getattr(base, "filename", None) is None or not arr.flags.c_contiguous:
        return None
    start = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return base.filename, int(base.offset) + start


def is_mapped(arr: np.ndarray) -> bool:
    """Whether ``arr`` is a contiguous view of a file mapped with np.memmap."""
    return _backing_file(arr) is not None


def read_ranges(arr: np.ndarray, starts: np.ndarray, stops: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.concatenate([arr[a:b] for a, b in zip(starts, stops)])``, read without mapping pages.

    For an array mapped from a file, the ranges are read with ``pread``
    into private memory: touching them through the map would make every
    page the kernel maps around them (up to 2 MiB per large page-cache folio
    on recent kernels) count in this process's resident size, so that
    scattered rows of a 1 GB file would bring most of it in. ``out`` (of
    arr's dtype and the total length) is filled and returned if given:
    reusing a buffer spares the page faults of fresh memory. Many scattered
    ranges are read with readahead off, by up to READ_THREADS threads of
    this process (threads that wait on the disk, whatever ``--jobs`` says:
    rows evicted from the page cache come back faster with several reads
    in flight).
    """
    starts = np.asarray(starts, dtype=np.int64)
    stops = np.asarray(stops, dtype=np.int64)
    lens = stops - starts
    if out is None:
        out = np.empty(int(lens.sum()), dtype=arr.dtype)
    elif out.dtype != arr.dtype or len(out) != int(lens.sum()):
        raise ValueError("out has the wrong dtype or length")
    backing = _backing_file(arr)
    if backing is None:
        if len(starts) * _SLICES_PER_GATHER <= len(out):
            # Few long ranges (a worker's whole batch is one): slice copies. A position
            # array for a gather would be 8 bytes written and read per element.
            at = 0
            for a, b in zip(starts.tolist(), stops.tolist()):
                out[at : at + b - a] = arr[a:b]
                at += b - a
        else:
            pos = np.arange(len(out), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens - starts, lens)
            out[:] = arr[pos]
        return out
    path, base = backing
    item = arr.dtype.itemsize
    raw = out.view(np.uint8)
    # Ranges that continue one another (rows taken in order) are read with one call.
    joined = np.flatnonzero(starts[1:] != stops[:-1]) + 1
    run_starts = np.concatenate(([0], joined))
    run_stops = np.append(joined, len(starts))
    keep = run_starts < run_stops
    run_starts, run_stops = run_starts[keep], run_stops[keep]
    offsets = base + starts[run_starts] * item  # where each read starts in the file
    nbytes = (stops[run_stops - 1] - starts[run_starts]) * item
    at = np.cumsum(nbytes) - nbytes  # and in ``raw``
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()

        def read(lo: int, hi: int) -> None:
            for off, n, a in zip(offsets[lo:hi].tolist(), nbytes[lo:hi].tolist(), at[lo:hi].tolist()):
                got = 0
                while got < n:
                    k = os.preadv(fd, [raw[a + got : a + n]], off + got)
                    if k <= 0:
                        raise OSError(f"{path}: short read")
                    got += k

        groups = min(READ_THREADS, len(offsets) // _READS_PER_THREAD)
        if groups < 2:
            read(0, len(offsets))
        else:
            # Scattered rows: a miss should read the row, not the kernel's readahead window
            # around it (on this open file only).
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            # Rows evicted from the page cache come from disk one by one, at ~70 us each here;
            # the disk serves several at once (~3x the reads per second with 8 in flight).
            cuts = np.linspace(0, len(offsets), groups + 1).astype(np.int64).tolist()
            futures = [_reader_pool().submit(read, a, b) for a, b in zip(cuts[:-1], cuts[1:])]
            wait(futures)  # all of them, even if one failed: fd closes below
            for f in futures:
                f.result()
    return out


def prefetch(arr: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> None:
    """Ask the kernel to start reading these ranges of a file-backed array (``POSIX_FADV_WILLNEED``).

    Returns at once; a later :func:`read_ranges` of the same ranges finds
    them cached or on their way. Rows written past the page cache (see
    :mod:`simdoc.direct`) come from disk one small read at a time: asking for
    all of them first puts them all in the disk's queue, instead of the
    READ_THREADS a read_ranges call keeps in flight. A no-op for arrays in
    memory, or where the call is not available.
    """
    backing = _backing_file(arr)
    if backing is None or not hasattr(os, "posix_fadvise") or not len(starts) or not prefetch_enabled():
        return
    path, base = backing
    order = np.argsort(starts, kind="stable")
    starts = np.asarray(starts, dtype=np.int64)[order]
    stops = np.asarray(stops, dtype=np.int64)[order]
    item = arr.dtype.itemsize
    # Ranges closer than a page are asked for together.
    gap = np.flatnonzero(starts[1:] * item - stops[:-1] * item > _PAGE) + 1
    first = np.concatenate(([0], gap))
    last = np.append(gap, len(starts)) - 1
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for a, b in zip((base + starts[first] * item).tolist(), (base + stops[last] * item).tolist()):
            if b > a:
                os.posix_fadvise(fd, a, b - a, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass  # only a hint
    finally:
        os.close(fd)


_ON = ("", "on", "1", "yes", "true")
_OFF = ("off", "0", "no", "false")


def prefetch_enabled() -> bool:
    """Whether :func:`prefetch` asks the kernel for anything: ``SIMDOC_PREFETCH`` on (default) or off."""
    value = os.environ.get("SIMDOC_PREFETCH", "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise UsageError(
        f"SIMDOC_PREFETCH must be 'on' or 'off', got {os.environ['SIMDOC_PREFETCH']!r}",
        hint="unset it to let simdoc ask for rows ahead (see 'The index directory' in the README)",
    )


_PAGE = 4096
READ_THREADS = 8  # reads of one read_ranges call in flight at once
_READS_PER_THREAD = 16  # fewer reads than this per thread are not worth handing out
_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _reader_pool() -> ThreadPoolExecutor:
    """The process's reader threads (made anew in a forked child: threads do not survive fork)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(READ_THREADS, thread_name_prefix="simdoc-read"))
    return _POOL[1]

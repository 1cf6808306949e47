"""Writing index rows past the page cache (``O_DIRECT``), for indexes too large to stay cached.

A buffered write copies each byte into a new page-cache page. On the
benchmark VM a page the host has to supply afresh costs ~10 us, so the
page cache takes in a new index at ~0.7-1.5 GB/s of CPU time; at 10^6
documents (15 GB of rows) that was a fifth of the shingle stage's CPU
(perf), and the index evicted the corpus it was read from. What is
seldom read back (the counts), and hashes past what memory could keep
cached (see :func:`direct_from`), are written with ``O_DIRECT`` from a
reused, page-aligned buffer instead: no page cache, no copy into it, and
the disk write is done when ``pwrite`` returns. The hashes of an index
that fits easily in memory stay buffered, so that the verification step
and later commands find them cached.

Only whole aligned pages go direct; a piece's partial first and last
pages, shared with the neighbouring pieces (written by other workers),
are written through the page cache, so no page is ever written both ways.
Where the file system refuses ``O_DIRECT`` (tmpfs, some network file
systems), everything is written buffered; the bytes are the same.
"""

from __future__ import annotations

import contextlib
import errno
import os
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from simdoc.errors import UsageError

ALIGN = 4096  # file offsets, lengths and buffer addresses of direct writes
MIN_DIRECT = 1 << 16  # smaller aligned middles are not worth a second descriptor
STAGING_BYTES = 8 << 20

_staging: np.ndarray | None = None  # this process's aligned buffer
_refused: set[int] = set()  # st_dev of file systems that refused O_DIRECT in this process


def direct_from() -> tuple[int | None, int | None]:
    """The first shingle whose hashes, and whose counts, are written direct (None: never).

    * Counts go direct from the start: they are read back only to verify bag
      Jaccard (``--measure bag``), to compare documents with equal signatures
      (exact copies; their rows are prefetched, see :func:`simdoc.memory.prefetch`),
      or to update or check the index.
    * Hashes, which every verification reads, go direct past an eighth of
      physical memory (3 GB here, ~250,000 documents of 3 KB). An index
      that size does not stay cached next to its corpus until it is read
      back, so its rows would cost a new page-cache page each twice over;
      verification asks for direct-written rows ahead (see
      :class:`simdoc.similarity._RowsAhead`). Measured at 10^6 documents
      (12.3 GB of hashes): 68.0–74.5 s against 80.0 s with the hashes buffered.

    ``SIMDOC_DIRECT_FROM`` (a shingle number for both, or ``off``) overrides this.
    """
    forced = os.environ.get("SIMDOC_DIRECT_FROM")
    if forced is not None:
        if forced.strip().lower() in ("", "off", "none"):
            return None, None
        try:
            at = int(forced)
        except ValueError:
            raise UsageError(
                f"SIMDOC_DIRECT_FROM must be a shingle number or 'off', got {forced!r}",
                hint="unset it to let simdoc choose (see 'The index directory' in the README)",
            ) from None
        return max(0, at), max(0, at)
    if not hasattr(os, "O_DIRECT"):
        return None, None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None, 0
    return memory // 8 // 4, 0


def aligned_middle(start: int, stop: int, first_direct: int) -> tuple[int, int]:
    """The byte range [a, b) of [start, stop) to write direct: whole pages at or past first_direct.

    Empty (a == b) when it would be shorter than MIN_DIRECT.
    """
    a = -(-max(start, first_direct) // ALIGN) * ALIGN
    b = stop // ALIGN * ALIGN
    if b - a < MIN_DIRECT:
        return stop, stop
    return a, b


def open_direct(path: str) -> int | None:
    """A write descriptor with O_DIRECT for path, or None where its file system refuses one."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    if dev in _refused:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            _refused.add(dev)
            return None
        raise


def _buffer() -> np.ndarray:
    global _staging
    if _staging is None:
        raw = np.empty(STAGING_BYTES + ALIGN, np.uint8)
        skip = -raw.ctypes.data % ALIGN
        _staging = raw[skip : skip + STAGING_BYTES]
    return _staging


def start_direct(fd: int, data: memoryview, offset: int) -> Future:
    """:func:`pwrite_direct` on this process's writer thread; the future's result is its answer.

    The write waits on the disk, not the CPU: the caller writes its buffered
    parts meanwhile. ``data`` must stay unchanged until the future is done.
    """
    global _WRITER
    if _WRITER is None or _WRITER[0] != os.getpid():  # threads do not survive fork
        _WRITER = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="simdoc-direct"))
    return _WRITER[1].submit(pwrite_direct, fd, data, offset)


_WRITER: tuple[int, ThreadPoolExecutor] | None = None


def pwrite_direct(fd: int, data: memoryview, offset: int) -> bool:
    """Write ``data`` (a whole number of pages) at ``offset`` through the aligned buffer.

    False if the device refuses the alignment (nothing to undo: the caller
    writes the same bytes buffered).
    """
    staging = _buffer()
    src = np.frombuffer(data, np.uint8)
    done = 0
    while done < len(src):
        n = min(len(src) - done, len(staging))
        staging[:n] = src[done : done + n]
        view = memoryview(staging[:n])
        while view:
            try:
                w = os.pwrite(fd, view, offset + done)
            except OSError as exc:
                if exc.errno == errno.EINVAL:
                    return False
                raise
            view = view[w:]
            done += w
    return True


def close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)

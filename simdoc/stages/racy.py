"""Racily clean files: when a file's stat cannot prove that it was not edited after it was read.

A scan trusts a file whose stat is the one recorded (size, modification and
change times, inode, device; :meth:`simdoc.corpus.walk.FileEntry.stat`).
The change time is set by the file system on every write and every change
of the times, so a user cannot set it back as ``touch -d``, rsync or tar
set the modification time back. It tells an edit unless the edit falls in
the same tick of the file system's clock as the change time recorded:
possible only if that clock was still in that tick when the file was read.
Such a file is *racily clean* (git's term): it is read again at the next
scan and its digest compared, as git re-hashes an index entry that is not
older than its index file.

The rule uses the file system's own times, never this host's clock, which
may disagree with the clock that stamps the files (an NFS server, a
crawler writing on another host): see :func:`racy`. Which times are known
to the file system's clock before the files are read:

* the change times of the files listed (:func:`newest_ctimes`): each was
  stamped by that clock before the listing saw it, and the listing ends
  before the first file is read;
* on the index's own file system, the change time the scan gives the index's
  ``lock`` file just before it lists the corpus (:func:`index_clock`).

A file more than RACY_NS older than the newest of these on its device is
proven clean; any other is racy. Without an index on the corpus's file
system, the files changed within RACY_NS of the latest change there are
read again at every scan (their digest only) until something newer is
written there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from simdoc.corpus.objects import UNKNOWN, is_url
from simdoc.corpus.walk import Entries, FileEntry

RACY_NS = 2_000_000_000  # time granularity we do not trust (FAT has 2 s)


def index_clock(index: Path) -> tuple[int, int] | None:
    """(device, time) read from the file system of the index: the change time of its ``lock``
    file, set to that file system's now (None if it cannot be set: then it is not used).

    Called by a writer, which holds the lock file (a regular file of its own).
    """
    lock = Path(index) / "lock"
    try:
        os.utime(lock, follow_symlinks=False)
        st = os.lstat(lock)
    except (OSError, NotImplementedError):
        return None
    return st.st_dev, st.st_ctime_ns


def newest_ctimes(entries: Iterable[FileEntry], clock: tuple[int, int] | None = None) -> dict[int, int]:
    """Per device, the newest time its file system's clock is known to have reached before any
    file listed is read: the newest change time listed, or the ``clock`` of :func:`index_clock`
    taken before the listing."""
    newest: dict[int, int] = {}
    if clock is not None:
        newest[clock[0]] = clock[1]
    if isinstance(entries, Entries):  # columns: the newest of each device at once
        devs, ctimes = entries.stat[:, 4], entries.stat[:, 2]
        # Most listings are of one device: told by one comparison, not np.unique (a sort of the
        # column, and the import of numpy.ma it makes: ~0.02 s of a quiet night at 10^5 files).
        one = len(devs) and bool((devs == devs[0]).all())
        for dev in [int(devs[0])] if one else np.unique(devs).tolist():
            ns = int(ctimes[devs == dev].max())
            newest[dev] = max(ns, newest.get(dev, ns))
        return newest
    for e in entries:
        if e.dev not in newest or e.ctime_ns > newest[e.dev]:
            newest[e.dev] = e.ctime_ns
    return newest


def racy(e: FileEntry, newest: dict[int, int]) -> bool:
    """Whether a file, as listed by the scan whose :func:`newest_ctimes` is ``newest``, was racily clean.

    Its change time is not more than RACY_NS older than a time its file
    system's clock had reached before the file was read, or its device is
    not in ``newest``: an edit in the same tick could have followed the
    read unseen. (RACY_NS covers the coarsest tick, FAT's 2 s.)

    An object (a URL corpus) is never racy when it has an ETag (or version):
    a write gives it another, whatever the clocks; one without is read again
    at every scan (see :mod:`simdoc.corpus.objects`).
    """
    if is_url(e.path):
        return e.ino == UNKNOWN
    bound = newest.get(e.dev)
    return bound is None or e.ctime_ns > bound - RACY_NS


def racy_mask(ctime_ns: np.ndarray, dev: np.ndarray, ino: np.ndarray, newest: dict[int, int], objects: bool) -> np.ndarray:
    """:func:`racy` of every file of a listing at once, from its columns (``objects``: a bucket's listing)."""
    if objects:
        return np.asarray(ino) == UNKNOWN
    out = np.ones(len(ctime_ns), dtype=bool)  # a device with no time known: never proven clean
    for device, bound in newest.items():
        on = np.asarray(dev) == device
        out[on] = np.asarray(ctime_ns)[on] > bound - RACY_NS
    return out

"""Simdoc indexes met in a corpus, passed over.

Whether a folder is a simdoc index is decided in one place,
:func:`simdoc.indexmarks.index_reason`, which asks a folder for the first bytes
of two names (``manifest.json``, ``lock``) and, rarely, for its names. Here is
how a folder walked answers it (:func:`folder_reason`): its names are listed
already, so a folder that holds neither name costs two searches of them, no
system call. As in any walk, the CORPUS folder itself is not asked.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left

from simdoc.indexmarks import HEAD_BYTES, index_reason

# Never a link's target, nor a FIFO's reader (an open that would wait for a writer).
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def folder_reason(names: list[str], directory: str, fd: int | None) -> str | None:
    """Why a folder being walked is a simdoc index, or None: ``names`` its entries' names (sorted,
    hidden ones dropped), ``fd`` a descriptor of it (or None: by its path)."""

    def head(name: str) -> bytes | None:
        at = bisect_left(names, name)
        if at == len(names) or names[at] != name:
            return None
        return _read_head(name, directory, fd)

    return index_reason(head, lambda: names)


def _read_head(name: str, directory: str, fd: int | None) -> bytes | None:
    try:
        handle = os.open(name, _OPEN, dir_fd=fd) if fd is not None else os.open(os.path.join(directory, name), _OPEN)
    except OSError:
        return None
    try:
        return os.read(handle, HEAD_BYTES) if stat.S_ISREG(os.fstat(handle).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(handle)

"""Simdoc indexes met in a corpus, passed over: in a folder walked, in a ``--files-from`` list.

Whether a folder is a simdoc index is decided in one place,
:func:`simdoc.indexmarks.index_reason`, which asks a folder for the first bytes
of two names (``manifest.json``, ``lock``) and, rarely, for its names. Here is
how each kind of corpus answers it:

* a folder walked (:func:`folder_reason`): its names are listed already, so
  a folder that holds neither name costs two searches of them, no system call;
* the folders of a list (:func:`path_reason`, by :func:`find_indexes`): a
  list names files, not what their folders hold, so each folder between the
  list's base and a name is asked (two opens; a listing only where there is
  simdoc's lock and no manifest), once however many names it holds.

As in a walk, the folder the ids are relative to (a CORPUS, a list's
deepest common folder) is not asked: only the folders inside it.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

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


def path_reason(directory: str) -> str | None:
    """Why the folder at ``directory`` is a simdoc index, or None."""
    return index_reason(lambda name: _read_head(name, directory, None), lambda: _listing(directory))


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


def _listing(directory: str) -> list[str] | None:
    try:
        return os.listdir(directory)
    except OSError:
        return None  # cannot tell: walked as a user's folder would be


def folders_of(ids: Iterable[str]) -> set[str]:
    """The folders that hold ``ids`` (the ids of the names a list gives), below the base: "a",
    "a/b" for "a/b/c.txt"."""
    out: set[str] = set()
    for parent in {doc_id.rpartition("/")[0] for doc_id in ids}:
        while parent and parent not in out:
            out.add(parent)
            parent = parent.rpartition("/")[0]
    return out


def find_indexes(folders: Iterable[str], reason_of: Callable[[str], str | None], at_once: int = 1) -> dict[str, str]:
    """Of ``folders`` (ids), those that are simdoc indexes, with why: asked shallowest first, so a
    folder inside an index is never asked; ``at_once`` of one depth at a time (a URL's round trips)."""
    by_depth: dict[int, list[str]] = {}
    for folder in folders:
        by_depth.setdefault(folder.count("/"), []).append(folder)
    found: dict[str, str] = {}
    for depth in sorted(by_depth):
        ask = sorted(f for f in by_depth[depth] if holder(f, found) is None)
        if at_once > 1 and len(ask) > 1:
            with ThreadPoolExecutor(min(at_once, len(ask))) as pool:
                reasons = list(pool.map(reason_of, ask))
        else:
            reasons = list(map(reason_of, ask))
        found.update((f, r) for f, r in zip(ask, reasons) if r is not None)
    return found


def holder(doc_id: str, found: dict[str, str]) -> str | None:
    """The folder of ``found`` (the indexes) that is ``doc_id`` or holds it, or None."""
    if not found:
        return None
    at = doc_id.find("/")
    while at != -1:
        if doc_id[:at] in found:
            return doc_id[:at]
        at = doc_id.find("/", at + 1)
    return doc_id if doc_id in found else None

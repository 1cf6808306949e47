"""Simdoc indexes met in a corpus, passed over: in a folder walked, in a ``--files-from`` list,
under a bucket prefix.

Whether a folder is a simdoc index is decided in one place,
:func:`simdoc.indexmarks.index_reason`, which asks a folder for the first bytes
of two names (``manifest.json``, ``lock``) and, rarely, for its names. Here is
how each kind of corpus answers it:

* a folder walked (:func:`folder_reason`): its names are listed already, so
  a folder that holds neither name costs two searches of them, no system call;
* the folders of a list of paths (:func:`path_reason`, by :func:`find_indexes`):
  a list names files, not what their folders hold, so each folder between
  the list's base and a name is asked (two opens; a listing only where there
  is simdoc's lock and no manifest), once however many names it holds;
* a list of URLs (:func:`url_reason`): only a "folder" where the list names
  ``manifest.json`` or ``lock`` (:func:`named_candidates`), as in a bucket's
  listing, is asked (two HEADs, a ranged GET of one that is there): asking
  every folder cost two HEADs a folder on every run, a nightly one too, for
  a list that names an index's arrays without its manifest or lock, which
  a list made from a listing does not;
* a bucket's listing (:func:`listed_indexes`): the keys are all known, so
  only a "folder" where one is ``manifest.json`` or ``lock`` is asked (a
  ranged GET of each of the two that is listed).

As in a walk, the folder the ids are relative to (a CORPUS, a list's
deepest common folder, a prefix) is not asked: only the folders inside it.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from simdoc.corpus.objects import filesystem  # fsspec itself is imported only when a URL is asked
from simdoc.indexmarks import HEAD_BYTES, LOCK, MANIFEST, index_reason

# Never a link's target, nor a FIFO's reader (an open that would wait for a writer).
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
AT_ONCE = 16  # folders of a list of URLs asked at a time: a round trip or two each


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


def url_reason(base: str) -> Callable[[str], str | None]:
    """The reason of a "folder" below ``base`` (a URL), by its id: a HEAD of each of the two names
    (and a ranged GET of one that is there), and a listing of the folder where simdoc's lock is
    and no manifest."""
    fs, _ = filesystem(base)

    def reason(folder: str) -> str | None:
        path = fs._strip_protocol(f"{base}/{folder}")
        return index_reason(lambda name: _object_head(fs, f"{path}/{name}", ask=True), lambda: _object_names(fs, path))

    return reason


def _object_head(fs, path: str, ask: bool = False) -> bytes | None:
    """The first bytes of the object at ``path``; ``ask``: a HEAD first, for a key no listing gave
    (most are not there: a HEAD answers that, and no object is read)."""
    try:
        if ask:
            fs.invalidate_cache(path)
            if fs.info(path).get("type", "file") != "file":
                return None
        return fs.cat_file(path, start=0, end=HEAD_BYTES)
    except Exception:  # noqa: BLE001 - gone, refused, unreachable (each backend its own kinds): no index known
        return None


def _object_names(fs, path: str) -> list[str] | None:
    try:
        fs.invalidate_cache(path)  # fsspec keeps listings: the folder as it is now
        return [name.rstrip("/").rpartition("/")[2] for name in fs.ls(path, detail=False)]
    except Exception:  # noqa: BLE001 - as above
        return None


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


def named_candidates(ids: Iterable[str]) -> set[str]:
    """The folders (ids, below the base) where one of ``ids`` is ``manifest.json`` or ``lock``:
    the only ones that can be simdoc indexes, when ``ids`` are all a folder's keys."""
    candidates = {doc_id.rpartition("/")[0] for doc_id in ids if doc_id.rpartition("/")[2] in (MANIFEST, LOCK)}
    candidates.discard("")  # the base itself: not asked, as a walk's root is not
    return candidates


def listed_indexes(base: str, ids: list[str]) -> dict[str, str]:
    """The "folders" of a listing of ``base`` (its objects' ids) that are simdoc indexes, with why.

    Only a folder where a key is ``manifest.json`` or ``lock`` can be one; its
    two names are read by ranged GETs where they are listed, and its names are
    the listing's (hidden keys, which a listing leaves out, aside)."""
    candidates = named_candidates(ids)
    if not candidates:
        return {}
    fs, root = filesystem(base)
    keys = set(ids)

    def reason(folder: str) -> str | None:
        def head(name: str) -> bytes | None:
            return _object_head(fs, f"{root}/{folder}/{name}") if f"{folder}/{name}" in keys else None

        def names() -> list[str]:
            inside = [k[len(folder) + 1 :] for k in ids if k.startswith(folder + "/")]
            return list({k.partition("/")[0] for k in inside})

        return index_reason(head, names)

    return find_indexes(candidates, reason)

"""The indexes simdoc keeps in its cache directory: where they go, which there are, removing them.

Without ``--index`` an index lives in ``$XDG_CACHE_HOME/simdoc/<name>-<hash>``
(``~/.cache/simdoc/...``), one per corpus, named after the corpus folder and
the hash of its absolute path(s). Those directories are a cache: anything in
them can be rebuilt from the corpus, so ``simdoc cache clean`` may remove
them. It removes only what is certainly a simdoc index (a direct
subdirectory of the cache directory, not a symbolic link, holding a simdoc
manifest), only while it holds the index's writer lock and no reader uses
it, and only the files simdoc writes; anything else keeps its directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import posixpath
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from simdoc.errors import EXIT_BUSY, IndexBusy, SimdocError
from simdoc.store.directory import (
    FORMAT,
    LOCK,
    MANIFEST,
    READERS,
    IndexStore,
    open_lock_file,
)
from simdoc.store.names import PARTS, is_own_file, remove_parts


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/simdoc``, else ``~/.cache/simdoc``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "simdoc"


def cached_index_path(corpus: str | os.PathLike | Iterable[str | os.PathLike]) -> Path:
    """The cache directory's index of a corpus (one folder or file, or several).

    The name is the corpus folder's (or the common folder's of several)
    followed by 12 hex digits of the hash of the absolute paths, so each
    corpus gets its own index and the corpus itself is never written to.
    """
    items = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    if len(items) == 1 and isinstance(items[0], str) and "://" in items[0]:  # a URL (s3://bucket/prefix/): as given
        url = items[0].rstrip("/")
        digest = hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        return cache_dir() / f"{url.rpartition('/')[2] or 'root'}-{digest}"
    if all(isinstance(c, str) and "://" in c for c in items):  # URLs from a list: as given, not made paths
        urls = sorted(c.rstrip("/") for c in items)
        digest = hashlib.sha256("\0".join(urls).encode("utf-8", "surrogateescape")).hexdigest()[:12]
        return cache_dir() / f"{posixpath.basename(posixpath.commonpath(urls)) or 'root'}-{digest}"
    absolute = sorted(str(Path(c).resolve()) for c in items)
    digest = hashlib.sha256("\0".join(absolute).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = Path(absolute[0]).name if len(absolute) == 1 else Path(os.path.commonpath(absolute)).name
    return cache_dir() / f"{name or 'root'}-{digest}"


class IndexInUse(SimdocError):
    """Another run holds the index's writer or reader lock: it is not removed."""

    exit_code = EXIT_BUSY

    def __init__(self, path: Path, who: str) -> None:
        super().__init__(f"{path} is in use by {who}: not removed", hint="run `simdoc cache clean` again later, or pass --wait SECONDS")


@dataclass(frozen=True)
class CachedIndex:
    """One index of the cache directory.

    ``corpus`` is the folder its document ids are relative to ("" if the
    index has no shingle stage yet); ``size`` the bytes of its files;
    ``modified`` the newest modification time among them (Unix seconds):
    every writing run touches at least the lock file.
    """

    path: Path
    corpus: str
    size: int
    modified: float


def _manifest(path: Path) -> dict | None:
    """The manifest of a simdoc index at ``path``, or None if that is not one."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return None
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == FORMAT else None


def _describe(path: Path, manifest: dict) -> CachedIndex:
    size, newest = 0, 0.0
    with os.scandir(path) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                size += st.st_size if stat.S_ISREG(st.st_mode) else 0
                newest = max(newest, st.st_mtime)
    shingle = (manifest.get("stages") or {}).get("shingle") or {}
    return CachedIndex(path, str(shingle.get("corpus") or ""), size, newest)


def cached_indexes(directory: Path | None = None) -> list[CachedIndex]:
    """Every simdoc index directly under the cache directory, in name order."""
    directory = cache_dir() if directory is None else directory
    try:
        children = sorted(directory.iterdir())
    except OSError:  # no cache directory yet: no indexes
        return []
    found = []
    for child in children:
        manifest = _manifest(child)
        if manifest is not None:
            with contextlib.suppress(OSError):  # removed while we looked
                found.append(_describe(child, manifest))
    return found


def remove_index(path: Path, wait: float = 0.0) -> list[str] | None:
    """Remove one index of the cache directory; returns the names of the entries it left,
    or None if ``path`` is not (or no longer) a simdoc index directly under the cache
    directory: then nothing is touched.

    Holds the index's writer lock (waiting up to ``wait`` seconds) and an
    exclusive lock on its readers' lock file, so neither a writer nor a
    reader is using it. The manifest goes first: from then on the directory
    is no index, whatever happens. Files simdoc did not write stay, and so
    does the directory that holds them; the parts Dask workers wrote
    (``dask-parts``) go with the index (see :func:`remove_parts`).

    Raises
    ------
    IndexInUse
        Another run writes or reads the index.
    """
    if path.parent.resolve() != cache_dir().resolve() or _manifest(path) is None:
        return None
    try:
        with IndexStore(path).writing(wait=wait):
            return _remove_locked(path)
    except IndexBusy as exc:
        raise IndexInUse(path, "a simdoc run writing it") from exc


def _remove_locked(path: Path) -> list[str] | None:
    fd = open_lock_file(path / READERS)  # never through a symbolic link (see open_lock_file)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise IndexInUse(path, "a simdoc run reading it") from None
        # Another cleaner may have been first; taking the lock then made the directory
        # anew, holding only the lock files, which go again.
        was_index = _manifest(path) is not None
        if was_index:
            (path / MANIFEST).unlink()
        elif set(os.listdir(path)) - {LOCK, READERS}:
            return None  # and a writer since: its index now
        left = []
        for entry in sorted(os.listdir(path)):
            p = path / entry
            if (is_own_file(entry) or entry in (LOCK, READERS)) and stat.S_ISREG(os.lstat(p).st_mode):
                p.unlink()
            elif entry == PARTS and stat.S_ISDIR(os.lstat(p).st_mode) and remove_parts(p):
                pass  # what the workers of a Dask run wrote, and nothing else
            else:
                left.append(entry)
    finally:
        os.close(fd)
    if not left:
        with contextlib.suppress(OSError):
            path.rmdir()
    return left if was_index else None


def older_than(index: CachedIndex, days: float, now: float | None = None) -> bool:
    """Whether the index was last written more than ``days`` days ago."""
    return ((time.time() if now is None else now) - index.modified) > days * 86400.0

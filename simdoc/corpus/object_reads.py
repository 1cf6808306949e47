"""Objects opened for reading as local files are (issue 31): :func:`open_object`, :class:`ObjectFile`.

Every reader of :mod:`simdoc.corpus` takes what :func:`open_object` gives as
it takes a file: ``read``, ``seek``, ``tell``, and ``stat`` (the object's
identity, :class:`simdoc.corpus.objects.ObjectStat`). A read carries the
ETag the object had when it was opened (s3fs's ``If-Match``), so an object
replaced while it is read fails to read, never mixes two versions.

Opening an object this process listed asks nothing first: its reads carry
the listing's ETag (:func:`simdoc.corpus.objects.as_listed`). An object
read from its start (the scan; a document read whole) is read at once, the
first 4 MiB by the GET that reading it takes anyway: one edited since the
listing refuses that GET (412), and it is opened anew by a HEAD and read as
it is now, as a file edited after the walk is read as it is when opened.
One read at offsets (``ranged``: members read where the index says they
are) that refuses its read was edited since: an error, the document stale.
An object not listed here (a Dask worker, a spawned worker) is opened by a
HEAD, as before.

While a run keeps the objects it read (:mod:`simdoc.corpus.object_spill`),
an object read whole is kept, and one kept is read from the local copy if
the store still has it as it was (one HEAD, instead of the GET).
"""

from __future__ import annotations

import errno
import io

from simdoc.corpus.object_spill import SpillWriter, current_spill
from simdoc.corpus.objects import UNKNOWN, ObjectStat, said, as_listed, filesystem, object_identity, object_stat, remember
from simdoc.errors import CorpusError

READ_BLOCK = 4 << 20  # read-ahead of a sequential read: one GET per 4 MiB
EDITED = "edited since it was listed (another ETag)"


class ObjectFile(io.RawIOBase):
    """An object opened for reading, as a local file is: ``read``, ``seek``, ``tell``; ``stat``: its
    identity when opened. Every failure is an OSError (the backends raise their own kinds), which
    the readers turn into a warning, as for a file that cannot be read."""

    def __init__(self, handle, st: ObjectStat, tee: SpillWriter | None = None) -> None:
        super().__init__()
        self._f = handle
        self.stat = st
        self._tee = tee  # the copy kept for the rest of the run (simdoc.corpus.object_spill)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._tee is None:
            return _as_oserror(lambda: self._f.read(n))
        pos = self._f.tell()
        data = _as_oserror(lambda: self._f.read(n))
        if not self._tee.wrote(pos, data):  # not read in order from the start: not kept
            self._tee.close(keep=False)
            self._tee = None
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        return _as_oserror(lambda: self._f.seek(pos, whence))

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            if self._tee is not None:
                self._tee.close()
                self._tee = None
            try:
                self._f.close()
            except Exception:
                pass  # a read-only handle has nothing to flush
        super().close()


def _as_oserror(call):
    try:
        return call()
    except OSError as exc:
        if _expired(exc):  # s3fs says "no longer exists": it does, as another version
            raise OSError(errno.ESTALE, EDITED) from None
        raise
    except Exception as exc:
        raise OSError(said(exc)) from None


def _expired(exc: BaseException) -> bool:
    """Whether a read failed because the object is not the version opened (s3fs's FileExpired:
    the store answered 412 to the read's If-Match)."""
    return type(exc).__name__ == "FileExpired"


def _open_asked(fs, path: str, ranged: bool) -> tuple[object, ObjectStat]:
    """The object opened by asking its identity (a HEAD, or a cached listing's entry)."""
    handle = fs.open(path, "rb", block_size=READ_BLOCK, cache_type="none" if ranged else "readahead")
    return handle, object_identity(handle.details)


def _open_listed(fs, path: str, ranged: bool, tag: str, st: ObjectStat):
    """The object opened by the identity its listing gave, asking nothing: its reads carry the
    ETag. None if the backend's files cannot carry it (only s3fs's can)."""
    handle = fs.open(path, "rb", block_size=READ_BLOCK, cache_type="none" if ranged else "readahead", size=st.st_size)
    if not hasattr(handle, "read_kw"):
        handle.close()
        return None
    # What s3fs's S3File does with the details of a HEAD (it does not when given the size).
    handle.details = {"name": path, "size": st.st_size, "ETag": tag, "type": "file"}
    handle.read_kw = {**handle.read_kw, "IfMatch": tag}
    if not ranged:
        try:
            handle.read(1)  # its first block, the GET its reader makes first anyway (read-ahead keeps it)
            handle.seek(0)
        except Exception:
            handle.close()
            raise
    return handle


def _opened(url: str, fs, path: str, ranged: bool) -> tuple[object, ObjectStat]:
    known = as_listed(url)
    if known is not None:
        try:
            handle = _open_listed(fs, path, ranged, *known)
        except OSError as exc:
            if not _expired(exc):
                raise
            # Edited since the listing: asked (a HEAD) and read as it is now; its new ETag kept
            # as the listing's, so that this process's later opens of it carry that one.
            fs.invalidate_cache(path)
            handle, st = _open_asked(fs, path, ranged)
            remember(url, handle.details)
            return handle, st
        if handle is not None:
            return handle, known[1]
    return _open_asked(fs, path, ranged)


def open_object(url: str, ranged: bool = False) -> ObjectFile | str:
    """``url`` opened for reading as an :class:`ObjectFile`, or the warning saying why it is skipped.

    ``ranged``: each read is one GET of just the bytes asked for (members read
    at their offsets); otherwise reads go ahead by :data:`READ_BLOCK`. An
    object listed in this process is opened without a HEAD (see the module
    docstring); a kept copy of it is read if the store still has it as it was.
    """
    spill = current_spill()
    if spill is not None and spill.has(url):
        st = object_stat(url)  # None: gone or refused, which opening it says below
        local = None if st is None or st.st_ino == UNKNOWN else spill.find(url, st.values())
        if local is not None:
            return ObjectFile(local, st)
    try:
        fs, path = filesystem(url)
        handle, st = _opened(url, fs, path, ranged)
    except FileNotFoundError:
        return "vanished before it could be read, skipped"
    except CorpusError as exc:
        return f"cannot read: {exc.message}"
    except Exception as exc:  # refused, unreachable: each backend raises its own kinds
        return f"cannot read: {said(exc)}"
    tee = None if spill is None or ranged or st.st_ino == UNKNOWN else spill.writer(url, st.values(), st.st_size)
    return ObjectFile(handle, st, tee)

"""Objects a run has read already, kept on local disk for the rest of that run (issue 31).

A nightly ``simdoc pairs s3://bucket/prefix/ --new`` reads each new or changed
object by its scan, then verifies the new pairs by reading both documents
again: without this module, every changed object crossed the network twice.
While a :func:`spilling` block is open (``simdoc pairs`` on a URL corpus, on
this machine's processes), an object read sequentially from its start to its
end is also written to a temporary folder (:meth:`Spill.writer`), keyed by its
URL and its identity (ETag or version, size: as change detection uses it);
a later open of that URL in the run (verification, a member read at its
offset) asks the store for the object's identity now (a HEAD: no body) and
reads the local copy if it is the identity spilled (:meth:`Spill.find`).
An object edited since it was read has another identity: it is read from
the store again, and verification finds it stale as it always did.

The copies live in the system's temporary directory (``TMPDIR``) and are
bounded: at most ``bound`` bytes in all (shared by the
forked workers of the run through one counter); an object that does not
fit is simply not kept (it is read again, as before). The folder is deleted
when the block ends. Spawned workers (not forked) and Dask workers are not
given a spill: they read from the store, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator

SPILL_BYTES = 1 << 30  # bytes of objects kept at most in one run
SPILL_PREFIX = "simdoc-objects-"  # the folder's name in the temporary directory: simdoc-objects-<random>


class Spill:
    """A folder of objects read this run, and the bytes it may still take."""

    def __init__(self, folder: str, bound: int) -> None:
        self.folder = folder
        import multiprocessing  # (here: ~3 ms of every command that reads no object)

        self._left = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn").Value("q", bound)

    def _name(self, url: str) -> str:
        return os.path.join(self.folder, hashlib.blake2b(url.encode(), digest_size=16).hexdigest())

    def _data(self, url: str, identity: tuple) -> str:
        tag = hashlib.blake2b(repr(tuple(int(v) for v in identity)).encode(), digest_size=8).hexdigest()
        return f"{self._name(url)}.{tag}"

    def has(self, url: str) -> bool:
        """Whether some version of ``url`` was kept (no request: a local ``stat``)."""
        return os.path.exists(self._name(url))

    def find(self, url: str, identity: tuple):
        """The local copy of ``url`` as it was when its identity was ``identity`` (opened for
        reading), or None."""
        try:
            return open(self._data(url, identity), "rb")
        except OSError:
            return None

    def _take(self, n: int) -> bool:
        with self._left.get_lock():
            if self._left.value < n:
                return False
            self._left.value -= n
            return True

    def _give_back(self, n: int) -> None:
        with self._left.get_lock():
            self._left.value += n

    def writer(self, url: str, identity: tuple, size: int) -> SpillWriter | None:
        """Where to copy ``url`` as it is read from its start (``identity``: as opened, ``size``
        its bytes), or None if it does not fit what is left of the bound."""
        if size < 0 or not self._take(size):
            return None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        except OSError:
            self._give_back(size)
            return None
        return SpillWriter(self, url, identity, size, os.fdopen(fd, "wb"), tmp)


class SpillWriter:
    """One object being copied as it is read: kept only if read whole, from its start, in order."""

    def __init__(self, spill: Spill, url: str, identity: tuple, size: int, out, tmp: str) -> None:
        self.spill, self.url, self.identity, self.size = spill, url, identity, size
        self._out, self._tmp, self.at = out, tmp, 0

    def wrote(self, pos: int, data: bytes) -> bool:
        """``data`` was read at ``pos``: copied if it follows what was copied; False once the
        reads are not in order (a seek, a ranged read): the copy is then given up."""
        if pos != self.at or self.at + len(data) > self.size:
            return False
        try:
            self._out.write(data)
        except OSError:
            return False
        self.at += len(data)
        return True

    def close(self, keep: bool = True) -> None:
        """The copy kept if it holds the whole object (and ``keep``), else dropped."""
        done = keep and self.at == self.size
        try:
            self._out.close()
            if done:
                os.replace(self._tmp, self.spill._data(self.url, self.identity))
                # The marker after the data: whoever sees the marker finds the data.
                open(self.spill._name(self.url), "ab").close()
        except OSError:
            done = False
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self.spill._give_back(self.size)


_spill: Spill | None = None


def current_spill() -> Spill | None:
    """The spill of the run in this process (forked workers inherit it), or None."""
    return _spill


@contextlib.contextmanager
def spilling(folder: str | os.PathLike | None = None, bound: int | None = None) -> Iterator[Spill | None]:
    """Objects read whole in this block are kept under a new temporary folder in ``folder``
    (default: the system's temporary directory, ``TMPDIR``), at most ``bound`` bytes
    (default :data:`SPILL_BYTES`), deleted
    when the block ends. None (and nothing kept) if no folder can be made there.

    Not in the index directory: that holds only the names simdoc writes there
    (:mod:`simdoc.store.names`); the folder a run killed by SIGKILL leaves behind
    is the temporary directory's to clean, not the index's."""
    global _spill
    try:
        where = tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=folder)
    except OSError:
        yield None
        return
    before, _spill = _spill, Spill(where, SPILL_BYTES if bound is None else bound)
    try:
        yield _spill
    finally:
        _spill = before
        shutil.rmtree(where, ignore_errors=True)

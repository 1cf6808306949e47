"""The index directory: manifest, atomic writes, validated memory-mapped loads, locks.

Layout of index format 5 (one directory per corpus; the store writes and
checks any ``.npy`` file a stage names, these are the ones the stages make)::

    manifest.json                     format version, every stage's parameters,
                                      files, and what each stage was built from
    docs.<column>.<build>.npy         the docs table, a column a file (simdoc.store.doctable):
                                      each row's key and the runs of rows that share a file,
                                      that file's name once (simdoc.store.docnames);
                                      int64 offset, length, size, file_size, mtime_ns,
                                      ctime_ns, ino, dev, n_shingles, added; uint8 how, status;
                                      uint8 (n_docs, 16) digest, file_digest, identity
    minhash.family.<build>.npy        uint32 (2, num_perm)   the a and b of each permutation
    signatures.<build>.npy            uint32 (n_docs, num_perm)
    bands.<build>.npy                 uint64 (bands, n_docs) band key of each document
    buckets.<build>.npy               int64  (bands, n_nonempty) documents sorted by key
    groups.<build>.npy                int64  (n_docs,)       first document of each exact copy's group
    verified.keys.<build>.npy         uint64 (m, 4)          identities of the two texts of a pair
    verified.jaccard.<build>.npy      float64 (m, 2)          their exact set and bag Jaccard
    shingles.{indptr,data,counts}.<build>.npy   only after `simdoc shingle` on its own:
                                      CSR of sorted unique 32-bit shingle hashes and counts

``<build>`` is the stage's build id. Files are written under a temporary
name, fsynced and renamed; the manifest is replaced last and only then are
files of older builds deleted. A run killed at any point therefore leaves
the previous manifest pointing at complete files of the previous build.

The manifest carries the CRC-32 of its own bytes and is checked against a
schema before anything in it is used (see :mod:`simdoc.store.manifest`).

Every load checks the format version, and each file's size, dtype, shape and
CRC-32 (of the bytes after the .npy header; recorded at write time) against
the manifest, so a truncated or damaged file is an error naming the file,
never a numpy traceback or a silently wrong answer.

Concurrency: writers hold an exclusive ``flock`` on ``lock``; a second writer
waits up to ``--wait`` seconds, then fails with exit code 5. The kernel drops
the lock of a process that dies, so a dead run never blocks the next one.
A writer that made the directory and fails before its first manifest
removes the directory again; a writer that then gets the lock checks that
its lock file is still the one in the directory, and takes the new one if not.
Readers hold a shared ``flock`` on ``readers`` while they use the files; a
writer deletes files of older builds only when no reader holds it, otherwise
leaves them for the next writer. Since files are never modified after they
are published and the manifest is replaced atomically, a reader sees either
the old index or the new one, never a mix.

``SIMDOC_FAULT=<point>`` makes the process exit abruptly at a named point
(see :func:`simdoc.store.npyfiles.fault_point`); the tests use it to kill writes at every step.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path

import numpy as np

from simdoc.errors import CorruptIndex, IndexBusy, IndexError_, OutputError
from simdoc.indexmarks import FORMAT, MANIFEST, writer_note  # noqa: F401  (below the store: the corpus knows them too)
from simdoc.store.locks import LOCK, READERS, lock_holder, open_lock_file
from simdoc.store.manifest import dump as dump_manifest
from simdoc.store.manifest import parse as parse_manifest
from simdoc.store.manifest import validate as validate_manifest
from simdoc.store.names import OWN_TEMPORARY, is_own_file, own_entry
from simdoc.store.npyfiles import (
    NO_ROOM,
    VERIFIED,
    NpyWriter,
    crc32,
    crc32_file,
    fault_point,
    fsync_dir,
    new_temporary,
    no_room,
    read_header,
    verify_key,
)

# Versions 1 and 2 kept every shingle of every document and are refused (`--rebuild`); 3 keeps
# none (verification reads the documents again). 4 adds each file's change time, inode and device
# (a version-3 index is read: its next update reads every file once more and records them). 5 stores
# a member's id as its file plus its key (simdoc.store.docnames). 6 records the reading rules
# (simdoc.corpus.reading_rules). 7 adds the index stage's bucket sizes (a quiet night reads no
# bucket: simdoc.stages.results). Each version reads those before it, and its next update writes
# the current one; the simdoc before each refuses it by its version rather than misread it.
FORMAT_VERSION = 7
READABLE_VERSIONS = (3, 4, 5, 6, 7)
VERIFY_ON_LOAD_BYTES = 1 << 30  # larger files: CRC checked by `simdoc check` only
def _own_file(path: Path) -> os.stat_result:
    """The stat of a file of the index, which simdoc always writes as a regular file (renamed into place).

    A symbolic link in its place (even to a file whose size and checksum the
    manifest was made to carry) is refused, so that nothing outside the index
    directory is read as part of it.

    Raises
    ------
    CorruptIndex
        Missing, or not a regular file.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise CorruptIndex(str(path), "file is missing") from None
    except OSError as exc:
        raise CorruptIndex(str(path), f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise CorruptIndex(str(path), f"is {what}; simdoc writes its index files as regular files")
    return st


def _a_directory(path: Path) -> IndexError_:
    return IndexError_(
        f"{path} is a directory, where simdoc keeps a file of its index",
        hint=f"simdoc never deletes a directory: look inside {path}, move or remove it yourself, then run again "
        "(with --rebuild if it was the manifest); or choose another --index",
    )


class IndexStore:
    """One index directory. Creates nothing until the first write."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    # -- manifest ---------------------------------------------------------
    def exists(self) -> bool:
        """Whether the directory holds an index: a manifest, or something in its place (which
        :meth:`read_manifest` then refuses, rather than taking the directory for a new index)."""
        return os.path.lexists(self.path / MANIFEST)

    def read_manifest(self, discard_damaged: bool = False) -> dict:
        """The manifest, or an empty one if the directory holds no index yet.

        With ``discard_damaged`` an unreadable manifest of a simdoc index (one
        whose other files are all simdoc's) counts as no index: for --rebuild.
        """
        mpath = self.path / MANIFEST
        if mpath.is_dir() and not mpath.is_symlink():
            # Not something --rebuild may replace: a rename cannot put a file over a directory,
            # and a directory may hold someone's files, which simdoc never deletes.
            raise _a_directory(mpath)
        if discard_damaged and os.path.lexists(mpath):
            try:
                return self.read_manifest()
            except IndexError_:
                if all(own_entry(p) for p in self.path.iterdir()):
                    return self._empty_manifest()
                raise
        if not os.path.lexists(mpath):
            if self.path.exists() and not self.path.is_dir():
                raise IndexError_(f"index path {self.path} exists and is not a directory", hint="choose another --index")
            return self._empty_manifest()
        _own_file(mpath)
        try:
            raw = mpath.read_bytes()
        except OSError as exc:
            raise CorruptIndex(str(mpath), f"manifest cannot be read ({exc.strerror or exc})") from None
        manifest = parse_manifest(raw, mpath)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise IndexError_(
                f"{self.path} is not a simdoc index (its manifest.json is not simdoc's)",
                hint="choose another --index, or delete that directory",
            )
        version = manifest.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise CorruptIndex(str(mpath), "the manifest has no format version")
        if version not in READABLE_VERSIONS:
            raise IndexError_(
                f"index {self.path} has format version {manifest.get('format_version')}, "
                f"this simdoc reads versions {', '.join(map(str, READABLE_VERSIONS))}",
                hint="rebuild it with --rebuild",
            )
        validate_manifest(manifest, mpath)
        return manifest

    @staticmethod
    def _empty_manifest() -> dict:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "stages": {}}

    def write_manifest(self, manifest: dict) -> None:
        """Publish a new manifest atomically, then delete files no stage refers to."""
        fault_point("manifest:before")
        manifest["format_version"] = FORMAT_VERSION
        raw = dump_manifest(manifest)
        try:  # never publish what every reader would refuse (simdoc.store.manifest's tables are behind)
            validate_manifest(parse_manifest(raw, self.path / MANIFEST), self.path / MANIFEST)
        except CorruptIndex as exc:
            raise RuntimeError(f"simdoc made a manifest its own schema refuses: {exc.message}") from None
        self.write_bytes(MANIFEST, raw)
        fault_point("manifest:after")
        self.collect_garbage(manifest)

    def collect_garbage(self, manifest: dict) -> int:
        """Delete our files that no stage refers to, unless a reader is using the index."""
        keep = {MANIFEST, LOCK, READERS}
        for stage in manifest.get("stages", {}).values():
            keep.update(stage.get("files", {}))
        fd = open_lock_file(self.path / READERS)
        removed = 0
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0  # someone is reading: the next writer will clean up
            for p in self.path.iterdir():
                # Only our own files: leftovers of older builds and temporary files of dead runs.
                if p.name not in keep and is_own_file(p.name) and p.is_file():
                    with contextlib.suppress(OSError):
                        p.unlink()
                        removed += 1
        finally:
            os.close(fd)
        return removed

    # -- locks ------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, wait: float = 0.0):
        """Hold the writer lock; wait up to ``wait`` seconds for another writer to finish.

        If this call created the index directory and what runs under the lock
        fails before a manifest is written, the directory is removed again:
        a run that fails at once (no such corpus, no documents) leaves nothing
        behind.
        """
        created = not self.path.exists()
        self.ensure_dir()
        key = str(self.path.resolve())
        if _HELD.get(key):
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
        try:
            fd = self._lock(wait)
        except OSError as exc:  # the lock file cannot even be opened for writing
            if exc.errno in (*NO_ROOM, errno.EACCES, errno.EPERM):
                raise no_room(self.path, exc) from None
            raise
        try:
            # Who holds the lock, for IndexBusy; before a first manifest, what tells a walk it is simdoc's (indexmarks).
            # Over the last writer's note, not after truncating to 0: never empty, no block freed (~40 us, not ~260).
            with contextlib.suppress(OSError):
                note = writer_note(os.getpid(), time.strftime("%Y-%m-%d %H:%M:%S"))
                os.pwrite(fd, note, 0)
                if os.fstat(fd).st_size > len(note):  # a longer note before it (a longer pid): its tail goes
                    os.ftruncate(fd, len(note))
            _HELD[key] = 1
            try:
                yield
            except BaseException as exc:
                # A directory that takes no new files (mode 555, immutable) refuses as a read-only one does.
                at = os.path.dirname(os.path.realpath(exc.filename or "/")) if isinstance(exc, OSError) else None
                full = isinstance(exc, OSError) and (exc.errno in NO_ROOM or exc.errno in (errno.EACCES, errno.EPERM) and at == key)
                self._discard_failed_run()  # temporaries hold the space the next run needs
                if created:
                    self._remove_unused_dir()
                if full:
                    raise no_room(self.path, exc) from None
                raise
            finally:
                _HELD.pop(key, None)
        finally:
            os.close(fd)  # closing drops the lock

    def _discard_failed_run(self) -> None:
        """Delete what a failed run (under the writer lock) wrote and did not publish.

        Its temporary files go at once (no reader ever opens one); files it
        renamed into place but no stage of the current manifest names go
        unless a reader holds the index (then the next writer deletes them).
        Best effort: the error that ended the run is the one to report.
        """
        with contextlib.suppress(OSError):
            for p in self.path.iterdir():
                if OWN_TEMPORARY.match(p.name) and p.is_file():
                    with contextlib.suppress(OSError):
                        p.unlink()
        with contextlib.suppress(OSError, IndexError_):
            self.collect_garbage(self.read_manifest() if self.exists() else self._empty_manifest())

    def _lock(self, wait: float) -> int:
        """A descriptor of the lock file, exclusively locked; IndexBusy after ``wait`` seconds."""
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            fd = open_lock_file(self.path / LOCK)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError:
                        if time.monotonic() >= deadline:
                            raise IndexBusy(str(self.path), lock_holder(fd), wait) from None
                        time.sleep(0.05)
                # The writer we waited for may have removed the directory it had just made
                # (see _remove_unused_dir): a lock on that unlinked file guards nothing.
                try:
                    current = os.lstat(self.path / LOCK).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    current = False
            except BaseException:
                os.close(fd)
                raise
            if current:
                return fd
            os.close(fd)
            self.ensure_dir()

    def _remove_unused_dir(self) -> None:
        """Remove the index directory if it holds nothing but the lock files (called under the lock)."""
        with contextlib.suppress(OSError):
            if (self.path / MANIFEST).exists() or any(p.name not in (LOCK, READERS) for p in self.path.iterdir()):
                return
            for name in (READERS, LOCK):
                with contextlib.suppress(FileNotFoundError):
                    (self.path / name).unlink()
            self.path.rmdir()

    @contextlib.contextmanager
    def reading(self):
        """Hold a shared lock that keeps writers from deleting files this process may use."""
        if not self.path.is_dir():
            yield
            return
        try:
            fd = open_lock_file(self.path / READERS)
        except OSError:  # a read-only index directory: nobody can delete files either
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    # -- writing ----------------------------------------------------------
    def ensure_dir(self) -> None:
        if self.path.is_dir() and not self.exists() and any(not own_entry(p) for p in self.path.iterdir()):
            raise IndexError_(
                f"{self.path} already holds other files and is not a simdoc index",
                hint="choose an empty or new directory for --index",
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in (*NO_ROOM, errno.EACCES, errno.EPERM):  # the place takes no writes: exit 6, as later
                raise OutputError(
                    f"cannot create the index directory {self.path}: {exc.strerror or exc}", hint=no_room(self.path, exc).hint
                ) from None
            raise IndexError_(f"cannot create index directory {self.path}: {exc.strerror or exc}") from None

    def write_bytes(self, name: str, payload: bytes) -> dict:
        self.ensure_dir()
        fd, tmp = new_temporary(self.path, f".{name}.", ".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            if name != MANIFEST:
                fault_point(f"publish:{name.split('.')[0]}")
            os.replace(tmp, self.path / name)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, IsADirectoryError):  # made since the manifest was read
                raise _a_directory(self.path / name) from None
            raise
        fsync_dir(self.path)
        return {"bytes": len(payload), "crc32": crc32(payload)}

    def save_array(self, name: str, arr: np.ndarray) -> dict:
        writer = self.array_writer(name, arr.dtype, arr.shape[1:])
        try:
            writer.append(arr)
            return writer.finish()
        except BaseException:
            writer.abort()
            raise

    def array_writer(self, name: str, dtype, tail_shape: tuple[int, ...] = ()) -> NpyWriter:
        self.ensure_dir()
        return NpyWriter(self.path, name, dtype, tail_shape)


    # -- reading ----------------------------------------------------------
    def verify_crc(self, name: str, info: dict, offset: int = 0, force: bool = False) -> None:
        """Check a file's CRC-32 against the manifest (once per file version and process).

        Files larger than VERIFY_ON_LOAD_BYTES are checked only when ``force``
        (simdoc check): reading 24 GB of shingles on every run of a
        10^6-document index would cost more than the run. Their size, dtype
        and shape are still checked on every load, which catches truncation.
        """
        if not force and info.get("bytes", 0) > VERIFY_ON_LOAD_BYTES:
            return
        path = self.path / name
        st = _own_file(path)
        key = verify_key(path, st, info.get("crc32"))
        if "crc32" not in info or (key in VERIFIED and not force):
            return
        try:
            crc = crc32_file(path, offset)
        except OSError as exc:
            raise CorruptIndex(str(path), f"cannot be read ({exc.strerror or exc})") from None
        if crc != info["crc32"]:
            raise CorruptIndex(str(path), f"checksum mismatch (crc32 {crc:08x}, the manifest says {info['crc32']:08x})")
        VERIFIED.add(key)

    def load_array(self, name: str, info: dict, mmap: bool = True, verify: bool = True, force: bool = False) -> np.ndarray:
        """Load an array and check it against its manifest entry (size, dtype, shape, checksum)."""
        path = self.path / name
        size = _own_file(path).st_size
        if "bytes" in info and size != info["bytes"]:
            raise CorruptIndex(str(path), f"size is {size} bytes, the manifest says {info['bytes']} (truncated?)")
        # The header is parsed on its own first (any exception of numpy's parser is damage), and
        # checked against the manifest before numpy maps or reads a byte of the data.
        try:
            header = read_header(path)
        except (ValueError, OSError) as exc:
            raise CorruptIndex(str(path), f"not a readable .npy array ({exc})") from None
        if header.dtype.str != info.get("dtype") or list(header.shape) != list(info.get("shape", [])):
            raise CorruptIndex(
                str(path),
                f"holds {header.dtype.str} {list(header.shape)}, the manifest says {info.get('dtype')} {info.get('shape')}",
            )
        expected = header.offset + header.dtype.itemsize * int(np.prod(header.shape, dtype=np.int64))
        if size != expected:
            raise CorruptIndex(str(path), f"size is {size} bytes, its header says {expected}")
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise CorruptIndex(str(path), f"not a readable .npy array ({exc})") from None
        if verify:
            self.verify_crc(name, info, header.offset, force)
        return arr


_HELD: dict[str, int] = {}  # writer locks this process holds, so nested stages do not deadlock

"""The index directory: manifest, atomic writes, validated memory-mapped loads.

Layout (one directory per corpus)::

    manifest.json                     format version, every stage's parameters,
                                      files, and what each stage was built from
    docs.<build>.jsonl                one line per document: id, size, mtime, digest
    shingles.indptr.<build>.npy       int64  (n_docs + 1,)   CSR offsets
    shingles.data.<build>.npy         uint32 (nnz,)          sorted unique shingle hashes
    shingles.counts.<build>.npy       uint8  (nnz,)          multiplicity of each shingle, 255 = see overflow
    shingles.overflow.<build>.npy     int64  (m, 2)          (position, count) of counts >= 255
    minhash.family.<build>.npy        uint32 (2, num_perm)   the a and b of each permutation
    signatures.<build>.npy            uint32 (n_docs, num_perm)
    bands.<build>.npy                 uint64 (bands, n_docs) band key of each document
    buckets.<build>.npy               int64  (bands, n_nonempty) documents sorted by key

``<build>`` is the stage's build id. Files are written under a temporary
name, fsynced and renamed; the manifest is replaced last and only then are
files of older builds deleted. A run killed at any point therefore leaves
the previous manifest pointing at complete files of the previous build.

The manifest carries the CRC-32 of its own bytes and is checked against a
schema before anything in it is used (see :mod:`simdoc.manifest`).

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
(see :func:`fault_point`); the tests use it to kill writes at every step.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from simdoc.errors import CorruptIndex, IndexBusy, IndexError_, OutputError
from simdoc.manifest import dump as dump_manifest
from simdoc.manifest import parse as parse_manifest
from simdoc.manifest import validate as validate_manifest

try:  # zlib's CRC-32, computed with SIMD: ~55 GB/s here against zlib's ~4.3 GB/s
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; same values, slower
    from zlib import crc32

FORMAT = "simdoc-index"
# Version 3 keeps no shingles (verification reads the documents again); versions 1 and 2
# kept every shingle of every document and are not read: `--rebuild` replaces them.
FORMAT_VERSION = 3
READABLE_VERSIONS = (3,)
MANIFEST = "manifest.json"
VERIFY_ON_LOAD_BYTES = 1 << 30  # larger files: CRC checked by `simdoc check` only
LOCK = "lock"
READERS = "readers"
_CRC_CHUNK = 1 << 24


def fault_point(name: str) -> None:
    """Die here, without cleanup, if SIMDOC_FAULT names this point (crash tests only)."""
    if os.environ.get("SIMDOC_FAULT") == name:
        os._exit(75)


def _gf2_times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def _zero_byte_operators() -> list[list[int]]:
    """ops[k] appends 2**k zero bytes to a CRC-32 (GF(2) matrices, as in zlib)."""
    one_bit = [0xEDB88320] + [1 << (n - 1) for n in range(1, 32)]
    op = _gf2_square(_gf2_square(_gf2_square(one_bit)))  # 8 zero bits = one zero byte
    ops = [op]
    for _ in range(63):
        op = _gf2_square(op)
        ops.append(op)
    return ops


_ZERO_OPS: list[list[int]] = []


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc(A), crc(B) and len(B), as zlib's crc32_combine.

    Lets workers checksum the pieces they write, so that the pieces can be
    concatenated into one file without reading them back.
    """
    if len2 <= 0:
        return crc1
    if not _ZERO_OPS:
        _ZERO_OPS.extend(_zero_byte_operators())
    k = 0
    while len2:
        if len2 & 1:
            crc1 = _gf2_times(_ZERO_OPS[k], crc1)
        len2 >>= 1
        k += 1
    return crc1 ^ crc2


def copy_range(src: Path, dst_fd: int, nbytes: int, dst_offset: int) -> None:
    """Copy ``nbytes`` from the start of ``src`` to ``dst_fd`` at ``dst_offset``, inside the kernel when it can."""
    with open(src, "rb") as fh:
        left, offset = nbytes, 0
        try:
            while left:
                n = os.copy_file_range(fh.fileno(), dst_fd, left, offset, dst_offset + offset)
                if n == 0:
                    raise OSError("short copy")
                left -= n
                offset += n
        except (AttributeError, OSError):
            fh.seek(offset)
            while left:
                chunk = fh.read(min(left, _CRC_CHUNK))
                if not chunk:
                    raise OSError(f"{src} is shorter than expected")
                os.pwrite(dst_fd, chunk, dst_offset + offset)
                left -= len(chunk)
                offset += len(chunk)


def crc32_file(path: Path, offset: int = 0) -> int:
    crc = 0
    with open(path, "rb") as fh:
        fh.seek(offset)
        while chunk := fh.read(_CRC_CHUNK):
            crc = crc32(chunk, crc)
    return crc


# Names simdoc writes: <stem>.<16 hex build id>.<ext>, the manifest, and temporary
# files of those (".<name>.<random>.tmp"). Nothing else in a directory is ours.
_STEMS = (
    r"(docs|shingles\.(overflow|origin)|docs\.(id|source)(\.offsets)?|docs\.(offset|length|size|file_size|mtime_ns|n_shingles|added|how|status"
    r"|digest|file_digest|identity)|shingles\.(indptr|data|counts)|minhash\.family|signatures|bands|buckets|groups"
    r"|verified\.(keys|jaccard))"
)
_OWN = re.compile(rf"^({_STEMS}\.[0-9a-f]{{16}}\.(npy|jsonl)|manifest\.json|lock|readers)$")
_OWN_TMP = re.compile(rf"^\.({_STEMS}\.(tmp\.npy|tmp\.jsonl|[0-9a-f]{{16}}\.(npy|jsonl))|manifest\.json)\..+\.tmp$")


# Temporary files this process is still filling across a manifest write (a stage may hand
# one to the next): garbage collection spares them. A dead process's are not here.
_SPARED: set[str] = set()


def spare(path: Path, keep: bool = True) -> None:
    """Protect (or stop protecting) one of this process's temporary files from garbage collection."""
    (_SPARED.add if keep else _SPARED.discard)(str(Path(path).resolve()))


# A write failed because the file system has no room (or takes no writes): the index is
# not at fault, and the previous one is still whole (its files are never written again).
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def _no_room(path: Path, exc: OSError) -> OutputError:
    return OutputError(
        f"cannot write the index at {path}: {exc.strerror or exc}; it stays as its last completed stage left it",
        hint="free some space on that file system, or choose another --index"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        else "choose an --index on a file system where you may write",
    )


def _libc_fallocate():
    """Linux's fallocate(2), which fails on a file system that cannot reserve blocks (glibc's
    posix_fallocate would instead write a byte into every block: minutes on NFS)."""
    try:
        func = ctypes.CDLL(None, use_errno=True).fallocate64
    except (OSError, AttributeError):  # not Linux
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    func.restype = ctypes.c_int
    return func


_FALLOCATE = _libc_fallocate()


def reserve(fd: int, size: int) -> None:
    """Give a file its ``size`` bytes of disk now, where the file system can.

    A memory map written into a sparse file kills the process with SIGBUS when
    the disk fills; a reservation that fails is an OSError (ENOSPC) instead.
    Where reserving is not supported the file just stays sparse.
    """
    if _FALLOCATE is None or size <= 0:
        return
    if _FALLOCATE(fd, 0, 0, size) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err))


def is_own_file(name: str) -> bool:
    """True for the names of files simdoc writes in an index directory (and their temporaries)."""
    return bool(_OWN.match(name) or _OWN_TMP.match(name))

_NPY_HEADER = 128  # fixed header length of the arrays we stream, so it can be rewritten in place


def open_lock_file(path: Path) -> int:
    """A read-write descriptor of a lock file (``lock``, ``readers``), created if missing.

    The writer truncates its lock file and writes its pid into it, so that
    file must be simdoc's own: a symbolic link (even a dangling one) is never
    followed, and anything but a regular file with one name (a directory, a
    FIFO, a hard link to some other file) is refused.

    Raises
    ------
    IndexError_
        The name is taken by something else than a lock file.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    hint = f"remove {path} (simdoc makes a new one), and check who put it there"
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexError_(f"{path} is a symbolic link; simdoc never follows links for its lock files", hint=hint) from None
        if exc.errno == errno.EISDIR:
            raise IndexError_(f"{path} is a directory, not simdoc's lock file", hint=hint) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        what = "has another name (a hard link)" if stat.S_ISREG(st.st_mode) else "is not a regular file"
        raise IndexError_(f"{path} {what}, so it is not simdoc's lock file", hint=hint)
    return fd


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version-1.0 .npy header padded to exactly _NPY_HEADER bytes."""
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    body = repr(d).encode("latin1")
    pad = _NPY_HEADER - 10 - len(body) - 1
    if pad < 0:
        raise ValueError("shape too long for a fixed .npy header")
    return b"\x93NUMPY\x01\x00" + (_NPY_HEADER - 10).to_bytes(2, "little") + body + b" " * pad + b"\n"


def npy_offset(element: int, itemsize: int) -> int:
    """Byte offset of ``element`` in a .npy file with the fixed header :class:`NpyWriter` writes."""
    return _NPY_HEADER + element * itemsize


class NpyWriter:
    """Write rows to a .npy file of unknown final length, then publish it atomically.

    Rows are written in order, but not necessarily by this object: worker
    processes may write a piece of rows straight into :attr:`tmp` at a place
    handed to them (see ``batches.Sequencer``), and :meth:`written_elsewhere`
    then accounts for that piece. The CRC-32 is built in file order from the
    pieces' own CRCs, so the file is never read back.
    """

    def __init__(self, directory: Path, name: str, dtype, tail_shape: tuple[int, ...] = ()) -> None:
        self.directory = Path(directory)
        self.name = name
        self.dtype = np.dtype(dtype)
        self.tail_shape = tuple(tail_shape)
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.tail_shape, dtype=np.int64))
        self.fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.directory)
        self.tmp = Path(tmp)
        os.write(self.fd, _npy_header(self.dtype, (0, *self.tail_shape)))
        self.rows = 0
        self.crc = 0

    def position(self, row: int) -> int:
        """Byte offset in the file of ``row``."""
        return npy_offset(row, self.row_bytes)

    def append(self, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr, dtype=self.dtype)
        if arr.shape[1:] != self.tail_shape:
            raise ValueError(f"{self.name}: rows of shape {arr.shape[1:]}, expected {self.tail_shape}")
        view = memoryview(arr.reshape(-1).view(np.uint8))
        pos = self.position(self.rows)
        while view:
            n = os.pwrite(self.fd, view, pos)
            view, pos = view[n:], pos + n
        self.crc = crc32(arr.data, self.crc)
        self.rows += arr.shape[0]

    def written_elsewhere(self, rows: int, crc: int) -> None:
        """Account for ``rows`` rows another process wrote in place, whose CRC-32 is ``crc``."""
        self.crc = crc32_combine(self.crc, crc, rows * self.row_bytes)
        self.rows += rows

    def append_file(self, src: Path, nbytes: int, crc: int) -> None:
        """Append a raw piece written elsewhere (a worker's shard), knowing its CRC-32."""
        if nbytes % self.row_bytes:
            raise ValueError(f"{src}: {nbytes} bytes is not a whole number of rows")
        copy_range(src, self.fd, nbytes, self.position(self.rows))
        self.written_elsewhere(nbytes // self.row_bytes, crc)

    def close_unpublished(self) -> Path:
        """Complete the file but keep its temporary name (a later stage publishes it)."""
        os.pwrite(self.fd, _npy_header(self.dtype, (self.rows, *self.tail_shape)), 0)
        os.ftruncate(self.fd, self.position(self.rows))
        os.close(self.fd)
        self.fd = -1
        return self.tmp

    def finish(self) -> dict:
        os.pwrite(self.fd, _npy_header(self.dtype, (self.rows, *self.tail_shape)), 0)
        # Pieces written in place past the last row would be garbage: the file ends at the last row.
        os.ftruncate(self.fd, self.position(self.rows))
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        fault_point(f"publish:{self.name.split('.')[0]}")
        os.replace(self.tmp, self.directory / self.name)
        return _array_info(self.directory / self.name, self.dtype, (self.rows, *self.tail_shape), self.crc)

    def abort(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(OSError):
            self.tmp.unlink()


# json.dumps with options builds a new encoder per call; one encoder for every record
# saves ~0.8 us of the ~3.4 us a docs-table line costs.
_RECORD_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)


class JsonlWriter:
    """Write JSON lines one record at a time (no list of dicts in memory), then publish atomically.

    ``columns``: fields whose values are also kept in lists as records are
    added. Once the file is published, :meth:`IndexStore.published_columns`
    hands them back in this process instead of parsing the file again (the
    ``pairs`` command reads the ids of the docs table it has just written).
    ``optional``: kept fields that some records lack (None in their place).
    """

    def __init__(
        self, directory: Path, name: str, columns: tuple[str, ...] = (), optional: tuple[str, ...] = ()
    ) -> None:
        self.directory = Path(directory)
        self.name = name
        self.columns: dict[str, list] = {f: [] for f in columns}
        self.optional: dict[str, list] = {f: [] for f in optional}
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.directory)
        self.tmp = Path(tmp)
        self.fh = os.fdopen(fd, "wb", buffering=1 << 20)
        self.crc = 0
        self.size = 0
        self.count = 0

    def add(self, record: dict) -> None:
        # File names that are not UTF-8 arrive as surrogates: store their original bytes.
        line = (_RECORD_ENCODER.encode(record) + "\n").encode("utf-8", "surrogateescape")
        self.fh.write(line)
        self.crc = crc32(line, self.crc)
        self.size += len(line)
        self.count += 1
        for f in self.columns:
            if f in record:
                self.columns[f].append(record[f])
        if any(len(col) != self.count for col in self.columns.values()):
            # A record without a kept field: keep only the complete columns.
            self.columns = {f: col for f, col in self.columns.items() if len(col) == self.count}
        for f, col in self.optional.items():
            col.append(record.get(f))

    def finish(self) -> dict:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        fault_point(f"publish:{self.name.split('.')[0]}")
        path = self.directory / self.name
        os.replace(self.tmp, path)
        _fsync_dir(self.directory)
        _PUBLISHED_COLUMNS.clear()  # one file's columns at a time: they can be large
        if self.columns or self.optional:
            _PUBLISHED_COLUMNS[_verify_key(path, path.stat(), self.crc)] = self.columns | self.optional
        return {"bytes": self.size, "crc32": self.crc}

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()


def _array_info(path: Path, dtype, shape, crc: int) -> dict:
    """The manifest entry of an array this process has just published.

    Its checksum was computed from the bytes written, so later loads in this
    process need not read the file again to check it (``simdoc check`` does).
    """
    st = path.stat()
    _VERIFIED.add(_verify_key(path, st, crc))
    return {"dtype": np.dtype(dtype).str, "shape": list(shape), "bytes": st.st_size, "crc32": crc}


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


def _verify_key(path: Path, st: os.stat_result, crc) -> tuple:
    return (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size, crc)


class IndexStore:
    """One index directory. Creates nothing until the first write."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    # -- manifest ---------------------------------------------------------
    def exists(self) -> bool:
        return (self.path / MANIFEST).is_file()

    def read_manifest(self, discard_damaged: bool = False) -> dict:
        """The manifest, or an empty one if the directory holds no index yet.

        With ``discard_damaged`` an unreadable manifest of a simdoc index (one
        whose other files are all simdoc's) counts as no index: for --rebuild.
        """
        mpath = self.path / MANIFEST
        if discard_damaged and mpath.exists():
            try:
                return self.read_manifest()
            except IndexError_:
                if all(is_own_file(p.name) for p in self.path.iterdir()):
                    return self._empty_manifest()
                raise
        if not mpath.exists():
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
        try:  # never publish what every reader would refuse (simdoc.manifest's tables are behind)
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
                spared = str(p.resolve()) in _SPARED
                if p.name not in keep and not spared and is_own_file(p.name) and p.is_file():
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
            if exc.errno in (*_NO_ROOM, errno.EACCES, errno.EPERM):
                raise _no_room(self.path, exc) from None
            raise
        try:
            with contextlib.suppress(OSError):  # who holds the lock is a note for IndexBusy, nothing more
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
            _HELD[key] = 1
            try:
                yield
            except BaseException as exc:
                no_room = isinstance(exc, OSError) and exc.errno in _NO_ROOM
                self._discard_failed_run()  # temporaries hold the space the next run needs
                if created:
                    self._remove_unused_dir()
                if no_room:
                    raise _no_room(self.path, exc) from None
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
                if _OWN_TMP.match(p.name) and p.is_file():
                    _SPARED.discard(str(p.resolve()))
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
                            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                            raise IndexBusy(str(self.path), holder, wait) from None
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
        if self.path.is_dir() and not self.exists() and any(not is_own_file(p.name) for p in self.path.iterdir()):
            raise IndexError_(
                f"{self.path} already holds other files and is not a simdoc index",
                hint="choose an empty or new directory for --index",
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexError_(f"cannot create index directory {self.path}: {exc.strerror or exc}") from None

    def write_bytes(self, name: str, payload: bytes) -> dict:
        self.ensure_dir()
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.path)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            if name != MANIFEST:
                fault_point(f"publish:{name.split('.')[0]}")
            os.replace(tmp, self.path / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(self.path)
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

    def create_array(self, name: str, dtype, shape: tuple[int, ...]) -> tuple[np.memmap, Path]:
        """A writable memory-mapped array under a temporary name; publish with :meth:`publish`.

        The header is the same fixed one :class:`NpyWriter` writes, so an array
        filled in place by workers is byte-identical to one streamed here.
        """
        self.ensure_dir()
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.path)
        header = _npy_header(np.dtype(dtype), tuple(shape))
        size = len(header) + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        with os.fdopen(fd, "wb") as fh:
            fh.write(header)
            fh.truncate(size)
            fh.flush()
            reserve(fh.fileno(), size)
        arr = np.load(tmp, mmap_mode="r+")
        return arr, Path(tmp)

    def publish(self, tmp: Path, name: str, arr: np.memmap) -> dict:
        arr.flush()
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        crc = crc32_file(Path(tmp), arr.offset)
        fault_point(f"publish:{name.split('.')[0]}")
        os.replace(tmp, self.path / name)
        return _array_info(self.path / name, arr.dtype, arr.shape, crc)

    def write_jsonl(self, name: str, records: Iterable[dict]) -> dict:
        payload = "".join(_RECORD_ENCODER.encode(r) + "\n" for r in records)
        # File names that are not UTF-8 arrive as surrogates: store their original bytes.
        return self.write_bytes(name, payload.encode("utf-8", "surrogateescape"))

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
        key = _verify_key(path, st, info.get("crc32"))
        if "crc32" not in info or (key in _VERIFIED and not force):
            return
        try:
            crc = crc32_file(path, offset)
        except OSError as exc:
            raise CorruptIndex(str(path), f"cannot be read ({exc.strerror or exc})") from None
        if crc != info["crc32"]:
            raise CorruptIndex(str(path), f"checksum mismatch (crc32 {crc:08x}, the manifest says {info['crc32']:08x})")
        _VERIFIED.add(key)

    def load_array(self, name: str, info: dict, mmap: bool = True, verify: bool = True, force: bool = False) -> np.ndarray:
        """Load an array and check it against its manifest entry (size, dtype, shape, checksum)."""
        path = self.path / name
        size = _own_file(path).st_size
        if "bytes" in info and size != info["bytes"]:
            raise CorruptIndex(str(path), f"size is {size} bytes, the manifest says {info['bytes']} (truncated?)")
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise CorruptIndex(str(path), f"not a readable .npy array ({exc})") from None
        if arr.dtype.str != info.get("dtype") or list(arr.shape) != list(info.get("shape", [])):
            raise CorruptIndex(
                str(path),
                f"holds {arr.dtype.str} {list(arr.shape)}, the manifest says {info.get('dtype')} {info.get('shape')}",
            )
        if verify:
            self.verify_crc(name, info, arr.offset if isinstance(arr, np.memmap) else _npy_offset(path), force)
        return arr

    def iter_jsonl(self, name: str, info: dict) -> Iterator[dict]:
        """The records of a JSON-lines file, checked like :meth:`read_jsonl`, one at a time."""
        path = self.path / name
        _own_file(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CorruptIndex(str(path), f"cannot be read ({exc.strerror or exc})") from None
        if "bytes" in info and len(raw) != info["bytes"]:
            raise CorruptIndex(str(path), f"size is {len(raw)} bytes, the manifest says {info['bytes']} (truncated?)")
        if "crc32" in info and crc32(raw) != info["crc32"]:
            raise CorruptIndex(str(path), "checksum mismatch")
        start = 0
        try:
            while start < len(raw):
                # Parse ~4 MB of lines with one json.loads (as a JSON array): one call per
                # line cost more than the parsing. A JSON line holds no raw newline.
                end = raw.find(b"\n", start + _JSONL_CHUNK)
                end = len(raw) if end < 0 else end
                text = raw[start:end].decode("utf-8", "surrogateescape").strip("\n")
                start = end + 1
                if not text:
                    continue
                if "\n\n" in text:  # blank lines (not ours): one line at a time
                    yield from (json.loads(line) for line in text.split("\n") if line)
                else:
                    yield from json.loads("[" + text.replace("\n", ",") + "]")
        except ValueError as exc:
            raise CorruptIndex(str(path), f"a line is not valid JSON ({exc})") from None

    def published_columns(self, name: str, info: dict, fields: list[str]) -> list[list] | None:
        """Columns of a JSON-lines file this process wrote (see :class:`JsonlWriter`), or None.

        None unless the file is still the very one written (same inode,
        mtime, size and checksum) and every record had every field asked for.
        """
        path = self.path / name
        try:
            key = _verify_key(path, path.stat(), info.get("crc32"))
        except OSError:
            return None
        kept = _PUBLISHED_COLUMNS.get(key)
        if kept is None or any(f not in kept for f in fields):
            return None
        return [kept[f] for f in fields]

    def read_jsonl(self, name: str, info: dict) -> list[dict]:
        """All records of a JSON-lines file, checked against the manifest (size, checksum)."""
        return list(self.iter_jsonl(name, info))


_VERIFIED: set = set()
_PUBLISHED_COLUMNS: dict[tuple, dict[str, list]] = {}

_JSONL_CHUNK = 4 << 20


def _npy_offset(path: Path) -> int:
    with open(path, "rb") as fh:
        major, _ = np.lib.format.read_magic(fh)
        if major == 1:
            np.lib.format.read_array_header_1_0(fh)
        else:
            np.lib.format.read_array_header_2_0(fh)
        return fh.tell()


_HELD: dict[str, int] = {}  # writer locks this process holds, so nested stages do not deadlock

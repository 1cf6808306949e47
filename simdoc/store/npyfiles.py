"""Checked .npy files: written as a stream with a running CRC-32, fsynced, and described for the manifest.

Every array of an index is a plain ``.npy`` file with a fixed 128-byte
header (:data:`_NPY_HEADER`), so that a writer can stream rows of unknown
count and rewrite the header once it knows the shape. The CRC-32 of the
bytes after the header is computed while writing (zlib-ng: ~55 GB/s here)
and recorded in the manifest with size, dtype and shape (:func:`array_info`);
:class:`PieceWriter` makes an array of known shape whose pieces other
processes (the workers of a Dask cluster) write in place with
:func:`write_piece`; :func:`crc32_combine` joins the pieces' CRCs without
reading them again. A write that fails for want of room is an
:class:`~simdoc.errors.OutputError` naming the file (exit 6).

Every file is first written under a temporary name (:func:`new_temporary`)
and renamed into place, with the mode a file the user makes would have
(0666 less the umask), not ``mkstemp``'s 0600: an index is often shared.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from simdoc.errors import OutputError

try:  # zlib's CRC-32, computed with SIMD: ~55 GB/s here against zlib's ~4.3 GB/s
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; same values, slower
    from zlib import crc32


_CRC_CHUNK = 1 << 18  # bytes crc32_file reads at a time, into the same buffer


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


def crc32_file(path: Path, offset: int = 0) -> int:
    # Read into one buffer, over and over: a new chunk each read is fresh memory, whose pages the
    # kernel maps and zeroes first (~0.03 CPU-s a run for the ~90 MB an index of 10^5 documents
    # checks on load; issue 29), where the same small buffer stays mapped, and in cache.
    buf = bytearray(_CRC_CHUNK)
    view = memoryview(buf)
    crc = 0
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        while n := fh.readinto(buf):
            crc = crc32(view[:n], crc)
    return crc


# A write failed because the file system has no room (or takes no writes): the index is
# not at fault, and the previous one is still whole (its files are never written again).
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def no_room(path: Path, exc: OSError) -> OutputError:
    return OutputError(
        f"cannot write the index at {path}: {exc.strerror or exc}; it stays as its last completed stage left it",
        hint="free some space on that file system, or choose another --index"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        else "choose an --index on a file system where you may write",
    )


_NPY_HEADER = 128  # fixed header length of the arrays we stream, so it can be rewritten in place


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def new_temporary(directory: str | Path, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file in ``directory`` (its descriptor, its path) as ``tempfile.mkstemp`` makes one (a
    name of its own, no link followed), but with mode 0666 less the umask: renamed into an index,
    it is readable by whoever may read the folder (mkstemp's 0600 is its maker's alone)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no temporary name left", str(directory))


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


WRITEBACK_BYTES = 32 << 20  # written since the last hint: the kernel is asked to start writing it out


def _sync_file_range():
    """The C library's ``sync_file_range`` (Linux), or None."""
    import ctypes

    try:
        func = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return func


_WRITEBACK: list = []  # [the function or None], looked up once
SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int) -> None:
    """Ask the kernel to start writing out the file's dirty pages now, without waiting for them
    (``sync_file_range(SYNC_FILE_RANGE_WRITE)``; nothing where it is missing). An array written
    while the stage computes is then mostly on disk by its ``fsync``: the 512 MB signature
    matrix of 10^6 records waited 0.25 s in its fsync, 0.01 s with a hint every 32 MB."""
    if not _WRITEBACK:
        _WRITEBACK.append(_sync_file_range())
    if _WRITEBACK[0] is not None:
        _WRITEBACK[0](fd, 0, 0, SYNC_FILE_RANGE_WRITE)  # a hint: its result does not matter


class _TemporaryArray:
    """A .npy file written under a temporary name of ``directory`` (``.<name>.<random>.tmp``), then
    published atomically as ``name``; :meth:`abort` removes it. Every :data:`WRITEBACK_BYTES`
    written, the kernel is asked to start writing them out (:func:`start_writeback`)."""

    _unsynced = 0

    def _wrote(self, nbytes: int) -> None:
        self._unsynced += nbytes
        if self._unsynced >= WRITEBACK_BYTES:
            self._unsynced = 0
            start_writeback(self.fd)

    def __init__(self, directory: Path, name: str, dtype, header_shape: tuple[int, ...]) -> None:
        self.directory = Path(directory)
        self.name = name
        self.dtype = np.dtype(dtype)
        self.fd, tmp = new_temporary(self.directory, f".{name}.", ".tmp")
        self.tmp = Path(tmp)
        try:
            os.write(self.fd, _npy_header(self.dtype, header_shape))
        except BaseException:
            self.abort()
            raise

    def _publish(self, shape: tuple[int, ...], crc: int) -> dict:
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        fault_point(f"publish:{self.name.split('.')[0]}")
        os.replace(self.tmp, self.directory / self.name)
        return array_info(self.directory / self.name, self.dtype, shape, crc)

    def abort(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(OSError):
            self.tmp.unlink()


class NpyWriter(_TemporaryArray):
    """Write rows to a .npy file of unknown final length, in order, then publish it atomically.

    The CRC-32 is computed from the rows as they are written, so the file is
    never read back. (An array of known shape whose pieces other processes
    write is a :class:`PieceWriter`.)
    """

    def __init__(self, directory: Path, name: str, dtype, tail_shape: tuple[int, ...] = ()) -> None:
        super().__init__(directory, name, dtype, (0, *tail_shape))
        self.tail_shape = tuple(tail_shape)
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.tail_shape, dtype=np.int64))
        self.rows = 0
        self.crc = 0

    def position(self, row: int) -> int:
        """Byte offset in the file of ``row``."""
        return npy_offset(row, self.row_bytes)

    def append(self, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr, dtype=self.dtype)
        if arr.shape[1:] != self.tail_shape:
            raise ValueError(f"{self.name}: rows of shape {arr.shape[1:]}, expected {self.tail_shape}")
        _pwrite_all(self.fd, arr, self.position(self.rows))
        self.crc = crc32(arr.data, self.crc)
        self.rows += arr.shape[0]
        self._wrote(arr.nbytes)

    def finish(self) -> dict:
        os.pwrite(self.fd, _npy_header(self.dtype, (self.rows, *self.tail_shape)), 0)
        # Pieces written in place past the last row would be garbage: the file ends at the last row.
        os.ftruncate(self.fd, self.position(self.rows))
        return self._publish((self.rows, *self.tail_shape), self.crc)


class PieceWriter(_TemporaryArray):
    """An array of known shape whose pieces other processes write in place, then published atomically.

    The data plane of a Dask cluster: the client makes the file (header and
    room for every element, under a temporary name it owns), hands workers
    its path and where each piece goes, and each worker writes its piece with
    :func:`write_piece` and sends back only the piece's place and CRC-32.
    :meth:`finish` checks that the pieces cover the array exactly once,
    joins their CRCs in file order (:func:`crc32_combine`) and publishes the
    file: no byte of it passes through the client.
    """

    def __init__(self, directory: Path, name: str, dtype, shape: tuple[int, ...]) -> None:
        super().__init__(directory, name, dtype, tuple(int(x) for x in shape))
        self.shape = tuple(int(x) for x in shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.pieces: dict[int, tuple[int, int]] = {}  # first element -> (elements, crc)
        try:
            os.ftruncate(self.fd, npy_offset(self.size, self.dtype.itemsize))  # sparse until written
        except BaseException:
            self.abort()
            raise

    def written(self, start: int, length: int, crc: int) -> None:
        """Account for ``length`` elements from element ``start`` (of the flattened array), written elsewhere."""
        if length:
            self.pieces[int(start)] = (int(length), int(crc))

    def write(self, start: int, arr: np.ndarray) -> None:
        """Write a piece from this process."""
        self.written(start, arr.size, write_piece(self.fd, start, arr, self.dtype))
        self._wrote(arr.size * self.dtype.itemsize)

    def finish(self) -> dict:
        crc, at = 0, 0
        for start in sorted(self.pieces):
            length, piece_crc = self.pieces[start]
            if start != at:
                break
            crc = crc32_combine(crc, piece_crc, length * self.dtype.itemsize)
            at += length
        if at != self.size:
            raise RuntimeError(f"{self.name}: pieces cover elements [0, {at}) of {self.size}, or overlap")
        return self._publish(self.shape, crc)


def _pwrite_all(fd: int, arr: np.ndarray, pos: int) -> None:
    """Write the bytes of the contiguous ``arr`` at ``pos``, however many calls it takes."""
    view = memoryview(arr.reshape(-1).view(np.uint8))
    while view:
        n = os.pwrite(fd, view, pos)
        view, pos = view[n:], pos + n


def write_piece(target: str | int, start: int, arr: np.ndarray, dtype=None) -> int:
    """Write ``arr`` at element ``start`` of the .npy file ``target`` (a path, or an open descriptor)
    made by :class:`PieceWriter`; its CRC-32.

    A path is opened without following a symbolic link, and the piece is
    fsynced before this returns (the client publishes the file only after
    every piece is on disk).
    """
    arr = np.ascontiguousarray(arr, dtype=dtype or arr.dtype)
    fd = target if isinstance(target, int) else os.open(target, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        _pwrite_all(fd, arr, npy_offset(start, arr.dtype.itemsize))
        if not isinstance(target, int):
            os.fsync(fd)
    finally:
        if not isinstance(target, int):
            os.close(fd)
    return crc32(arr.data)


def array_info(path: Path, dtype, shape, crc: int) -> dict:
    """The manifest entry of an array this process has just published.

    Its checksum was computed from the bytes written, so later loads in this
    process need not read the file again to check it (``simdoc check`` does).
    """
    st = path.stat()
    VERIFIED.add(verify_key(path, st, crc))
    return {"dtype": np.dtype(dtype).str, "shape": list(shape), "bytes": st.st_size, "crc32": crc}


class NpyHeader(NamedTuple):
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int  # where the data begins


def read_header(path: Path) -> NpyHeader:
    """The dtype, shape and data offset a .npy file's header declares, parsed defensively.

    numpy parses the header's dict with Python's tokenizer and
    ``ast.literal_eval``, so a damaged byte there can raise almost anything
    (tokenize.TokenError, SyntaxError, TypeError, RecursionError, ...):
    whatever it raises is reported as one ValueError, the damaged-file error
    of the caller. A Fortran-ordered or object array is refused too: simdoc
    writes neither, and a Fortran flag set by damage would transpose the data
    silently.

    Raises
    ------
    OSError
        The file cannot be read.
    ValueError
        The header is not one simdoc writes.
    """
    with open(path, "rb") as fh:
        try:
            major, _ = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = read(fh)
            offset = fh.tell()
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of numpy's parser is damage, never a crash
            raise ValueError(f"its .npy header cannot be parsed ({type(exc).__name__}: {exc})") from None
    if fortran_order is not False:
        raise ValueError("its .npy header says Fortran order, which simdoc never writes")
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise ValueError(f"its .npy header declares the dtype {dtype!r}, which simdoc never writes")
    return NpyHeader(dtype, tuple(int(x) for x in shape), offset)


def data_offset(path: Path) -> int:
    """Where the data of a .npy file begins (ValueError if its header is damaged)."""
    return read_header(path).offset


def fault_point(name: str) -> None:
    """Die here, without cleanup, if SIMDOC_FAULT names this point (crash tests only)."""
    if os.environ.get("SIMDOC_FAULT") == name:
        os._exit(75)


_ZERO_OPS: list[list[int]] = []


def verify_key(path: Path, st: os.stat_result, crc) -> tuple:
    return (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size, crc)


VERIFIED: set = set()

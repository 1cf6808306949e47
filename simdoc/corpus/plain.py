"""Plain files of the corpus read again, leanly, for verification: their texts if their bytes are the ones indexed.

Verification reads tens of thousands of small files again (the documents
of the candidate pairs), each read whole when it was indexed (``how`` is
``whole``: not compressed, not HTML, not a file of members, at most
:data:`simdoc.corpus.streaming.STREAM_BYTES`). :func:`read_again_into` reads a
batch of them into one buffer, each in the fewest system calls: one
non-blocking open that does not follow a final symbolic link, one ``fstat``
(a regular file, of the size indexed: else it is not read at all), one
read, one close; then the digest of the bytes decides. With numba on Linux
these calls are made for the whole batch in one compiled loop
(:func:`simdoc.kernels_read.read_files`), and only a file that loop leaves
(it changed while read, or is not as indexed) is read again one by one.

Each text is given as the shingle stage's reader
(:func:`simdoc.corpus.files.read_plain`) gives it: an ASCII file's bytes as
read, any other as its UTF-8 bytes to be decoded (a leading byte-order mark
left out, invalid bytes replaced), so that it shingles exactly as it did
when indexed. Only for a local corpus read without ``--max-bytes`` (a cut
file's digest is of its prefix, an object's read carries its ETag): the
caller reads the others the general way.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence

import numpy as np

from simdoc.corpus.encodings import UNDECODABLE, unicode_bom
from simdoc.corpus.files import BINARY_SNIFF, NOFOLLOW, PLAIN_OPEN, read_on

BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, dropped from the start of a text as "utf-8-sig" drops it
WIDE = -2  # read_again_into's start of a file in UTF-16 or UTF-32: the caller reads it the general way


def read_again_into(
    paths: Sequence[str | None], sizes: Sequence[int], digests: np.ndarray, follow_symlinks: bool = False
) -> tuple[bytearray, np.ndarray, np.ndarray]:
    """Each file's text if it still has ``sizes[i]`` bytes whose BLAKE2b-128 is ``digests[i]``
    (as indexed), read into one buffer: (buffer, starts, ends).

    File i's text is ``buffer[starts[i]:ends[i]]``, its bytes as read with a leading
    byte-order mark left out: decoded as UTF-8 (``errors="surrogateescape"``) they are the
    ``str`` that :func:`simdoc.corpus.files.read_plain` gives; an ASCII file's bytes are
    the ones it gives. ``starts[i]`` is -1 where the file cannot be read, is no longer a
    regular file, has become a symbolic link (unless ``follow_symlinks``), is binary (a NUL
    byte, as the scan skips it) or its bytes are not those indexed; and for a ``paths[i]``
    of None; -2 (:data:`WIDE`) where its bytes start with a UTF-16 or UTF-32 byte-order mark,
    as indexed or not: its text is not UTF-8, and the caller reads it the general way
    (:func:`simdoc.corpus.files.read_document`). ``digests``: (n, 16) uint8. A FIFO or device put in a file's place is never
    read: the open does not block (O_NONBLOCK) and the ``fstat`` after it finds it is not
    a regular file.
    """
    n = len(sizes)
    starts, ends = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    flags = PLAIN_OPEN if follow_symlinks else PLAIN_OPEN | NOFOLLOW
    sizes = np.asarray(sizes, np.int64)
    named = [i for i in range(n) if paths[i] is not None]
    if len(named) > 1 and _compiled():
        buf, again = _read_together(paths, sizes, digests, named, flags, starts, ends)
    else:
        buf, again = bytearray(), named
    if again:  # each in its own room, a byte longer than its size (a file that grew is told apart)
        room = len(buf) + np.concatenate([[0], np.cumsum(sizes[again] + 1)])
        buf.extend(bytes(int(room[-1]) - len(buf)))
        for i, at in zip(again, room.tolist()):
            _read_one(paths[i], int(sizes[i]), digests[i], flags, buf, at, starts, ends, i)
    return buf, starts, ends


def _compiled() -> bool:
    from simdoc.corpus.plain_batch import available

    return available()


def _read_together(paths, sizes: np.ndarray, digests: np.ndarray, named: list[int], flags: int, starts, ends) -> tuple[bytearray, list[int]]:
    """The files of ``named`` read in one compiled loop (:func:`simdoc.kernels_read.read_files`:
    the calls of :func:`_read_one`, no ``statx`` after the read: the digest decides), one after another in
    the buffer, and checked as :func:`_read_one` checks them; those it left, to read one by one.

    The checks are made on the whole batch's columns: only the digests are a call a file (a
    loop over the files in Python, with an item of each array at each step, cost 0.18 CPU-s
    more than the digests at c100k's 43,833 files)."""
    from simdoc import kernels_read

    buf = bytearray(int(sizes[named].sum()) + 1)
    into = np.frombuffer(buf, dtype=np.uint8)  # the kernel writes into the bytearray itself
    at, state = kernels_read.read_files([paths[i] for i in named], sizes[named], flags, BINARY_SNIFF, into, recheck=False)[1:]
    named_a = np.asarray(named, dtype=np.int64)
    read = (state & kernels_read.READ) != 0
    again = named_a[~read].tolist()
    wide = read & _wide_marks(into, at)
    starts[named_a[wide]] = WIDE
    k = np.flatnonzero(read & ~wide & ((state & kernels_read.NUL) == 0))
    a, b = at[k], at[k + 1]
    view = memoryview(buf)
    blake2b = hashlib.blake2b
    got = b"".join([blake2b(view[x:y], digest_size=16).digest() for x, y in zip(a.tolist(), b.tolist())])
    view.release()
    same = (np.frombuffer(got, dtype=np.uint8).reshape(-1, 16) == np.asarray(digests)[named_a[k]].reshape(-1, 16)).all(axis=1)
    k, a, b = k[same], a[same], b[same]
    # A leading byte-order mark is left out of the text (the buffer has a byte past the last file).
    bom = b - a >= 3
    for j, byte in enumerate(BOM):
        bom &= into[np.minimum(a + j, len(into) - 1)] == byte
    del into  # the bytearray may grow after this (files read one by one)
    starts[named_a[k]] = a + 3 * bom
    ends[named_a[k]] = b
    return buf, again


def _wide_marks(into: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Which of the files ``into[at[i]:at[i + 1]]`` start with a UTF-16 or UTF-32 byte-order mark
    (:func:`simdoc.corpus.encodings.unicode_bom`), on the columns (``into`` has a byte past the last)."""
    a, size = at[:-1], np.diff(at)
    byte = [into[np.minimum(a + j, len(into) - 1)] for j in range(4)]
    utf16 = (size >= 2) & (((byte[0] == 0xFF) & (byte[1] == 0xFE)) | ((byte[0] == 0xFE) & (byte[1] == 0xFF)))
    return utf16 | ((size >= 4) & (byte[0] == 0) & (byte[1] == 0) & (byte[2] == 0xFE) & (byte[3] == 0xFF))


def _read_one(path: str, size: int, digest: np.ndarray, flags: int, buf: bytearray, at: int, starts, ends, i: int) -> None:
    """Read one file into ``buf[at:at + size + 1]`` and, if it is as indexed, set its span."""
    view = memoryview(buf)
    try:
        try:
            fd = os.open(path, flags)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return
            got = os.readv(fd, [view[at : at + size + 1]])
            if got != size:  # short, or it grew: read on as the scan does (the digest decides)
                raw = read_on(fd, bytes(view[at : at + got]), size)
                if len(raw) != size:
                    return
                view[at : at + size] = raw
        except OSError:
            return
        finally:
            os.close(fd)
        text = view[at : at + size]
        if unicode_bom(text[:4]) is not None:
            starts[i] = WIDE
            return
        if hashlib.blake2b(text, digest_size=16).digest() != digest.tobytes() or buf.find(0, at, at + min(size, BINARY_SNIFF)) >= 0:
            return
        starts[i], ends[i] = (at + 3 if buf.startswith(BOM, at, at + size) else at), at + size
    finally:
        view.release()


def text_at(buf: bytearray, start: int, end: int) -> str | bytes:
    """A text read into ``buf`` as the scan read it (:func:`simdoc.corpus.files.read_plain`): ASCII
    bytes as they are, any other decoded (a byte not UTF-8 as itself; the byte-order mark is not in the span)."""
    raw = bytes(buf[start:end])
    return raw if raw.isascii() else raw.decode("utf-8", UNDECODABLE)

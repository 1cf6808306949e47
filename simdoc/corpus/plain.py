"""A plain file of the corpus read again, leanly, for verification: its text if its bytes are the ones indexed.

Verification reads tens of thousands of small files again (the documents
of the candidate pairs), each read whole when it was indexed (``how`` is
``whole``: not compressed, not HTML, not a file of members, at most
:data:`simdoc.corpus.streaming.STREAM_BYTES`). :func:`read_again_if_same` does for
one of them what :func:`simdoc.corpus.read.read_again` does, in the fewest
system calls: one non-blocking open that does not follow a final symbolic
link, one ``fstat`` (a regular file, of the size indexed: else it is not
read at all), one read, one close; then the digest of the bytes decides.

The text comes back as :func:`simdoc.corpus.files.read_document` gives it
with ``keep_ascii``: an ASCII file's bytes as read, any other decoded from
UTF-8 (a leading byte-order mark dropped, invalid bytes replaced), so that
it shingles exactly as it did when indexed. Only for a local corpus read
without ``--max-bytes`` (a cut file's digest is of its prefix, an object's
read carries its ETag): the caller reads the others the general way.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence

import numpy as np

from simdoc.corpus.files import BINARY_SNIFF, NOFOLLOW, PLAIN_OPEN, read_on

BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, dropped from the start of a text as "utf-8-sig" drops it


def read_again_if_same(path: str, size: int, digest: bytes, follow_symlinks: bool = False) -> str | bytes | None:
    """The text of the file at ``path`` if it still has ``size`` bytes whose BLAKE2b-128 is
    ``digest`` (as indexed); None if it cannot be read, is no longer a regular file, has
    become a symbolic link (unless ``follow_symlinks``), or its bytes are not those indexed.

    A FIFO or device put in the file's place is never read: the open does not block
    (O_NONBLOCK) and the ``fstat`` after it finds it is not a regular file.
    """
    try:
        fd = os.open(path, PLAIN_OPEN if follow_symlinks else PLAIN_OPEN | NOFOLLOW)
    except OSError:  # gone, a link now (ELOOP), not readable: not the document indexed
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None  # another size: another digest (read_again reads it to learn that)
        raw = os.read(fd, size + 1)  # one byte more: a file that grew since its fstat is told apart
        if len(raw) != size:  # a short read, or it grew: read on as the scan does (the digest decides)
            raw = read_on(fd, raw, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if hashlib.blake2b(raw, digest_size=16).digest() != digest or b"\x00" in raw[:BINARY_SNIFF]:
        return None
    if raw.isascii():
        return raw
    return raw.decode("utf-8-sig", errors="replace")


def read_again_into(
    paths: Sequence[str | None], sizes: Sequence[int], digests: np.ndarray, follow_symlinks: bool = False
) -> tuple[bytearray, np.ndarray, np.ndarray]:
    """:func:`read_again_if_same` of each file, read into one buffer: (buffer, starts, ends).

    File i's text is ``buffer[starts[i]:ends[i]]``, its bytes as read with a leading
    byte-order mark left out: decoded as UTF-8 (with ``errors="replace"``) they are the
    ``str`` that :func:`read_again_if_same` gives; an ASCII file's bytes are the ones it
    gives. ``starts[i]`` is -1 where it gives None (and for a ``paths[i]`` of None).
    ``digests``: (n, 16) uint8, BLAKE2b-128 of each file as indexed.
    """
    n = len(sizes)
    # Each file's room is a byte longer than its size: a file that grew since it was indexed is told apart.
    room = np.zeros(n + 1, np.int64)
    np.cumsum(np.asarray(sizes, np.int64) + 1, out=room[1:])
    buf = bytearray(int(room[-1]))
    view = memoryview(buf)
    starts, ends = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    flags = PLAIN_OPEN if follow_symlinks else PLAIN_OPEN | NOFOLLOW
    at_list = room.tolist()
    for i, (path, size) in enumerate(zip(paths, sizes)):
        if path is None:
            continue
        at = at_list[i]
        try:
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                continue
            got = os.readv(fd, [view[at : at + size + 1]])
            if got != size:  # short, or it grew: read on as the scan does (the digest decides)
                raw = read_on(fd, bytes(view[at : at + got]), size)
                if len(raw) != size:
                    continue
                view[at : at + size] = raw
        except OSError:
            continue
        finally:
            os.close(fd)
        text = view[at : at + size]
        if hashlib.blake2b(text, digest_size=16).digest() != digests[i].tobytes() or buf.find(0, at, at + min(size, BINARY_SNIFF)) >= 0:
            continue
        starts[i], ends[i] = (at + 3 if buf.startswith(BOM, at, at + size) else at), at + size
    return buf, starts, ends

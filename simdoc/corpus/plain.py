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

from simdoc.corpus.files import BINARY_SNIFF, NOFOLLOW, PLAIN_OPEN, read_on


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

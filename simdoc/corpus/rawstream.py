"""The compressed side of a WARC file's bytes: read through a digest, and inflated a feed at a time.

:class:`HashedReader` is a raw file whose every byte read goes through the
file's digest (the decompressing readers of :mod:`simdoc.corpus.warcio`,
and ``dedup --write``, which checks the bytes it copies are the ones indexed).

:func:`inflate` gives one gzip member's next compressed bytes to zlib. When
zlib finds them damaged it raises, and what that feed had decompressed
before the damage went with it: up to :data:`simdoc.corpus.warcio.FEED`
compressed bytes of records, silently, in a file written as one gzip member
(``gzip crawl.warc``). So in a large member a copy of the decompressor is
kept before each feed, and after an error the feed is given again to that
copy a byte at a time: every byte before the damage comes out (a record cut
by the damage is still reported broken). A member of one record, as
crawlers write them, loses that record whatever is done, so none is kept.

:func:`members_end` finds where the gzip members holding one record end in
the file (``dedup --write`` leaves out exactly those bytes).
"""

from __future__ import annotations

import zlib

SALVAGE_AFTER = 1 << 20  # decompressed bytes of a member after which each feed is given with a copy kept


class HashedReader:
    """A raw file whose every byte read goes through ``digest`` (None: none)."""

    def __init__(self, fh, digest) -> None:
        self.fh, self.digest = fh, digest

    def read(self, n: int = -1) -> bytes:
        chunk = self.fh.read(n)
        if self.digest is not None and chunk:
            self.digest.update(chunk)
        return chunk

    def readinto(self, b) -> int:
        chunk = self.read(len(b))
        b[: len(chunk)] = chunk
        return len(chunk)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        pass


def inflate(dec, data, max_length: int, member_out: int) -> tuple[bytes, zlib.error | None, int]:
    """``dec.decompress(data, max_length)`` of a member that has given ``member_out`` bytes so far:
    (the bytes, None, 0); or, if ``data`` is damaged, (what it gives before the damage, the
    error, the bytes of ``data`` taken before it). ``dec`` is of no use after an error."""
    kept = dec.copy() if member_out >= SALVAGE_AFTER else None
    try:
        return dec.decompress(data, max_length), None, 0
    except zlib.error as exc:
        if kept is None:
            return b"", exc, 0
        out = bytearray()
        for at in range(len(data)):  # only after damage: ~32,000 small calls at most
            try:
                out += kept.decompress(data[at : at + 1])
            except zlib.error:
                return bytes(out), exc, at
        return bytes(out), exc, len(data)


def members_end(fh, offset: int, need: int) -> int:
    """The file offset where the gzip members of ``fh`` from ``offset`` that decompress to at least
    ``need`` bytes end (one member, for a record as crawlers write them); where the data ends, or
    where a member is damaged, if that comes first: the bytes after it are not the record's."""
    fh.seek(offset)
    at, got, pending = offset, 0, b""
    dec = zlib.decompressobj(31)
    member = offset  # where the member being inflated starts
    while True:
        if not pending:
            pending = fh.read(1 << 14)  # small feeds bound what one gives out (~16 MiB at most)
            if not pending:
                return member
        try:
            got += len(dec.decompress(pending))
        except zlib.error:
            return member
        if not dec.eof:
            at += len(pending)
            pending = b""
            continue
        at += len(pending) - len(dec.unused_data)
        pending = dec.unused_data
        if got >= need:
            return at
        member, dec = at, zlib.decompressobj(31)

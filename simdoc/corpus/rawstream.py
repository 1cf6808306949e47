"""The compressed side of a WARC file's bytes: read through a digest, and inflated a feed at a time.

:class:`HashedReader` is a raw file whose every byte read goes through the
file's digest (the decompressing readers of :mod:`simdoc.corpus.warcio`,
and ``dedup --write``, which checks the bytes it copies are the ones indexed).

:class:`Gunzip` inflates a gzip file of one member or many (one per record,
as crawlers write them) and notes where each member starts, so that a
record that starts one can be read again by seeking there.

:func:`inflate` gives one gzip member's next compressed bytes to zlib. When
zlib finds them damaged it raises, and what that feed had decompressed
before the damage went with it: up to :data:`FEED`
compressed bytes of records, silently, in a file written as one gzip member
(``gzip crawl.warc``). So in a large member a copy of the decompressor is
kept before each feed, and after an error the feed is given again to that
copy a byte at a time: every byte before the damage comes out (a record cut
by the damage is still reported broken). A member of one record, as
crawlers write them, loses that record whatever is done, so none is kept.

:func:`next_member` finds, after a damaged member, the next member that
starts a record, so that one damaged member of a crawl written a member per
record costs that record, not every record after it. :func:`members_end`
finds where the gzip members holding one record end in the file
(``dedup --write`` leaves out exactly those bytes).
"""

from __future__ import annotations

import zlib

GZIP_MEMBER = b"\x1f\x8b\x08"  # a gzip member's first bytes (deflate)
PROBE = 1 << 12  # compressed bytes tried at a possible member start: its header and first output
FEED = 1 << 15  # compressed bytes given to zlib at once
OUT = 1 << 20  # the most one feed gives out
HELD_CHUNKS = 4  # raw reads of a member kept, to look for the next member in after damage
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


class Gunzip:
    """The decompressed bytes of a gzip file of one member or many, a piece at a time.

    ``raw()`` reads the file's next raw bytes, from offset ``raw_start`` on
    (b"" at its end). ``members`` is filled with the decompressed position
    where each member starts -> its file offset. ``cut`` says why the data
    ended early, if it did. A member found damaged (zlib's error, mostly its
    CRC at its end) is passed over with what it held: reading goes on at the
    next member that starts a record (:func:`next_member`), and ``skipped``
    lists (its offset, where reading went on, why).
    """

    def __init__(self, raw, raw_start: int, members: dict[int, int]) -> None:
        self._raw = raw
        self.members = members
        self.cut: str | None = None
        self.skipped: list[tuple[int, int, str]] = []
        self._raw_pos = raw_start  # file offset of the next raw byte
        self._pending = memoryview(b"")  # raw bytes not yet given to the decompressor
        self._dec = None  # the current member's decompressor
        self._out = 0  # decompressed bytes given so far
        self._member_out = 0  # ... when the current member began
        self._member_raw = raw_start  # file offset of the current member
        self._held: list[bytes] = []  # the raw reads since it began (at most HELD_CHUNKS) ...
        self._held_at = raw_start  # ... from this file offset on

    def read(self) -> bytes:
        """The next decompressed bytes; b"" at the end of the data (see ``cut``)."""
        out = self._next()
        self._out += len(out)
        return out

    def _next(self) -> bytes:
        while True:
            if not len(self._pending):
                self._pending = memoryview(self._read())  # sliced without copies below
                if not len(self._pending):
                    if self._dec is None:
                        return b""
                    try:
                        out = self._dec.flush()  # what zlib held back of the cut member
                    except zlib.error:
                        out = b""
                    self._dec = None
                    # Cut short, or damage zlib read on past, into the members after it, as data.
                    why = "damaged gzip data: the member does not end before the next one starts"
                    cut = "the compressed data ends inside a gzip member (file cut short?)"
                    if not self._skip(self._member_raw, b"".join(self._held), self._held_at, why, cut) or out:
                        return out
                    continue
            if self._dec is None:
                while len(self._pending) < 2 and (more := self._read()):
                    self._pending = memoryview(bytes(self._pending) + more)
                if self._pending[0] == 0 and not bytes(self._pending).strip(b"\0"):  # zero padding, as tar leaves
                    self._raw_pos += len(self._pending)
                    self._pending = memoryview(b"")
                    continue
                if bytes(self._pending[:2]) != GZIP_MEMBER[:2]:  # a member's start damaged, or junk
                    if not self._skip(self._raw_pos, bytes(self._pending), self._raw_pos, f"not gzip data at byte {self._raw_pos}"):
                        return b""
                    continue
                self.members[self._out] = self._raw_pos
                self._dec, self._member_out, self._member_raw = zlib.decompressobj(31), self._out, self._raw_pos
                while len(self._held) > 1 and self._held_at + len(self._held[0]) <= self._raw_pos:
                    self._held_at += len(self._held.pop(0))
            # A small piece at a time: what a member leaves over is copied by zlib when it ends.
            data = self._pending[:FEED]
            out, exc, good = inflate(self._dec, data, OUT, self._out - self._member_out)
            if exc is not None:  # what the feed held before the damage is kept (rawstream.inflate)
                self._dec = None
                why = f"damaged gzip data near byte {self._raw_pos + good}: {exc}"
                if not self._skip(self._member_raw, b"".join(self._held), self._held_at, why) or out:
                    return out
                continue
            rest = len(self._dec.unconsumed_tail if not self._dec.eof else self._dec.unused_data)
            self._raw_pos += len(data) - rest
            self._pending = self._pending[len(data) - rest :]
            if self._dec.eof:
                self._dec = None
            if out:
                return out

    def _skip(self, member: int, held: bytes, held_at: int, why: str, cut: str | None = None) -> bool:
        """Go on at the next gzip member after the damaged one at ``member`` (``held``: the raw
        bytes from ``held_at`` read so far); False, the data cut there (``cut``, else ``why``),
        when the file has none."""
        found = next_member(held, held_at, member + 1, self._raw)
        if found is None:
            self.cut, self._pending = cut or why, memoryview(b"")
            return False
        self.skipped.append((member, found[0], why))
        self._raw_pos, self._held_at, self._held = found[0], found[0], [found[1]]
        self._pending = memoryview(found[1])
        return True

    def _read(self) -> bytes:
        chunk = self._raw()
        if chunk:
            self._held.append(chunk)
            if len(self._held) > HELD_CHUNKS:  # a long member: the search after damage starts later
                self._held_at += len(self._held.pop(0))
        return chunk


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


def next_member(held: bytes, base: int, start: int, read) -> tuple[int, bytes] | None:
    """The first gzip member at a raw offset >= ``start`` whose data begins ``WARC/``: (its offset,
    the raw bytes from there to the end of those read); None when the file holds none.

    ``held`` are the raw bytes from offset ``base`` read so far, ``read()`` reads on (b"" at the
    end). Three bytes that look like a member's start are one by chance about once in 16 MB of
    compressed data; what they decompress to tells them apart.
    """
    data, i = held, max(0, start - base)
    ended = False
    while True:
        j = data.find(GZIP_MEMBER, i)
        if j >= 0 and (len(data) - j >= PROBE or ended):
            if _opens_record(data[j : j + PROBE]):
                return base + j, data[j:]
            i = j + 1
            continue
        more = read()
        if not more:
            if j < 0:
                return None
            ended = True
            continue
        drop = j if j >= 0 else max(i, len(data) - len(GZIP_MEMBER) + 1)  # what is searched already goes
        data, base, i = data[drop:] + more, base + drop, 0


def _opens_record(raw: bytes) -> bool:
    try:
        return zlib.decompressobj(31).decompress(raw, 8).startswith(b"WARC/")
    except zlib.error:
        return False


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

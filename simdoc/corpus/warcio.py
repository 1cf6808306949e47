"""The bytes of a WARC file, decompressed as they are read, and its records one by one.

A WARC file may be stored as it is, compressed one gzip member per record
(as crawlers write it), as one gzip member (``gzip crawl.warc``), or with
bzip2, xz or zstd. :class:`Input` gives the decompressed bytes forward,
each with its position in them; for gzip it also knows where each member
starts in the file, so a record that starts a member can be read again by
seeking there (:func:`open_at`). Any other record is found again by its
position in the decompressed bytes, in one pass over the file.

:func:`records` cuts the bytes into records and checks each one's
``Content-Length``: a record that ends before its length (a file cut
short), or whose length does not end where the next record (or the file)
begins, is reported as broken and skipped, and reading resumes at the next
``WARC/1.`` header line, so that a bogus length never swallows the records
after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from simdoc.corpus.files import compression_of, decompressing_reader, open_binary
from simdoc.corpus.objects import is_url
from simdoc.corpus.rawstream import Gunzip, HashedReader

CHUNK = 1 << 20
# A record read again at its offset in an object: one ranged GET per raw read, so the first asks
# for this much (a crawl's record, compressed, is mostly smaller) and each next one for twice as
# much, up to CHUNK: a record costs at most about twice its bytes, not a whole CHUNK.
FIRST_RANGE = 1 << 16
HEADER_BYTES = 1 << 16  # a WARC header longer than this is not one
_GZIP_MAGIC = b"\x1f\x8b"


class Input:
    """The decompressed bytes of an open file, read forward (see the module docstring).

    ``digest``, if given, is fed every raw byte read from the file. ``cut``
    says why the compressed data ended early (a truncated archive), if it did;
    ``skipped`` lists the damaged gzip members passed over, reading on at the
    next member that starts a record (:func:`simdoc.corpus.rawstream.next_member`):
    (its offset, where reading went on, why).
    """

    def __init__(self, fh, kind: str | None, digest=None, raw_start: int = 0, ranged: bool = False) -> None:
        self.fh = fh
        self._step = FIRST_RANGE if ranged else CHUNK  # the most one raw read asks for (see FIRST_RANGE)
        self.kind = kind
        self.digest = digest
        self.buf = bytearray()
        self.start = 0  # buf[start:] are the bytes not consumed yet
        self.pos = 0  # position of buf[start] in the decompressed bytes
        self.members: dict[int, int] = {}  # decompressed position -> file offset of the gzip member starting there
        self.cut: str | None = None
        self._done = False
        self._gz = Gunzip(lambda: self._raw(CHUNK), raw_start, self.members) if kind == "gzip" else None
        self._stream = None  # the decompressing reader of bzip2, xz, zstd
        if kind not in (None, "gzip"):
            self._stream = decompressing_reader(HashedReader(fh, digest), kind)

    @property
    def skipped(self) -> list[tuple[int, int, str]]:
        return self._gz.skipped if self._gz is not None else []

    # ---- filling

    def _raw(self, n: int) -> bytes:
        if n > self._step:
            n, self._step = self._step, min(2 * self._step, CHUNK)
        chunk = self.fh.read(n)
        if self.digest is not None and chunk:
            self.digest.update(chunk)
        return chunk

    def _more(self) -> bool:
        """Decompress some more bytes into the buffer; False at the end of the data."""
        if self._done:
            return False
        if self.kind is None:
            got = self._raw(CHUNK)
        elif self._gz is not None:
            got = self._gz.read()
            self.cut = self._gz.cut
        else:
            try:
                got = self._stream.read(CHUNK)
            except Exception as exc:  # each decompressor has its own errors for cut or damaged data
                self.cut = str(exc) or type(exc).__name__
                got = b""
        if not got:
            self._done = True
            return False
        if self.start > CHUNK:
            del self.buf[: self.start]
            self.start = 0
        self.buf += got
        return True

    def _exhaust(self) -> None:
        """Read the rest of the raw file (for the digest), decompressing nothing more."""
        while self._raw(CHUNK):
            pass

    def finish(self) -> None:
        """Feed the digest every raw byte of the file, also those past the last record read
        (a decompressor's reads went through the digest too: each byte counts once)."""
        if self.digest is not None:
            self._exhaust()

    # ---- reading

    def fill(self, n: int) -> int:
        """Make at least ``n`` bytes available if the data holds them; how many there are."""
        while len(self.buf) - self.start < n and self._more():
            pass
        return len(self.buf) - self.start

    def peek(self, n: int) -> bytes:
        self.fill(n)
        return bytes(self.buf[self.start : self.start + n])

    def find(self, needle: bytes, limit: int) -> int:
        """Where ``needle`` starts among the next ``limit`` bytes (relative to pos), or -1."""
        looked = 0
        while True:
            i = self.buf.find(needle, self.start + looked, self.start + limit + len(needle))
            if i >= 0:
                return i - self.start
            have = len(self.buf) - self.start
            if have >= limit + len(needle) or not self._more():
                return -1
            looked = max(0, have - len(needle) + 1)

    def skip_blank(self) -> None:
        """Consume the line ends between records, and NUL bytes: a writer's padding (to a block
        or the end of the file) is no record."""
        while self.fill(1):
            i = self.start
            while i < len(self.buf) and self.buf[i] in (13, 10, 0):
                i += 1
            self.pos += i - self.start
            self.start = i
            if i < len(self.buf):
                return

    def take(self, n: int, keep: int) -> tuple[bytes, int]:
        """Consume ``n`` bytes; returns the first ``keep`` of them and how many there were."""
        if len(self.buf) - self.start >= n:  # all there: one slice
            kept = bytes(self.buf[self.start : self.start + min(n, keep)]) if keep else b""
            self.start += n
            self.pos += n
            return kept, n
        kept = bytearray()
        got = 0
        while got < n:
            if self.start >= len(self.buf) and not self._more():
                break
            step = min(n - got, len(self.buf) - self.start)
            if len(kept) < keep:
                kept += self.buf[self.start : self.start + min(step, keep - len(kept))]
            self.start += step
            self.pos += step
            got += step
        return bytes(kept), got

    def skip_to(self, pos: int) -> bool:
        """Consume bytes up to decompressed position ``pos``; False if the data ends first."""
        n = pos - self.pos
        return n >= 0 and self.take(n, 0)[1] == n


def kind_of(path: str) -> str | None:
    return compression_of(path)


def open_input(path: str, digest=None) -> tuple[object, Input]:
    """The file at ``path`` opened, and its decompressed bytes from the start."""
    fh = open_binary(path)
    try:
        return fh, Input(fh, kind_of(path), digest)
    except BaseException:
        fh.close()
        raise


def open_at(path: str, offset: int) -> tuple[object, Input] | None:
    """The bytes from ``offset`` of a file stored as it is, or from a gzip member starting at
    ``offset``; None when the file's compression cannot be entered in the middle."""
    kind = kind_of(path)
    if kind not in (None, "gzip"):
        return None
    fh = open_binary(path, ranged=True)  # an object: a ranged request, not the whole archive
    fh.seek(offset)
    ranged = is_url(path)
    # An object: the gzip magic checked in the first range read, not in a request of its own.
    first = fh.read(FIRST_RANGE if ranged else 2)
    if kind == "gzip" and first[:2] != _GZIP_MAGIC:
        fh.close()
        return None
    if ranged:
        return fh, Input(_Prefetched(fh, first), kind, raw_start=offset, ranged=True)
    fh.seek(offset)
    return fh, Input(fh, kind, raw_start=offset)


class _Prefetched:
    """A file whose first bytes were read already: ``read`` gives them, then reads on."""

    def __init__(self, fh, first: bytes) -> None:
        self._fh, self._first = fh, first

    def read(self, n: int) -> bytes:
        if self._first:
            out, self._first = self._first[:n], self._first[n:]
            return out
        return self._fh.read(n)


# ---------------------------------------------------------------- records


@dataclass
class Record:
    """One WARC record: where it starts, its header fields (names lowercased), its block
    (at most ``keep`` bytes of it) and how long the block is."""

    number: int
    pos: int  # in the decompressed bytes
    member: int | None  # file offset of the gzip member it starts, if it starts one
    headers: dict[str, str]
    block: bytes
    length: int
    end: int = 0  # in the decompressed bytes, just after its block

    @property
    def offset(self) -> int:
        """Where to find it again: the member's offset if it starts one, else its position."""
        return self.member if self.member is not None else self.pos


@dataclass
class Broken:
    """A record that could not be read whole: where, and why (a message naming no file)."""

    number: int
    pos: int
    headers: dict[str, str]
    reason: str
    member: int | None = None  # file offset of the gzip member it starts, if it starts one (dedup --write)


def _parse_header(raw: bytes) -> dict[str, str] | None:
    lines = raw.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if not lines[0].startswith("WARC/"):
        return None
    headers: dict[str, str] = {}
    name = None
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and name is not None:  # a folded line continues the field
            headers[name] += " " + line.strip()
            continue
        field, sep, value = line.partition(":")
        if not sep:  # not a field (a damaged header): a folded line after it continues nothing
            name = None
            continue
        name = field.strip().lower()
        headers[name] = value.strip()
    return headers


def _header_end(inp: Input) -> tuple[int, int]:
    """(length of the header, length of the blank line ending it) of the record at ``inp``, or (-1, 0)."""
    crlf = inp.find(b"\r\n\r\n", HEADER_BYTES)
    lf = inp.find(b"\n\n", HEADER_BYTES if crlf < 0 else crlf)
    if lf >= 0 and (crlf < 0 or lf < crlf):
        return lf, 2
    return (crlf, 4) if crlf >= 0 else (-1, 0)


def _next_header(inp: Input) -> bool:
    """Consume bytes up to the next line that starts ``WARC/1.``, or gzip member that does (after
    a damaged member skipped, the next may follow a line cut short); False if there is none."""
    while True:
        if inp.peek(7) == b"WARC/1.":
            return True
        i = inp.find(b"\nWARC/1.", CHUNK)
        i = i + 1 if i >= 0 else -1
        for at in sorted(p - inp.pos for p in inp.members if inp.pos < p and (i < 0 or p - inp.pos < i)):
            if inp.buf[inp.start + at : inp.start + at + 7] == b"WARC/1.":
                i = at
                break
        if i >= 0:
            inp.take(i, 0)
            return True
        have = inp.fill(CHUNK + 8)
        if have < CHUNK + 8:
            inp.take(have, 0)
            return False
        inp.take(CHUNK, 0)


class RecordReader:
    """The records of a file in order (see the module docstring); ``inp`` is the input being read.

    ``open_again()`` gives an Input over the same bytes from the start, to go
    back after a broken record (a decompressor cannot seek). ``cut`` says why
    the data ended early, if it did.
    """

    def __init__(self, inp: Input, open_again=None) -> None:
        self.inp = inp
        self.open_again = open_again
        self.cut: str | None = None
        self.skipped: list[tuple[int, int, str]] = []

    def finish(self) -> None:
        """Feed the digest the rest of the file; note a cut and the damaged gzip members skipped."""
        self.inp.finish()
        self.cut = self.cut or self.inp.cut
        self.skipped = self.inp.skipped

    def records(self, keep: int, one: bool = False) -> Iterator[Record | Broken]:
        """Every record in order, or a :class:`Broken` for one that is not whole.

        ``keep`` bounds the bytes of a block that are held. A record whose
        block ends before its ``Content-Length`` (the data ends first), or that
        is not followed by the next record's ``WARC/`` line (or the end), is
        broken: reading starts again just after its header, at the next
        ``WARC/1.`` line. With ``one``, only the record at the start.
        """
        number = 0
        while True:
            inp = self.inp
            inp.skip_blank()
            if not inp.fill(1):
                return
            number += 1
            pos, member = inp.pos, inp.members.pop(inp.pos, None)
            if len(inp.members) > 1024:  # members that start no record: forget those behind (the dict is shared)
                for p in [p for p in inp.members if p <= pos]:
                    del inp.members[p]
            size, blank = _header_end(inp)
            headers = _parse_header(inp.peek(size)) if size >= 0 else None
            if headers is None and size < 0 and inp.fill(HEADER_BYTES) < HEADER_BYTES and inp.peek(5) == b"WARC/"[: inp.fill(5)]:
                yield Broken(number, pos, {}, "the data ends inside its WARC header (file cut short?); skipped", member)
                return
            if headers is None:
                yield Broken(number, pos, {}, "no WARC header where a record should start; skipped to the next WARC/1. line", member)
                if one:
                    return
                inp.take(1, 0)
                if not _next_header(inp):
                    return
                continue
            inp.take(size + blank, 0)
            body_at = inp.pos
            try:
                length = int(headers.get("content-length", ""))
                if length < 0:
                    raise ValueError
            except ValueError:
                yield Broken(number, pos, headers, f"no valid Content-Length ({headers.get('content-length')!r}); skipped", member)
                if one or not _next_header(inp):
                    return
                continue
            block, got = inp.take(length, keep)
            if got == length and _followed_by_record(inp):
                yield Record(number, pos, member, headers, block, length, body_at + length)
                if one:
                    return
                continue
            if got < length:
                reason = f"ends after {got:,} of the {length:,} bytes its Content-Length says (file cut short?)"
            else:
                reason = f"its Content-Length {length:,} does not end where a record or the file does"
            if one or self.open_again is None:
                yield Broken(number, pos, headers, reason + "; skipped", member)
                return
            # Go back to just after its header and look for the next record from there.
            self.finish()
            self.inp = self.open_again()
            if not self.inp.skip_to(body_at) or not _next_header(self.inp):
                yield Broken(number, pos, headers, reason + "; skipped", member)
                return
            yield Broken(number, pos, headers, reason + f"; skipped, reading on from the next record header (at {self.inp.pos:,})", member)


def _followed_by_record(inp: Input) -> bool:
    """After a block: its blank lines (and NUL padding), then the next record's ``WARC/`` or the end of the data."""
    ahead = inp.peek(4 + 5)
    rest = ahead.lstrip(b"\r\n\x00")
    return not rest or rest.startswith(b"WARC/") or (len(ahead) < 9 and b"WARC/".startswith(rest))



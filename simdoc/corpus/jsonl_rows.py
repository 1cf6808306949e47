"""A JSON Lines range's members as columns, their texts as one UTF-8 buffer (issue 29).

A range of a big JSON Lines file (:mod:`simdoc.corpus.jsonl_ranges`) is read as one block of
bytes; :func:`simdoc.kernels_json.scan_lines` finds its lines and writes the text of each usual
one into one buffer, with no Python object per line (:func:`read_block`). Any other line goes
through the Python path (:class:`simdoc.corpus.formats._JsonlMembers`), which is the reference
and says what is wrong with it; its members are added one by one (:meth:`Rows.add`).
:meth:`Rows.columns` gives both, in line order: the texts' UTF-8 bytes (``surrogatepass``, as
a member's digest encodes its text) one after another, and for each member its line number,
where its line is, and how many code points its text has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simdoc.kernel_choice import wanted
from simdoc.corpus.formats import add_line, member_id, not_utf8_text

_CHUNK = 1 << 20


@dataclass
class Columns:
    """Members as columns, in line order: member i's text is ``raw[bounds[i]:bounds[i + 1]]``."""

    lines: np.ndarray  # int64, counted from the range's first line
    offsets: np.ndarray  # int64, of the line in the file
    lengths: np.ndarray  # int64, of the line
    raw: bytes  # the texts' UTF-8 bytes (surrogatepass), one after another
    bounds: np.ndarray  # int64, n + 1
    chars: np.ndarray  # int64, each text's code points (len of the str)

    def texts(self) -> list[str]:
        b = self.bounds.tolist()
        raw = self.raw
        return [raw[b[i] : b[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(b) - 1)]


@dataclass
class _Scanned:
    """The members the scanner took: as :class:`Columns`, their texts at ``starts``/``ends`` of ``raw``."""

    lines: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    raw: np.ndarray  # uint8
    starts: np.ndarray
    ends: np.ndarray
    chars: np.ndarray


@dataclass
class Rows:
    """A range's members as columns, in line order (no tuple, id or object per member): those the
    scanner took (:func:`read_block`) and those the Python path added (:meth:`add`)."""

    lines: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    scanned: _Scanned | None = None

    def __len__(self) -> int:
        return len(self.lines) + (len(self.scanned.lines) if self.scanned is not None else 0)

    def add(self, lineno: int, text: str, offset: int, length: int) -> None:
        self.lines.append(lineno)
        self.texts.append(text)
        self.offsets.append(offset)
        self.lengths.append(length)

    def columns(self) -> Columns:
        """All the members, in line order (see the module docstring)."""
        encoded = [t.encode("utf-8", "surrogatepass") for t in self.texts]
        sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        added = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(sizes, out=added[1:])
        lines = np.asarray(self.lines, dtype=np.int64)
        offsets = np.asarray(self.offsets, dtype=np.int64)
        lengths = np.asarray(self.lengths, dtype=np.int64)
        chars = np.fromiter(map(len, self.texts), dtype=np.int64, count=len(self.texts))
        s = self.scanned
        if s is None:
            return Columns(lines, offsets, lengths, b"".join(encoded), added, chars)
        raw = np.concatenate([s.raw, np.frombuffer(b"".join(encoded), dtype=np.uint8)])
        starts = np.concatenate([s.starts, len(s.raw) + added[:-1]])
        spans = np.concatenate([s.ends - s.starts, sizes])
        every = np.concatenate([s.lines, lines])
        order = np.argsort(every, kind="stable")
        spans = spans[order]
        bounds = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(spans, out=bounds[1:])
        starts = starts[order]
        if not np.array_equal(starts, bounds[:-1]):  # texts apart or out of order: gathered
            raw = raw[np.repeat(starts - bounds[:-1], spans) + np.arange(int(bounds[-1]), dtype=np.int64)]
        else:
            raw = raw[: int(bounds[-1])]
        return Columns(
            every[order], np.concatenate([s.offsets, offsets])[order], np.concatenate([s.lengths, lengths])[order],
            raw.tobytes(), bounds, np.concatenate([s.chars, chars])[order],
        )

    def docs(self, source: str) -> list[tuple[str, str, int, int]]:
        """As :attr:`simdoc.corpus.jsonl_ranges.Piece.docs` holds members: (id, text, offset, length) each."""
        c = self.columns()
        return [(member_id(source, str(n)), t, o, k) for n, t, o, k in zip(c.lines.tolist(), c.texts(), c.offsets.tolist(), c.lengths.tolist())]


def can_scan(text_field: str) -> bool:
    """Whether :func:`read_block` can read lines for this text field (numba, a field name in UTF-8)."""
    if not wanted():  # (simdoc.kernel_choice: no numba, or a stage too small to load it for)
        return False
    try:
        text_field.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_block(f, want: int, digest, sniff: bool, cap: int) -> bytes | None:
    """The bytes from where ``f`` is to the end of the line that goes on past ``want`` of them (or
    to the end of the file), each read through ``digest``; None, having digested nothing, where
    more than ``cap`` bytes would be held (a line longer than the caller's bound: the caller
    reads line by line instead). ``sniff``: a NUL byte in the first bytes means a binary file."""
    parts: list[bytes] = []
    size = 0
    while chunk := f.read(_CHUNK):
        if not parts and sniff and (binary := not_utf8_text(chunk)) is not None:
            digest.update(chunk)
            raise binary
        parts.append(chunk)
        size += len(chunk)
        if size >= want and chunk.find(b"\n", max(want - 1 - (size - len(chunk)), 0)) >= 0:
            break
        if size > cap:
            return None
    data = b"".join(parts)
    digest.update(data)
    return data


def take_lines(data: bytes, begin: int, limit: int, members, rows: Rows, replaced: list[int], bound: int, longest: int | None, text_field: str) -> int:
    """The members of the lines of ``data`` (read from ``begin`` in the file) that start before
    ``limit``: the usual ones taken by the scanner into ``rows``, any other given to ``members``
    (the Python path) as the line-by-line reading does; returns the number of lines."""
    from simdoc import kernels_json  # here: numba is imported only by a run that calls a kernel

    found = kernels_json.scan_lines(data, limit, text_field, bound)
    if found is None:
        raise ValueError("take_lines: no scanner (see can_scan)")
    ok = found.usual if longest is None else found.usual & (found.chars <= longest)
    for i in np.flatnonzero(~ok).tolist():  # the Python path, which says what is wrong with a line
        at, length = int(found.starts[i]), int(found.lengths[i])
        add_line(members, replaced, i + 1, data[at : at + length] if length <= bound else None, begin, begin + at, length, bound)
    take = np.flatnonzero(ok)
    rows.scanned = _Scanned(
        take + 1, begin + found.starts[take], found.lengths[take], found.texts, found.text_starts[take], found.text_ends[take], found.chars[take]
    )
    return len(found.starts)

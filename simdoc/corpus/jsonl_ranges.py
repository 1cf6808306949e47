"""One big plain JSON Lines file read as byte ranges by separate tasks, then joined (issue 29).

A file of millions of small records read by one task keeps one core busy
and holds all its records at once. A plain (uncompressed) JSON Lines file
is cut instead into ranges of :data:`RANGE_BYTES` (:func:`cut`): a range
``[start, end)`` reads the lines that *start* in it, from the first line
starting at or after ``start`` to the one that crosses ``end``
(:func:`read_range`). A record longer than a range belongs to the range
where it starts; a range inside one long record reads nothing.

A range does not know how many lines come before it, so it names its
members by their line number counted from its own first line; the join
(:func:`joined_read`, :func:`renumber`) adds the line counts of the ranges
before it. Whatever one task reading the whole file would give (ids, line
numbers in warnings, the file's digest, its status) the joined ranges give
the same: the first range also digests the whole file (a sequential read,
fast beside the parsing the other ranges do meanwhile).

With ``--id-field``, a key that repeats gets ``@LINE`` appended in the
order of the whole file: a range only notes each member's wanted key, and
the join takes them in line order (:func:`joined_read`). A compressed file
is one stream and is read by one task.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from simdoc.corpus.encodings import not_utf8_lines
from simdoc.corpus.files import ReadResult, as_file, compression_of, handle_stat, open_regular
from simdoc.corpus.formats import (
    MEMBER_BYTES,
    REPEATS,
    MemberKeys,
    _Binary,
    _JsonlMembers,
    _lines,
    _summarise,
    skipped_lines,
    add_line,
    member_id,
)
from simdoc.corpus.jsonl_rows import Rows, can_scan, read_block, take_lines
from simdoc.corpus.walk import MEMBER_SEPARATOR, is_jsonl

RANGE_BYTES = 4 << 20  # bytes of a JSON Lines file per reading task
_LAST = 1 << 62  # the end of a file's last range: past any end
_CHUNK = 1 << 20


def can_cut(path: str, size: int) -> bool:
    """Whether this file is read as several ranges (see the module docstring)."""
    return is_jsonl(path) and compression_of(path) is None and size > RANGE_BYTES


def cut(size: int) -> list[tuple[int, int]]:
    """The ranges ``[start, end)`` of a file of ``size`` bytes; the last one reaches past the end
    (the file may have grown since it was listed: its new lines are read too, as one task would)."""
    range_bytes = RANGE_BYTES
    starts = list(range(0, max(size, 1), range_bytes))
    return [(s, s + range_bytes) for s in starts[:-1]] + [(starts[-1], _LAST)]


@dataclass
class Piece:
    """What one range of a JSON Lines file gave; line numbers count from the range's first line."""

    docs: list[tuple[str, str, int, int]]  # (id, text, offset in the file, length), in line order
    n_lines: int = 0  # lines that start in the range
    problems: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    fields_seen: list[str] | None = None
    cut: bool = False  # a text was cut to --max-bytes
    replaced: list[int] = field(default_factory=list)  # lines with invalid UTF-8
    changed: bool = False  # the file changed while the range was read
    digest: str = ""  # the whole file's (first range only)
    failed: ReadResult | None = None  # the file could not be read: what one task would have said
    n_docs: int = 0  # len(docs), also once the texts are dropped
    source: str = ""  # the file's id
    last: bool = False  # the file's last range
    expected: bytes | None = None  # the digest indexed before, carried for the join (see simdoc.stages.ranges)
    keys: list[tuple[int, str | None]] | None = None  # with --id-field: (line, wanted key; None: the line number)
    how: str = "jsonl"  # how the file is read (a Parquet file's row groups: simdoc.corpus.parquet.Groups)
    # A JSON Lines range's members, as columns (``docs`` is then empty): ids are line numbers
    # unless --id-field names them, so none is made per member (see simdoc.stages.range_rows).
    rows: Rows | None = None


class _Skip:
    """A digest that digests nothing: a range after the first does not digest the file."""

    def update(self, _data: bytes) -> None:
        pass


def read_range(
    path: str, source: str, start: int, end: int, text_field: str = "text", max_bytes: int | None = None,
    follow_symlinks: bool = False, id_field: str | None = None,
) -> Piece:
    """The members of the lines of ``path`` that start in ``[start, end)`` (see the module docstring)."""
    piece = _read_range(path, source, start, end, text_field, max_bytes, follow_symlinks, id_field)
    piece.source, piece.last = source, end >= _LAST
    return piece


def _read_range(path: str, source: str, start: int, end: int, text_field, max_bytes, follow_symlinks, id_field) -> Piece:
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return Piece([], failed=opened)
    fd, before = opened
    members = _JsonlMembers(source, text_field, id_field, max_bytes)
    if id_field is not None:
        members.deferred = []
    else:  # ids are line numbers: members kept as columns (Rows), none named here
        members.rows = Rows()
    digest = hashlib.blake2b(digest_size=16) if start == 0 else _Skip()
    piece = Piece(members.docs, keys=members.deferred, rows=members.rows)
    # The usual line (a JSON object, its text a string, nothing to say of it) is taken by the
    # compiled scanner, the range read as one block (simdoc.corpus.jsonl_rows), or without numba
    # by one call of json's scanner; any other goes through members.add, which says what is wrong.
    quick = members.rows.add if members.rows is not None and FAST else None
    longest = None if max_bytes is None else max_bytes // 4  # a longer text may need cutting: members.add
    with as_file(fd, buffering=0) as f:
        try:
            begin = _first_line(f, start)
            if begin is not None and begin < end:
                f.seek(begin)
                block = None
                if quick is not None and can_scan(text_field):  # the range as one block, its lines by the scanner
                    block = read_block(f, end - begin, digest, start == 0, min(end - begin, RANGE_BYTES) + MEMBER_BYTES + 1)
                if block is not None:
                    piece.n_lines = take_lines(block, begin, end - begin, members, members.rows, piece.replaced, MEMBER_BYTES, longest, text_field)
                else:
                    f.seek(begin)  # line by line (a line too long to hold, or no scanner)
                    _line_by_line(f, begin, end, start, digest, members, piece, quick, text_field, longest)
            if start == 0:  # the rest of the file, for its digest (the lines read so far went through it)
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
            after = handle_stat(f)
        except _Binary as exc:
            status = ReadResult(None, digest.hexdigest(), warning=str(exc), status="binary")
            return Piece([], failed=status)
        except OSError as exc:
            return Piece([], failed=ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable"))
    piece.problems, piece.fields_seen, piece.cut = members.problems, members.fields_seen, members.cut
    piece.n_docs = len(piece.docs) + (len(piece.rows) if piece.rows is not None else 0)
    piece.changed = (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
    piece.digest = digest.hexdigest() if start == 0 else ""
    return piece


def _line_by_line(f, begin: int, end: int, start: int, digest, members: _JsonlMembers, piece: Piece, quick, text_field: str, longest) -> None:
    """The lines from ``begin`` that start before ``end``, read one by one into ``members``."""
    for lineno, line, offset, length in _lines(f.read, digest, MEMBER_BYTES, sniff=start == 0):
        if begin + offset >= end:
            break
        piece.n_lines = lineno
        if quick is not None and line is not None:
            usual = line[len(codecs.BOM_UTF8) :] if lineno == 1 and begin == 0 and line.startswith(codecs.BOM_UTF8) else line
            text = _usual_text(usual, text_field)
            if text is not None and (longest is None or len(text) <= longest):
                quick(lineno, text, begin + offset, length)
                continue
        add_line(members, piece.replaced, lineno, line, begin, begin + offset, length, MEMBER_BYTES)


FAST = True  # the usual line by a scanner (tests turn it off to compare with the Python path)
_SCAN = json.JSONDecoder().scan_once  # what json.loads calls, with json.loads's defaults


def _usual_text(line: bytes, text_field: str) -> str | None:
    """The text of a line that is valid UTF-8 and exactly one JSON object whose ``text_field`` is a
    string, as ``json.loads(line.decode("utf-8"))[text_field]`` gives it; None for any other line.

    json.loads skips whitespace around the value and refuses a BOM; here a line that starts with
    anything but the value, or has anything after it, is not usual (None): the caller takes it
    the long way, which says what json.loads says of it."""
    try:
        s = line.decode("utf-8")
        obj, stop = _SCAN(s, 0)
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        return None
    if stop != len(s) or type(obj) is not dict:
        return None
    text = obj.get(text_field)
    return text if type(text) is str else None


def _first_line(f, start: int) -> int | None:
    """Where the first line starting at or after ``start`` starts (None: no line does)."""
    if start == 0:
        return 0
    f.seek(start - 1)
    if f.read(1) == b"\n":
        return start
    at = start
    while chunk := f.read(_CHUNK):
        i = chunk.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(chunk)
    return None


def line_ids(prefix: bytes, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids ``prefix + str(line)`` of ``lines`` (whole numbers, not negative), in that order,
    as a blob column (UTF-8 bytes one after another, and where each starts): made by arrays."""
    lines = np.asarray(lines, dtype=np.int64)
    n, p = len(lines), len(prefix)
    width = len(str(int(lines.max()))) if n else 1
    n_digits = 1 + np.searchsorted(10 ** np.arange(1, width, dtype=np.int64), lines, side="right")
    # A row a string: the prefix, then the number's digits right-aligned, with leading zeros
    # that the mask leaves out; a digit position a pass over all rows, dividing by 10 (numpy
    # divides by a constant without a division instruction), in 32 bits where they suffice.
    # 10^6 lines: 366 ms when each pass picked the rows that have that digit, ~70 ms so
    # (numpy's conversion of numbers to strings took twice as long as the former).
    table = np.empty((n, p + width), dtype=np.uint8)
    table[:, :p] = np.frombuffer(prefix, dtype=np.uint8)
    kind = np.uint32 if width <= 9 else np.uint64
    rest, ten = lines.astype(kind), kind(10)
    digits = np.empty((width, n), dtype=np.uint8)  # a digit position a row: written contiguously
    for column in range(width - 1, -1, -1):
        quotient = rest // ten
        np.subtract(rest, quotient * ten, out=rest)
        np.add(rest, ord("0"), out=digits[column], casting="unsafe")
        rest = quotient
    table[:, p:] = digits.T
    keep = np.ones((n, p + width), dtype=bool)
    keep[:, p:] = np.arange(width) >= (width - n_digits)[:, None]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_digits + p, out=offsets[1:])
    return table[keep], offsets


def first_lines(pieces: list[Piece]) -> list[int]:
    """The number of lines before each range: what its line numbers are offset by."""
    out, n = [], 0
    for p in pieces:
        out.append(n)
        n += p.n_lines
    return out


def skipped_of(pieces: list[Piece], unit: str = "line") -> list[tuple[str, str]]:
    """The lines (Parquet rows: ``unit``) of the whole file skipped
    (:func:`simdoc.corpus.formats.skipped_lines`), from its ranges."""
    return skipped_lines(pieces[0].source, joined_problems(pieces, first_lines(pieces)), unit)


def joined_problems(pieces: list[Piece], befores: list[int]) -> dict[str, list[tuple[int, str]]]:
    """The problems of the ranges (or Parquet spans), by kind, numbered as the whole file numbers
    its lines (rows): ``befores``, each range's first, from :func:`first_lines`."""
    problems: dict[str, list[tuple[int, str]]] = {}
    for p, before in zip(pieces, befores):
        for kind, seen in p.problems.items():
            problems.setdefault(kind, []).extend((n + before, m) for n, m in seen)
    return problems


def renumber(doc_id: str, source: str, before: int, ids: dict[int, str] | None = None) -> str:
    """A member id of a range (its line number counted from the range) as the whole file names it
    (``ids``: the range's ids by line, as :func:`joined_read` took them with ``--id-field``)."""
    local = int(doc_id[len(source) + len(MEMBER_SEPARATOR) :])
    return ids[local] if ids is not None else member_id(source, str(local + before))


def _take_keys(
    pieces: list[Piece], befores: list[int], what: str = "line"
) -> tuple[list[dict[int, str] | None], list[tuple[int, str]]]:
    """Each range's ids by line, the keys taken in the whole file's line order, and what was said
    of the keys that repeat (line, message; ``what``: a line, or a Parquet row)."""
    if pieces[0].keys is None:
        return [None] * len(pieces), []
    keys = MemberKeys(pieces[0].source)
    out: list[dict[int, str] | None] = []
    said: list[tuple[int, str]] = []
    for p, before in zip(pieces, befores):
        ids = {}
        for local, key in p.keys or []:
            ids[local], message = keys.take(str(local + before) if key is None else key, local + before, what)
            if message:
                said.append((local + before, message))
        out.append(ids)
    return out, said


def joined_read(pieces: list[Piece]) -> tuple[ReadResult, list[dict[int, str] | None]]:
    """The read result one task reading the whole file would give, its warning with those about
    its lines (as :func:`simdoc.corpus.read.read_file` gives them), and each range's ids by
    line when they are not line numbers (see :func:`renumber`)."""
    for p in pieces:
        if p.failed is not None:
            return p.failed, [None] * len(pieces)
    befores = first_lines(pieces)
    ids, said = _take_keys(pieces, befores)
    problems = joined_problems(pieces, befores)
    replaced: list[int] = []
    fields_seen = None
    for p, before in zip(pieces, befores):
        replaced.extend(n + before for n in p.replaced)
        if fields_seen is None:
            fields_seen = p.fields_seen
    if said:  # in the order one task notes them: by first line, a repeat last on its line
        problems[REPEATS] = said
        problems = dict(sorted(problems.items(), key=lambda kv: (kv[1][0][0], kv[0] == REPEATS)))
    notes = []
    status = "partial" if any(p.cut for p in pieces) else "ok"
    if replaced:
        notes.append(not_utf8_lines(replaced))
        status = "replaced"
    if any(p.changed for p in pieces):
        notes.append("changed while being read; indexed as read (run again to pick up the final version)")
    notes += [_summarise(kind, seen) for kind, seen in problems.items()]
    if fields_seen and not any(p.n_docs for p in pieces):
        shown = ", ".join(fields_seen[:8]) + (", ..." if len(fields_seen) > 8 else "")
        notes.append(f"the objects have the fields {shown}: name the one with the text with --text-field")
    return ReadResult("", pieces[0].digest, warning="; ".join(notes) or None, status=status), ids

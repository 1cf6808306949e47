"""A big WARC or WET file read as spans of records by separate tasks, then joined (issue 29).

A crawl file of 1 GB read by one task keeps one core busy. A file stored as
it is (``.warc``, ``.wet``) or compressed one gzip member per record (as
crawlers write ``.warc.gz``) is cut instead into spans of whole records of
about :data:`SPAN_BYTES` each (:func:`cut`). A WARC file cannot be cut by
looking for ``WARC/1.`` lines (a page may hold one): the planner walks the
records with the reader itself (:class:`simdoc.corpus.warcio.RecordReader`),
each by its ``Content-Length``, and cuts only where a record starts (for
gzip, where a record starts a gzip member). A file whose walk meets a broken
record, a cut, a damaged gzip member, or a record inside a gzip member is not cut: one task reads it,
as do a single gzip stream and bzip2, xz, zstd files.

A span (:func:`read_span`) reads the records that start in ``[start, end)``
and keeps, per record, what :func:`simdoc.corpus.warc.read_warc` would use
with the record numbers counted from the span's first record; :func:`join`
replays them in file order (keys that repeat, warnings naming records) and
gives exactly what one task reading the file gives. Each span's walk must stop
exactly where the next span starts and meet no broken record; if not (the
file changed since it was planned), :func:`join` returns None and the caller
reads the file again as one task.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from simdoc.corpus import warcio
from simdoc.corpus.files import open_binary
from simdoc.corpus.formats import MemberKeys, member_id
from simdoc.corpus.walk import is_warc
from simdoc.corpus.warc import HTTP_HEAD_BYTES, WarcFile, WarcReading, _document, _limit, _Notes

SPAN_BYTES = 4 << 20  # bytes of a WARC file per reading task (as simdoc.corpus.jsonl_ranges.RANGE_BYTES)
_END = 1 << 62  # the end of a file's last span


def can_cut(path: str, size: int) -> bool:
    """Whether this file may be read as several spans (its records decide: see :func:`cut`)."""
    return is_warc(path) and warcio.kind_of(path) in (None, "gzip") and size > SPAN_BYTES


def cut(path: str) -> list[tuple[int, int]] | None:
    """The spans ``[start, end)`` of the file, each starting where a record starts; None when it
    is read as one task (see the module docstring). Reads the file once (a gzip file: inflated)."""
    fh, inp = warcio.open_input(path)
    kind = warcio.kind_of(path)
    starts = [0]
    try:
        reader = warcio.RecordReader(inp)
        for rec in reader.records(0):
            if isinstance(rec, warcio.Broken):
                return None
            at = rec.pos if kind is None else rec.member
            if at is None:  # a record inside a gzip member: no place to enter the file
                return None
            if at - starts[-1] >= SPAN_BYTES:
                starts.append(at)
        reader.finish()
        if reader.cut or reader.skipped:
            return None
    finally:
        fh.close()
    if len(starts) < 2:
        return None
    return list(zip(starts, starts[1:] + [_END]))


@dataclass
class Event:
    """One record of a span as read_warc uses it; ``number`` counts from the span's first record."""

    number: int
    uri: str | None  # the record's target URI or record id as _document names it (None: neither)
    notes: list[str]  # the kinds of problems noted of it, in order
    text: str | None = None
    why: str | None = None  # left out: why
    offset: int = 0
    length: int = 0
    record_id: str | None = None
    wtype: str = ""


@dataclass
class Span:
    """What one span gave."""

    start: int
    events: list[Event] = field(default_factory=list)
    n_records: int = 0
    stop: int | None = None  # where the first record past the span starts (None: the data ended)
    broken: bool = False  # a broken record or a cut: the file is read again as one task
    digest: str = ""  # the whole file's (first span only)
    # For the join in simdoc.stages.ranges (as simdoc.corpus.jsonl_ranges.Piece has them):
    source: str = ""
    last: bool = False
    expected: bytes | None = None
    failed: object | None = None  # the file could not be read: the ReadResult one task would give
    task: object | None = None  # the span's task, to read the file whole when the spans do not fit
    how: str = "warc"


class _Recorder(_Notes):
    """The notes of one record, kept by kind (the record's name is made at the join)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def add(self, kind: str, what: str) -> None:
        self.seen.append(kind)


def read_span(path: str, start: int, end: int, reading: WarcReading = WarcReading()) -> Span:
    """The records of ``path`` that start in ``[start, end)`` (see the module docstring).

    Raises ImportError when an HTML body needs the ``web`` extra, OSError when the file cannot be read."""
    kind = warcio.kind_of(path)
    digest = hashlib.blake2b(digest_size=16) if start == 0 else None
    fh = open_binary(path)
    span = Span(start)
    limit = _limit(reading)
    try:
        fh.seek(start)
        inp = warcio.Input(fh, kind, digest, raw_start=start)
        reader = warcio.RecordReader(inp)
        for rec in reader.records(limit + HTTP_HEAD_BYTES):
            if isinstance(rec, warcio.Broken):
                span.broken = True
                break
            at = start + rec.pos if kind is None else rec.member
            if at is None:
                span.broken = True
                break
            if at >= end:
                span.stop = at
                break
            span.n_records = rec.number
            notes = _Recorder()
            got = _document(rec, reading, limit, notes)
            uri = rec.headers.get("warc-target-uri") or rec.headers.get("warc-record-id") or None
            ev = Event(rec.number, uri, notes.seen, wtype=rec.headers.get("warc-type", "").lower())
            if got is not None:
                ev.text, ev.why = got[1], got[2]
                ev.offset, ev.length = at, rec.length
                ev.record_id = rec.headers.get("warc-record-id")
            span.events.append(ev)
        if digest is not None:
            inp.finish()
        if reader.inp.cut or reader.inp.skipped:
            span.broken = True
    finally:
        fh.close()
    span.digest = digest.hexdigest() if digest is not None else ""
    span.last = end >= _END
    return span


def join(spans: list[Span], source: str) -> WarcFile | None:
    """What :func:`simdoc.corpus.warc.read_warc` gives for the whole file, from its spans in order;
    None when they do not fit together (read the file again as one task)."""
    got = joined_ids(spans, source)
    return None if got is None else got[0]


def joined_ids(spans: list[Span], source: str) -> tuple[WarcFile, list[dict[int, str]]] | None:
    """As :func:`join`, and each span's member ids by record number counted from the span (a
    span's task names its documents ``SOURCE/#NUMBER``, the join renames them)."""
    for a, b in zip(spans, spans[1:]):
        if a.broken or a.stop != b.start:
            return None
    if not spans or spans[0].start != 0 or spans[-1].broken or spans[-1].stop is not None:
        return None
    out = WarcFile(digest=spans[0].digest)
    notes = _Notes()
    keys = MemberKeys(source)
    before = 0
    ids: list[dict[int, str]] = []
    for span in spans:
        ids.append({})
        for ev in span.events:
            number = ev.number + before
            uri = ev.uri or f"record {number}"
            for kind in ev.notes:
                notes.add(kind, f"{ev.wtype} {number} ({uri})")
            if ev.text is None and ev.why is None:
                continue  # not a page
            key = uri.replace("\0", "%00")
            if ev.text is None:
                out.left_out.append((member_id(source, key), ev.why))
                continue
            if key in keys.taken:
                key = f"{key}#{ev.record_id if ev.record_id is not None else number}"
            doc_id, said = keys.take(key, number, what="record")
            if said:
                out.warnings.append(f"record {number}: {said}")
            out.docs.append((doc_id, ev.text, ev.offset, ev.length))
            ids[-1][ev.number] = doc_id
        before += span.n_records
    out.warnings[:0] = notes.warnings()
    out.docs.sort()
    return out, ids

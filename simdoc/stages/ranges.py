"""A big plain JSON Lines, Parquet or WARC file read by several tasks, one span each, and joined (issue 29).

:func:`simdoc.stages.scan.scan_tasks` cuts such a file (see
:mod:`simdoc.corpus.jsonl_ranges` for which JSON Lines files and where, and
:mod:`simdoc.corpus.parquet` for Parquet files, cut into spans of row groups, and
:mod:`simdoc.corpus.warc_spans` for WARC files, cut into spans of records; spans of a
WARC file that no longer fit together are read again whole, here)
into tasks of one range each; :func:`joined` sits between the engine and the shingle
stage's collector and turns the results of one file's ranges, which come
in task order, back into the one result a single task reading the whole
file would have given: the same ids (line numbers offset by the lines of
the ranges before; ``--id-field`` keys taken in the file's line order;
a Parquet file's rows likewise),
documents in id order with their signature rows, the same warnings,
status and digest. A
file whose bytes turn out to be the ones indexed is then reported
unchanged, as a single task would report it (its ranges were read for
nothing: a file whose size or time changed is read again whole).

The parent still holds one file's rows at a time, as before, but as
arrays (:class:`simdoc.store.doccolumns.DocColumns`): ids that are line
numbers are renumbered and sorted as arrays, and the signature rows stay in
line order with the order to read them in (``sig_order``), so that they are
not copied twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simdoc.corpus import parquet, warc_spans
from simdoc.corpus.files import ReadResult
from simdoc.corpus.formats import member_id
from simdoc.corpus.jsonl_ranges import first_lines, joined_read, renumber
from simdoc.stages.scan_results import BatchResult, FileOutcome
from simdoc.store.doccolumns import DocColumns
from simdoc.store.doctable import _blob


def joined(results: Iterator[BatchResult]) -> Iterator[BatchResult]:
    """The results, those of one file's ranges joined into one (they come in task order).

    Closing this closes ``results`` too (the engine's stream of tasks: its workers stop)."""
    try:
        for r in results:
            if r.piece is None:
                yield r
                continue
            group = [r]
            while not group[-1].piece.last:
                group.append(next(results))
            yield join(group)
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def join(group: list[BatchResult]) -> BatchResult:
    """One file's range results as the result of one task reading it whole."""
    pieces = [g.piece for g in group]
    how = pieces[0].how
    warc_left_out = None
    if how == "warc":
        joined_warc = _warc_read(pieces)
        if joined_warc is None:  # the spans do not fit (the file changed since planned): read it whole
            from simdoc.stages.scan import _scan

            return _scan(pieces[0].task)
        res, ids, warc_left_out = joined_warc
    else:
        res, ids = (parquet.joined_read if how == "parquet" else joined_read)(pieces)
    digest = bytes.fromhex(res.digest) if res.digest else b""
    expected = pieces[0].expected
    num_perm = group[0].signatures.shape[1]
    none = np.empty((0, num_perm), dtype=np.uint32)
    if res.text is None:
        return BatchResult([FileOutcome(digest, res.status, res.warning, False, how)], DocColumns.empty(), none)
    if expected is not None and digest == expected:
        return BatchResult([FileOutcome(digest, res.status, res.warning, True, how)], DocColumns.empty(), none)
    source = pieces[0].source
    left_out: list[tuple[str, str]] = []
    befores = first_lines(pieces) if how != "warc" else [0] * len(pieces)
    if warc_left_out is not None:  # named by URI already, in file order
        left_out.extend(warc_left_out)
    else:
        for g, before, by_line in zip(group, befores, ids):
            left_out.extend((renumber(i, source, before, by_line), why) for i, why in g.files[0].left_out)
    docs = DocColumns.concatenate([g.docs for g in group])
    prefix = member_id(source, "").encode("utf-8", "surrogateescape")
    local = [_line_numbers(g.docs.id_blob, g.docs.id_offsets, len(prefix)) for g in group]
    if ids[0] is None:  # ids are line numbers: sorted as their digits, made as arrays
        lines = np.concatenate([n + before for n, before in zip(local, befores)])
        order, (blob, offsets) = _numbered(prefix, lines)
    else:  # --id-field: the keys taken in line order by joined_read, sorted as strings
        names = [by_line[n] for by_line, ns in zip(ids, local) for n in ns.tolist()]
        order = np.asarray(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
        blob, offsets = _blob([names[i] for i in order.tolist()])
    sigs = np.empty((len(docs), num_perm), dtype=np.uint32)
    at = 0
    for g in group:  # each range's rows copied and let go: one copy of the file's rows at a time
        sigs[at : at + len(g.docs)] = g.signatures
        at += len(g.docs)
        g.signatures = g.docs = None
    if how != "warc":  # a WARC file's are in file order, as one task lists them
        left_out.sort()
    outcome = FileOutcome(digest, res.status, res.warning, False, how, len(docs), left_out)
    # The rows stay in line order (sig_order says where each document's is): no second copy.
    nameless = docs.with_ids(np.zeros(0, np.uint8), np.zeros(len(docs) + 1, np.int64))  # its range ids: not taken
    return BatchResult([outcome], nameless.take(order).with_ids(blob, offsets), sigs, sig_order=order)


def _warc_read(pieces: list) -> tuple[ReadResult, list[dict[int, str]], list[tuple[str, str]]] | None:
    """A WARC file's spans joined: the read result, each span's ids by record number, the records
    left out; None when the spans do not fit (see :mod:`simdoc.corpus.warc_spans`)."""
    for p in pieces:
        if p.failed is not None:
            return p.failed, [{} for _ in pieces], []
    got = warc_spans.joined_ids(pieces, pieces[0].source)
    if got is None:
        return None
    whole, ids = got
    return ReadResult("", whole.digest, warning="; ".join(whole.warnings) or None), ids, whole.left_out


def _line_numbers(blob: np.ndarray, offsets: np.ndarray, skip: int) -> np.ndarray:
    """The numbers after the first ``skip`` bytes of each string of a blob column (a range's ids,
    ``SOURCE/#LINE``), read as decimal digits by arrays."""
    starts = offsets[:-1] + skip
    lengths = offsets[1:] - starts
    out = np.zeros(len(starts), dtype=np.int64)
    for k in range(int(lengths.max()) if len(lengths) else 0):
        has = lengths > k
        digit = blob[np.where(has, starts + k, 0)].astype(np.int64) - ord("0")
        out = np.where(has, out * 10 + digit, out)
    return out


def _numbered(prefix: bytes, lines: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The order of the ids ``prefix + str(line)`` as strings, and those ids in that order as a blob column."""
    digits = lines.astype(f"S{len(str(int(lines.max()))) if len(lines) else 1}")
    order = np.argsort(digits, kind="stable")  # bytes order: the order of the ids as strings
    width = digits.dtype.itemsize
    table = np.empty((len(lines), len(prefix) + width), dtype=np.uint8)
    table[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    table[:, len(prefix) :] = digits[order].view(np.uint8).reshape(len(lines), width)
    lengths = len(prefix) + np.count_nonzero(table[:, len(prefix) :], axis=1)
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    blob = table[np.arange(table.shape[1]) < lengths[:, None]]
    return order.astype(np.int64), (blob, offsets)

"""A big plain JSON Lines or Parquet file read by several tasks, one span each, and joined (issue 29).

:func:`simdoc.stages.scan.scan_tasks` cuts such a file (see
:mod:`simdoc.corpus.jsonl_ranges` for which JSON Lines files and where, and
:mod:`simdoc.corpus.parquet` for Parquet files, cut into spans of row groups)
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

The parent still holds one file's rows at a time, as before; only the
reading and signing are spread over the workers.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simdoc.corpus import parquet
from simdoc.corpus.jsonl_ranges import first_lines, joined_read, renumber
from simdoc.stages.scan_results import BatchResult, DocOut, FileOutcome


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
    res, ids = (parquet.joined_read if how == "parquet" else joined_read)(pieces)
    digest = bytes.fromhex(res.digest) if res.digest else b""
    expected = pieces[0].expected
    num_perm = group[0].signatures.shape[1]
    none = np.empty((0, num_perm), dtype=np.uint32)
    if res.text is None:
        return BatchResult([FileOutcome(digest, res.status, res.warning, False, how)], [], none)
    if expected is not None and digest == expected:
        return BatchResult([FileOutcome(digest, res.status, res.warning, True, how)], [], none)
    source = pieces[0].source
    docs: list[DocOut] = []
    left_out: list[tuple[str, str]] = []
    for g, before, by_line in zip(group, first_lines(pieces), ids):
        for d in g.docs:
            d.id = renumber(d.id, source, before, by_line)
            docs.append(d)
        left_out.extend((renumber(i, source, before, by_line), why) for i, why in g.files[0].left_out)
    order = np.asarray(sorted(range(len(docs)), key=lambda i: docs[i].id), dtype=np.int64)
    sigs = np.empty((len(docs), num_perm), dtype=np.uint32)
    rank = np.empty(len(docs), dtype=np.int64)
    rank[order] = np.arange(len(docs))
    at = 0
    for g in group:  # each range's rows put in place and let go: one copy of the file's rows at a time
        sigs[rank[at : at + len(g.docs)]] = g.signatures
        at += len(g.docs)
        g.signatures = None
    left_out.sort()
    outcome = FileOutcome(digest, res.status, res.warning, False, how, len(docs), left_out)
    return BatchResult([outcome], [docs[i] for i in order.tolist()], sigs)

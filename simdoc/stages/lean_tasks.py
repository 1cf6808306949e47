"""The reading tasks of a local build, made from the plan's columns a block at a time.

:func:`simdoc.stages.scan.scan_tasks` takes any plan, one entry at a time,
through a chain of generators (the entries, how each is read, runs of files
with and without spans, batches): ~4 us a file, in the thread of the main
process that feeds the pool while its workers read (c100k: 0.3-0.5 CPU-s of
the main process's ~1.1 during the shingle stage of a build at -j 2, on the
cores the workers need). :func:`lean_scan_tasks` makes the same tasks, in the
same order, for the plan a local build reads most files by (columns of the
walk, no part files): the ids, paths, sizes and digests of a block of files
gathered at once, and the batches cut in one loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from simdoc.corpus.parquet import pyarrow_findable
from simdoc.corpus.read import MEMBER_WAYS
from simdoc.corpus.walk import Entries
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import plan as plans
from simdoc.stages import scan
from simdoc.stages.plan import ToRead
from simdoc.stages.scan import _NO_SIGNATURES, ScanTask, scan_tasks


def reading_tasks(
    plan, shingle: ShingleParams, signature: SignatureParams | None, parts: str | None, racy: Callable, spill: str | None
) -> Iterator[ScanTask]:
    """The tasks of :func:`simdoc.stages.scan.scan_tasks`, by :func:`lean_scan_tasks` where it takes the plan."""
    if lean(plan, parts):
        return lean_scan_tasks(plan, shingle, signature, spill)
    return scan_tasks(plan, shingle, signature, parts, racy, spill)


def lean(plan: object, parts: object) -> bool:
    """Whether :func:`lean_scan_tasks` takes ``plan``: the walk's columns, read with no part files,
    pyarrow at hand (else scan_tasks says a Parquet file needs it before any task)."""
    return parts is None and isinstance(plan, ToRead) and plan.lean and isinstance(plan.plan.entries, Entries) and pyarrow_findable()


def lean_scan_tasks(plan: ToRead, shingle: ShingleParams, signature: SignatureParams | None, spill: str | None = None) -> Iterator[ScanTask]:
    """:func:`simdoc.stages.scan.scan_tasks` of a plan :func:`lean` takes (no ``parts``): the same tasks."""
    signer, keep_sets = signature or _NO_SIGNATURES, signature is None
    spill = spill if signature is None else None
    follow = bool(shingle.follow_symlinks)
    # Read when called, as scan_tasks reads them (tests patch them there).
    batch_bytes, batch_docs, how_read, spans_of = scan.BATCH_BYTES, scan.BATCH_DOCS, scan.how_read, scan.spans_of
    files: list[tuple] = []
    hows: list[str] = []
    size = 0
    for ids, paths, sizes, digests in _blocks(plan):
        for doc_id, path, n, d in zip(ids, paths, sizes, digests):
            how = how_read(path, n)
            spans = spans_of(path, n, shingle.text_field, follow) if signature is not None and how in MEMBER_WAYS else None
            if spans:  # a big container: one task a span, after the batch before it
                if files:
                    yield ScanTask(files, shingle, signer, keep_sets, spill, hows=tuple(hows))
                    files, hows, size = [], [], 0
                for s in spans:
                    yield ScanTask([(doc_id, path, n, d)], shingle, signature, span=s, hows=(how,))
                continue
            if n >= batch_bytes and files:  # a large file goes alone (as simdoc.stages.scan.batches cuts)
                yield ScanTask(files, shingle, signer, keep_sets, spill, hows=tuple(hows))
                files, hows, size = [], [], 0
            files.append((doc_id, path, n, d))
            hows.append(how)
            size += n
            if size >= batch_bytes or len(files) >= batch_docs:
                yield ScanTask(files, shingle, signer, keep_sets, spill, hows=tuple(hows))
                files, hows, size = [], [], 0
    if files:
        yield ScanTask(files, shingle, signer, keep_sets, spill, hows=tuple(hows))


def _blocks(plan: ToRead) -> Iterator[tuple[list[str], list[str], list[int], list[bytes | None]]]:
    """(ids, paths, sizes, digests indexed or None) of the plan's files, a block at a time (as
    many as ToRead makes entries of at once)."""
    entries, old, rows_of = plan.plan.entries, plan.plan.old, plan.plan.digest_row
    block = plans.ID_BLOCK
    for a in range(0, len(plan.which), block):
        which = plan.which[a : a + block]
        at = which.tolist()
        ids = [entries.ids[i] for i in at]
        paths = [entries.paths[i] for i in at]
        rows = rows_of[which]
        if (rows < 0).all():  # a new build: no digest indexed
            digests: list[bytes | None] = [None] * len(at)
        else:
            digests = [None if j < 0 else bytes(old.file_digest[j]) for j in rows.tolist()]
        yield ids, paths, entries.stat[which, 0].tolist(), digests

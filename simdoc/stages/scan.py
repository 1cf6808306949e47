"""The shingle stage's tasks: read a batch of files, shingle and sign every document.

A :class:`ScanTask` names some files. The worker reads each (a JSON Lines or
WARC file gives one document per member, see :mod:`simdoc.corpus.read`), and
computes every document's MinHash signature straight from the stream of its
window hashes: a minimum needs neither sorted nor unique shingles, so no
per-document sort is done on this path. Only when ``simdoc shingle`` runs as
a stage of its own (``keep_sets``) are the sorted shingle sets made and sent
back, to be stored.

A file whose bytes turn out to be the ones indexed before (``expected``
digest: its size or time changed, or it was racily clean) is not shingled
at all: the parent keeps its rows, as git keeps an index entry whose content
hash still matches.

Tasks are top-level, picklable dataclasses, made by :func:`scan_tasks` as the
engine draws them: consecutive files, cut at BATCH_BYTES or BATCH_DOCS files;
a big JSON Lines, Parquet or WARC file is one task a range instead (joined
by :mod:`simdoc.stages.ranges`), with either engine.
Results travel back to the parent as columns (ids and sources as UTF-8
blobs; :class:`simdoc.store.doccolumns.DocColumns`): about a hundred bytes
per document, plus its signature row with the local engine.

On a Dask cluster a task also writes its result to a part file of the index
(``dask-parts/scan/<key>.npz``, :func:`simdoc.stages.scan_results.write_part`), atomically, and sends
back only where it is (:class:`~simdoc.stages.scan_results.PartWritten`): the client reads the
docs-table columns from the part, in task order, and workers copy the signature rows
into the index (:mod:`simdoc.stages.dask_signatures`).
A part that exists is that task's completion record, as in datatrove's
``completions/``. Its name is a hash of everything the result depends on
(:func:`part_key`: each file's id, path, stat (size, modification and change
times, inode, device) and the digest indexed before, the parameters, the
simdoc version and reading rules, and a range's bounds), so a client killed while reading is followed by a run
that takes the parts of the same work instead of running it again, and
never takes a part of other work. A part is reusable only if no file of
the task was racily clean when it was listed (:mod:`simdoc.stages.racy`,
decided from the file system's own times, not a host's clock): a file
changed again in the same change-time tick would look unchanged. Parts
hold arrays and JSON only (read with ``allow_pickle=False``): an index
directory is not trusted to hold code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simdoc.corpus import plain_batch
from simdoc.corpus.files import read_plain
from simdoc.corpus.objects import is_url
from simdoc.corpus.parquet import have_pyarrow, is_parquet, pyarrow_findable
from simdoc.corpus.plain_batch import PlainBatch, sign_spans
from simdoc.corpus.read import (
    MEMBER_WAYS,
    Member,
    how_read,
    no_pyarrow,
    read_file,
    read_range_file,
    spans_of,
    text_digest,
    text_size,
)
from simdoc.corpus.walk import Entries, FileEntry
from simdoc.corpus.warc import WarcReading
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import shingle_texts
from simdoc.stages.range_rows import rows_batch
from simdoc.stages.scan_plain import plain_result
from simdoc.stages.scan_results import BatchResult, DocOut, FileOutcome, PartWritten, doc_columns, write_part
from simdoc.stages.short_docs import leave_out, short_documents
from simdoc.stages.spilled import SetRuns, SpilledSet, rows_of

BATCH_BYTES = 4 << 20  # text per shingling task
BATCH_DOCS = 2000
if TYPE_CHECKING:
    from simdoc.stages.plan import FileToRead, Plan, ToRead

_UNREAD = ("binary", "unreadable")  # statuses of files that give no document
# `simdoc shingle` on its own stores shingle sets; the tasks' signatures, of length 1, go unused.
_NO_SIGNATURES = SignatureParams(1).resolved()


@dataclass(frozen=True)
class ScanTask:
    """One batch of files for a worker: (id, path, size, digest indexed before or None) each,
    read and shingled as ``shingle`` says and signed as ``signature`` says (both resolved)."""

    files: list[tuple[str, str, int, bytes | None]]
    shingle: ShingleParams
    signature: SignatureParams
    keep_sets: bool = False
    spill: str | None = None  # with keep_sets: where a long document's set is built on disk (the index folder)
    part: str | None = None  # where the task writes its result (its completion record); None: nowhere
    reusable: bool = False  # no file was racily clean when listed: a later run may take its part
    span: tuple[int, int] | None = None  # one range of its one JSON Lines, Parquet or WARC file (see simdoc.stages.ranges)
    # How each file is read (simdoc.corpus.read.how_read of its path and size), decided once as the
    # task was made; None: the worker decides (a task made elsewhere).
    hows: tuple[str, ...] | None = None


def batches(entries: Iterable, size_of: Callable[[object], int] = attrgetter("size")) -> Iterator[list]:
    """Consecutive entries, cut where a batch reaches BATCH_BYTES of files or BATCH_DOCS files;
    a file of BATCH_BYTES or more goes alone (two large files in one batch would double its memory).
    ``size_of``: an entry's size (a FileEntry's by default)."""
    cur, size = [], 0
    for e in entries:
        n = size_of(e)
        if n >= BATCH_BYTES and cur:
            yield cur
            cur, size = [], 0
        cur.append(e)
        size += n
        if size >= BATCH_BYTES or len(cur) >= BATCH_DOCS:
            yield cur
            cur, size = [], 0
    if cur:
        yield cur


def files_to_read(plan: Plan, placed: bool) -> ToRead:
    """:meth:`Plan.to_read <simdoc.stages.plan.Plan.to_read>`, lean (a :class:`FileToRead` a file,
    from the walk's columns) when it gave them and no task writes a part (which needs each
    file's stat): 10^5 small tuples made as they are asked for, not FileEntry objects."""
    return plan.to_read(lean=not placed and isinstance(plan.entries, Entries))


def scan_tasks(
    plan: Iterable[tuple[FileEntry, bytes | None, bool]],
    shingle: ShingleParams,
    signature: SignatureParams | None,
    parts: str | os.PathLike | None = None,
    racy: Callable[[FileEntry], bool] = lambda e: True,
    spill: str | None = None,
) -> Iterator[ScanTask]:
    """The tasks for the files of ``plan`` (entry, digest indexed, keep without reading) not kept, in order.

    An entry is a FileEntry, or (without ``parts``) a :class:`~simdoc.stages.plan.FileToRead`.

    Without ``signature`` (a stage of its own) the tasks return the shingle sets.
    ``parts``: the folder (absolute) where each task writes its part, named by
    :func:`part_key`; None: nowhere. ``racy``: whether a file was racily clean
    as this run listed it (then its task's part serves this run only).
    ``spill``: without ``signature`` and ``parts``, the folder (the index's)
    where a long document's set is built on disk (:mod:`simdoc.stages.spilled`).
    """
    if not pyarrow_findable():  # then a Parquet file is an error here, once, before any task (else: read it)
        # Gone over twice, and never held whole: a Sequence such as Plan.to_read() makes each item as
        # it is asked for (10^6 entries held were ~0.4 GB of the parent and of the workers it forks).
        # Else gone over once, as it comes: files still being listed (simdoc.stages.ahead).
        plan = plan if isinstance(plan, Sequence) else list(plan)
        names = getattr(plan, "names", None)
        names = names() if names is not None else ((e.path, e.size) for e, _, keep in plan if not keep)
        if any(is_parquet(path) and how_read(path, size) == "parquet" for path, size in names) and not have_pyarrow():
            raise no_pyarrow()

    def ways() -> Iterator[tuple[FileEntry | FileToRead, bytes | None, str, list[tuple[int, int]] | None]]:
        # How each file is read is decided here, once (the task carries it to the worker). A big
        # plain JSON Lines, Parquet or WARC file: one task a byte range or span of row groups
        # or records (joined by simdoc.stages.ranges), on a cluster too (each range's task writes
        # a part of its own); not for `simdoc shingle` alone (it keeps sets by file). Only a file
        # of many documents can be one (the rest are not asked: most files of a corpus).
        for e, d, keep in plan:
            if keep:
                continue
            how = how_read(e.path, e.size)
            spans = None
            if signature is not None and how in MEMBER_WAYS:
                spans = spans_of(e.path, e.size, shingle.text_field, bool(shingle.follow_symlinks)) or None
            yield e, d, how, spans

    for has_spans, run in groupby(ways(), key=lambda item: item[3] is not None):
        if not has_spans:  # consecutive files read whole: batched as they come
            yield from _batch_tasks(run, shingle, signature, parts, racy, spill)
            continue
        for e, d, how, spans in run:
            for s in spans:
                task = ScanTask([(e.id, e.path, e.size, d)], shingle, signature, span=s, hows=(how,))
                yield task if parts is None else _with_part(task, [e], parts, racy)


def _batch_tasks(run: Iterable[tuple], shingle, signature, parts, racy, spill) -> Iterator[ScanTask]:
    """The tasks of a run of (entry, digest indexed, how it is read, None): :func:`batches` of it."""
    for b in batches(run, size_of=_entry_size):
        files = [(e.id, e.path, e.size, d) for e, d, _, _ in b]
        # A cluster's workers may not see the folder: there a long document's set is held.
        task = ScanTask(
            files, shingle, signature or _NO_SIGNATURES, signature is None, spill if parts is None and signature is None else None,
            hows=tuple(item[2] for item in b),
        )
        yield task if parts is None else _with_part(task, [item[0] for item in b], parts, racy)


def _entry_size(item: tuple) -> int:
    return item[0].size


def _with_part(task: ScanTask, entries: list[FileEntry], parts, racy) -> ScanTask:
    """``task`` writing its result to its part in ``parts`` (see the module docstring)."""
    name = f"{part_key(task, [list(e.stat()[1:]) for e in entries])}.npz"
    return dataclasses.replace(task, part=str(Path(parts) / name), reusable=not any(racy(e) for e in entries))


def part_key(task: ScanTask, stats: list[list[int]]) -> str:
    """The name of a task's part: a hash of all its result depends on, so that only the same work finds it.

    The files (id, path, size, ``stats``: modification and change times, inode
    and device; digest indexed before: a file whose bytes have that digest is
    reported unchanged), every reading, shingling and signing parameter,
    whether shingle sets are kept, the simdoc version and the reading rules (a killed run of a
    simdoc that read files another way, of the same version number, left parts of other texts).
    """
    from simdoc.corpus import reading_rules
    from simdoc.version import __version__

    files = [[i, p, s, m, d.hex() if d is not None else None] for (i, p, s, d), m in zip(task.files, stats)]
    what = [__version__, reading_rules.READING_RULES, repr(task.shingle), repr(task.signature), task.keep_sets, files]
    if task.span is not None:  # one range of the file: each of its ranges has a part of its own
        what.append(list(task.span))
    return hashlib.sha256(json.dumps(what).encode("utf-8", "surrogatepass")).hexdigest()[:32]


_HASHERS: dict[SignatureParams, object] = {}  # a worker draws each hash family once


def _hasher(signature: SignatureParams):
    from simdoc.minhash import MinHasher

    hasher = _HASHERS.get(signature)
    if hasher is None:
        hasher = _HASHERS[signature] = MinHasher(signature.num_perm, signature.seed, scheme=signature.scheme)
    return hasher


def scan_batch(task: ScanTask) -> BatchResult | PartWritten:
    """Read, shingle and sign one batch of files (runs in a worker process).

    With ``task.part``, the result is written there (see the module), and
    stays there: what is sent back only names the part (:class:`PartWritten`);
    the client reads the docs-table columns from it, and the signature rows are
    copied into the index by workers too (:mod:`simdoc.stages.dask_signatures`).
    A client killed before the
    end takes the part instead of running the task again, unless a file of
    the batch was racily clean when listed (``task.reusable``: a change
    within the same tick would not show). A part that cannot be written (no
    room) leaves the whole result to be sent back.
    """
    result = _scan(task)
    if task.part is not None and not task.keep_sets:
        token = os.urandom(16).hex()  # (secrets.token_hex, without importing secrets: hmac, base64)
        try:
            write_part(task.part, result, reusable=task.reusable, token=token)
        except OSError:
            return result
        return PartWritten(task.part, token, len(result.files), len(result.docs))
    elif task.part is not None and task.reusable:
        with contextlib.suppress(OSError):  # no room: then the run is not resumable
            write_part(task.part, result)
    return result


def whole_file_task(task: ScanTask) -> ScanTask:
    """The task reading the one file of a range's ``task`` whole, in the process that runs it
    (no part): for WARC spans that turn out not to fit together (see simdoc.stages.ranges)."""
    return dataclasses.replace(task, span=None, part=None, reusable=False)


def _scan(task: ScanTask) -> BatchResult:
    from simdoc.corpus import streaming
    from simdoc.minhash import SignatureFold

    spec, reading = task.shingle.spec, task.shingle
    fields = (reading.text_field, reading.id_field)
    files: list[FileOutcome] = []
    docs: list[DocOut] = []
    texts: list[str | bytes] = []  # documents shingled together, in document order
    streamed: dict[int, ShingleSets | np.ndarray] = {}  # document number -> its one-row sets, or signature
    streamed_paths: dict[int, str] = {}
    piece = None  # a range's task: what reading its range gave
    hasher = _hasher(task.signature)
    hows = task.hows if task.hows is not None and len(task.hows) == len(task.files) else [how_read(p, n) for _, p, n, _ in task.files]
    batch, in_batch = _plain_batch(task, hows, streaming.LARGE_CHARS)
    if batch is not None and min(in_batch) >= 0 and all(f[3] is None for f in task.files) and batch.all_text():
        return plain_result(task.files, batch, hasher, spec, task.signature.num_perm)  # most tasks: at once
    for (doc_id, path, size, expected), how, k in zip(task.files, hows, in_batch):
        if how == "streamed":
            # A huge file is shingled in chunks, in bounded memory; so is every compressed
            # file, whose size says nothing of what it holds.
            fold = None if task.keep_sets else SignatureFold(hasher)  # signed as read: no set is kept
            runs = SetRuns(task.spill) if task.keep_sets and task.spill else None  # the set built on disk
            res, row = streaming.stream_document(
                path, spec, reading.max_bytes, reading.follow_symlinks, "stream" if fold else "sets",
                sink=(fold and (lambda data, _counts: fold.add(data))) or (runs and runs.add),
            )
            outcome = FileOutcome(_raw(res.digest), res.status, res.warning, False, how)
            if runs is not None and res.text is None:
                runs.abort()
            elif runs is not None:
                n_windows = runs.n_windows
                row = runs.finish()
            if res.text is not None:
                streamed_paths[len(docs)] = path
                streamed[len(docs)] = row if fold is None else fold.result()
                n = (int(row.counts.sum()) if runs is None else n_windows) if fold is None else fold.n
                docs.append(DocOut(doc_id, "", -1, -1, size, _raw(res.digest), how, res.status, n))
                outcome.n_docs = 1
            files.append(outcome)
            continue
        if how == "whole" and task.span is None and (path[:1] == "/" or not is_url(path)):  # most files: the fewest steps
            if k >= 0:  # read with the task's other small files (simdoc.corpus.plain_batch)
                text, digest, warning, status = batch.take(k)
            else:
                text, digest, warning, status = read_plain(path, reading.max_bytes, bool(reading.follow_symlinks))
            if expected is not None and digest == expected and status not in _UNREAD:
                files.append(FileOutcome(digest, status, warning, True, how))
                continue
            outcome = FileOutcome(digest, status, warning, False, how)
            if text is not None:
                texts.append(text)
                docs.append(DocOut(doc_id, "", -1, -1, size, digest, how, status, 0))
                outcome.n_docs = 1
            files.append(outcome)
            continue
        if task.span is not None:  # the join tells a file whose bytes are the ones indexed
            warc = WarcReading(reading.max_bytes, bool(reading.main_content), bool(reading.all_responses))
            got, piece = read_range_file(path, doc_id, task.span, fields, reading.max_bytes, reading.follow_symlinks, warc)
            piece.expected, expected = expected, None
            if piece.how == "warc":  # spans that turn out not to fit: the join reads the file whole
                piece.task = whole_file_task(task)
            if got.rows is not None:  # a JSON Lines range's members, as columns (simdoc.stages.range_rows)
                done = rows_batch(task, got, piece, how, hasher)
                if done is not None:
                    return done
                got.members = [Member(*d) for d in got.rows.docs(doc_id)]
        else:
            got = read_file(
                path, doc_id, how, reading.max_bytes, reading.follow_symlinks, fields,
                main_content=bool(reading.main_content), all_responses=bool(reading.all_responses),
            )
        res = got.result
        digest = _raw(res.digest)
        if expected is not None and digest == expected and res.status not in _UNREAD:
            files.append(FileOutcome(digest, res.status, res.warning, True, how))
            continue
        outcome = FileOutcome(digest, res.status, res.warning, False, how, left_out=list(got.left_out or []))
        if got.members is not None:
            for m in got.members:
                texts.append(m.text)
                docs.append(DocOut(m.id, doc_id, m.offset, m.length, text_size(m.text), text_digest(m.text), how, "ok", 0))
            outcome.n_docs = len(got.members)
        elif res.text is not None:
            texts.append(res.text)
            docs.append(DocOut(doc_id, "", -1, -1, size, digest, how, res.status, 0))
            outcome.n_docs = 1
        files.append(outcome)
    sigs = np.empty((len(docs), task.signature.num_perm), dtype=np.uint32)
    sets_parts: list[ShingleSets] = []
    in_texts = np.array([i for i in range(len(docs)) if i not in streamed], dtype=np.int64)
    large = [j for j, t in enumerate(texts) if len(t) > streaming.LARGE_CHARS]
    together = np.array([j for j, t in enumerate(texts) if len(t) <= streaming.LARGE_CHARS], dtype=np.int64)
    if len(together):
        rows = np.empty((len(together), task.signature.num_perm), dtype=np.uint32)
        sizes = sign_spans([texts[j] for j in together.tolist()], spec, hasher, rows)  # bytes to signature in one pass
        sigs[in_texts[together]] = rows
        for i, n in zip(in_texts[together].tolist(), sizes.tolist()):
            docs[i].n_shingles = int(n)
    spilled: dict[int, SpilledSet] = {}  # document number -> its set, built on disk (keep_sets)
    for j in large:  # signed a piece at a time, the same bytes: memory does not grow with the document
        fold = SignatureFold(hasher)
        if task.keep_sets and task.spill:  # and its set built on disk from the same pieces
            runs = SetRuns(task.spill)

            def both(data: np.ndarray, counts: np.ndarray) -> None:
                runs.add(data, counts)
                fold.add(data)

            streaming.windows_in_pieces(texts[j], spec, both, form="sets")
            spilled[int(in_texts[j])] = runs.finish()
            sigs[in_texts[j]], docs[in_texts[j]].n_shingles = fold.result(), runs.n_windows
            continue
        streaming.windows_in_pieces(texts[j], spec, lambda data, _counts: fold.add(data))
        sigs[in_texts[j]], docs[in_texts[j]].n_shingles = fold.result(), fold.n
    for i, row in streamed.items():
        if isinstance(row, SpilledSet):
            fold = SignatureFold(hasher)
            for data, _counts in row.chunks():
                fold.add(data)
            sigs[i] = fold.result()
        else:
            sigs[i] = row if isinstance(row, np.ndarray) else hasher.signatures(row)[0]
    if task.shingle.min_length:
        short = short_documents(docs, texts, streamed, streamed_paths, spec, task.shingle)
        if short:
            keep = [i not in short for i in range(len(docs))]
            texts = [t for t, i in zip(texts, (i for i in range(len(docs)) if i not in streamed)) if keep[i]]
            for i, row in [*streamed.items(), *spilled.items()]:
                if not keep[i] and isinstance(row, SpilledSet):
                    row.remove()
            streamed = {sum(keep[:i]): row for i, row in streamed.items() if keep[i]}
            spilled = {sum(keep[:i]): row for i, row in spilled.items() if keep[i]}
            sigs = sigs[np.asarray(keep, dtype=bool)]
            docs = leave_out(files, docs, short, task.shingle.min_length, spec.unit)
    sets = None
    if task.keep_sets:
        in_memory = [t for t, i in enumerate(i for i in range(len(docs)) if i not in streamed) if i not in spilled]
        text_sets = shingle_texts([texts[t] for t in in_memory], spec) if in_memory else None
        t = 0
        for i in range(len(docs)):
            if i in streamed:
                sets_parts.append(streamed[i])
            elif i in spilled:
                sets_parts.append(spilled[i])
            else:
                sets_parts.append(text_sets.slice(t, t + 1))
                t += 1
        sets = rows_of(sets_parts)
    return BatchResult(files, doc_columns(docs), sigs, sets, piece=piece if task.span is not None else None)


def _plain_batch(task: ScanTask, hows: list[str], largest: int) -> tuple[PlainBatch | None, list[int]]:
    """The task's small local files read whole, read together (:func:`plain_batch.read_together`).
    Not where texts are kept past signing (sets, ``--min-length``) or cut (``--max-bytes``)."""
    reading = task.shingle
    if task.span is not None or task.keep_sets or reading.min_length or reading.max_bytes is not None:
        return None, [-1] * len(task.files)
    return plain_batch.read_together(task.files, hows, largest, bool(reading.follow_symlinks))


def _raw(hexdigest: str) -> bytes:
    return bytes.fromhex(hexdigest) if hexdigest else b""

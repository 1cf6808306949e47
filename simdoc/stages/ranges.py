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

On a Dask cluster the ranges' tasks are the same, each writing its part
(:func:`simdoc.stages.scan_results.write_part`); their results come through
:func:`simdoc.stages.resume.resumed` (from a killed client's parts, too)
and are joined here alike, but for the signature rows, which stay in the
parts: the joined result names the parts (``parts``) and the order of the
rows (``sig_order``), and the workers copy them into the new matrix
(:class:`simdoc.stages.dask_signatures.Gathered`).

The parent still holds one file's rows at a time, as before, but as
arrays (:class:`simdoc.store.doccolumns.DocColumns`): ids that are line
numbers are renumbered and sorted as arrays, and the signature rows stay in
line order with the order to read them in (``sig_order``), so that they are
not copied twice. With the local engine they never pass through the parent's
pipe: each range's worker leaves them in a staging file, which the parent
maps (:mod:`simdoc.stages.staged_rows`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import numpy as np

from simdoc.corpus import parquet, warc_spans
from simdoc.corpus.files import ReadResult
from simdoc.corpus.formats import member_id
from simdoc.corpus.jsonl_ranges import first_lines, joined_read, line_ids, renumber, skipped_of
from simdoc.memory import heap_reused, release
from simdoc.stages.scan import scan_batch
from simdoc.stages.scan_results import BatchResult, FileOutcome
from simdoc.stages.staged_rows import StackedRows, open_staged
from simdoc.store.doccolumns import DocColumns
from simdoc.store.doctable import _blob


def joined(results: Iterator[BatchResult], spill: str | os.PathLike | None = None) -> Iterator[BatchResult]:
    """The results, those of one file's ranges joined into one (they come in task order).

    ``spill``: a folder (the index's) where a file's signature rows are written, unnamed, when
    they are many, instead of being held (512 MB at 10^6 documents); see :func:`signature_slices`.
    Closing this closes ``results`` too (the engine's stream of tasks: its workers stop)."""
    try:
        for r in results:
            if r.piece is None:
                yield r
                continue
            group, rows = [r], _Rows(spill, r)
            while not group[-1].piece.last:
                group.append(rows.take(next(results)))
            with heap_reused():  # 10^6 documents' columns made and dropped: not fresh pages each
                r = join(group, rows)
            yield r
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def join(group: list[BatchResult], rows: _Rows | None = None) -> BatchResult:
    """One file's range results as the result of one task reading it whole (``rows``: their
    signature rows, taken from them as they came; by default, taken here and held)."""
    if rows is None:
        rows = _Rows(None, group[0])
        for g in group[1:]:
            rows.take(g)
    pieces = [g.piece for g in group]
    how = pieces[0].how
    warc_left_out = None
    if how == "warc":
        joined_warc = _warc_read(pieces)
        if joined_warc is None:  # the spans do not fit (the file changed since planned): read it whole
            rows.close()
            return scan_batch(pieces[0].task)
        res, ids, warc_left_out = joined_warc
    else:
        res, ids = (parquet.joined_read if how == "parquet" else joined_read)(pieces)
    digest = bytes.fromhex(res.digest) if res.digest else b""
    expected = pieces[0].expected
    none = None if rows.num_perm is None else np.empty((0, rows.num_perm), dtype=np.uint32)
    if res.text is None or (expected is not None and digest == expected):  # unreadable, or unchanged
        rows.close()
        unchanged = res.text is not None
        return BatchResult([FileOutcome(digest, res.status, res.warning, unchanged, how)], DocColumns.empty(), none)
    source = pieces[0].source
    left_out: list[tuple[str, str]] = []
    befores = first_lines(pieces) if how != "warc" else [0] * len(pieces)
    if warc_left_out is not None:  # named by URI already, in file order
        left_out.extend(warc_left_out)
    else:
        for g, before, by_line in zip(group, befores, ids):
            left_out.extend((renumber(i, source, before, by_line), why) for i, why in g.files[0].left_out)
        if how in ("jsonl", "parquet"):  # its lines (rows) skipped, as one task reading it whole lists them
            left_out.extend(skipped_of(pieces, "row" if how == "parquet" else "line"))
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
    for g in group:
        g.docs = None  # concatenated above: let go
    sigs = rows.rows()
    if how != "warc":  # a WARC file's are in file order, as one task lists them
        left_out.sort()
    outcome = FileOutcome(digest, res.status, res.warning, False, how, len(docs), left_out)
    # The rows stay in line order (sig_order says where each document's is): no second copy.
    nameless = docs.with_ids(np.zeros(0, np.uint8), np.zeros(len(docs) + 1, np.int64))  # its range ids: not taken
    return BatchResult([outcome], nameless.take(order).with_ids(blob, offsets), sigs, sig_order=order, parts=rows.parts)


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
    order = string_order(lines)
    return order, line_ids(prefix, lines[order])


def string_order(numbers: np.ndarray) -> np.ndarray:
    """``np.argsort`` of whole numbers (not negative) written in decimal, as strings, stable: the
    order of ids that end in them.

    Digits compare as strings do when each number is padded on the right with zeros to the
    widest one's width and, at equal padded values, the shorter (a prefix) comes first: one
    integer key, sorted as integers (10^6 line numbers: 0.39 -> 0.17 CPU-s against sorting
    their digits as bytes, which the widest numbers and any negative one still take)."""
    numbers = np.asarray(numbers, dtype=np.int64)
    width = len(str(int(numbers.max()))) if len(numbers) else 1
    if width > 17 or (len(numbers) and int(numbers.min()) < 0):  # the key would not fit in 64 bits
        return np.argsort(numbers.astype(f"S{width + 1}"), kind="stable").astype(np.int64)
    n_digits = np.ones(len(numbers), dtype=np.int64)
    for k in range(1, width):
        n_digits += numbers >= 10**k
    key = (numbers * 10 ** (width - n_digits)).astype(np.uint64) * np.uint64(32) + n_digits.astype(np.uint64)
    return np.argsort(key, kind="stable").astype(np.int64)



class _Rows:
    """One file's signature rows, taken from its ranges' results as they come (line order).

    With the local engine each range's worker left its rows in a staging file
    (:mod:`simdoc.stages.staged_rows`): it is mapped, and :meth:`rows` stacks
    the mappings (:class:`~simdoc.stages.staged_rows.StackedRows`). Rows that
    came back with a result (a worker with no room, or a task run here) are
    held, or, with a ``spill`` folder (the index's), written to an unnamed
    temporary file there and memory-mapped once all are in, so that the
    parent never holds them (512 MB at 10^6 documents);
    :func:`signature_slices` lets the mapped pages go as they are read.

    On a cluster the ranges' rows stay in their parts: only (part, rows) are taken (``parts``),
    and the workers copy the rows (:mod:`simdoc.stages.dask_signatures`). A range whose worker
    could not write its part (no room) sends its rows: then all of them are held here."""

    def __init__(self, spill: str | os.PathLike | None, first: BatchResult) -> None:
        self.spill = spill
        self.num_perm = first.signatures.shape[1] if first.signatures is not None else None
        self.parts: list[tuple[str, int]] | None = [] if first.signatures is None and first.rows_file is None else None
        self.file = None
        # In line order: a staging file's mapped rows, rows held, or (first row, rows) of the spill file.
        self.blocks: list[np.ndarray | tuple[int, int]] = []
        self.staged = False
        self.spilled = 0
        self.n = 0
        self._open()
        self.take(first)

    def _open(self) -> None:
        if self.parts is None and self.spill is not None and self.file is None:
            # O_TMPFILE where the file system has it, else a simdoc temporary's name, removed at once.
            self.file = tempfile.TemporaryFile(dir=self.spill, prefix=".signatures.tmp.npy.", suffix=".tmp")

    def take(self, r: BatchResult) -> BatchResult:
        """Take ``r``'s rows (it keeps none)."""
        if self.parts is not None and r.signatures is None and r.rows_file is None:
            self.parts.append((r.part, len(r.docs)))
            self.n += len(r.docs)
            return r
        if self.parts is not None:  # rows that came back after all: those in parts are read here too
            parts, self.parts, self.n = self.parts, None, 0
            self._open()
            for part, _ in parts:
                self._add(_part_rows(part))
        if r.rows_file is not None:  # left by its worker in a staging file
            rows = open_staged(r.rows_file, len(r.docs))
            r.rows_file = None
            self.num_perm = rows.shape[1] if self.num_perm is None else self.num_perm
            if rows.shape[1] != self.num_perm:
                raise RuntimeError(f"a range's signature rows have {rows.shape[1]} columns, not {self.num_perm}")
            self.blocks.append(rows)
            self.staged = True
            self.n += len(rows)
            return r
        if r.signatures is None:  # left in its part, but the other ranges' are here: read here
            r.signatures, r.part = _part_rows(r.part), None
        self._add(r.signatures)
        r.signatures = None
        return r

    def _add(self, rows: np.ndarray) -> None:
        if self.num_perm is None:
            self.num_perm = rows.shape[1]
        if not len(rows):
            return
        if self.file is not None:
            self.file.write(np.ascontiguousarray(rows, dtype=np.uint32).data)
            self.blocks.append((self.spilled, len(rows)))
            self.spilled += len(rows)
        else:
            self.blocks.append(rows)
        self.n += len(rows)

    def rows(self) -> np.ndarray | StackedRows | None:
        """All of them, (n, num_perm) uint32, or stacked (staging files); None: they are in ``parts``."""
        if self.parts is not None:
            return None
        spilled = None
        if self.file is not None:
            with self.file:
                self.file.flush()
                if self.spilled:
                    spilled = np.memmap(self.file, dtype=np.uint32, mode="r", shape=(self.spilled, self.num_perm))
        if not self.n:
            return np.empty((0, self.num_perm), dtype=np.uint32)
        if self.staged:
            blocks = [spilled[b[0] : b[0] + b[1]] if isinstance(b, tuple) else b for b in self.blocks]
            self.blocks = []
            return StackedRows(blocks, self.num_perm)
        if spilled is not None:  # every row in the spill file, in order
            return spilled
        sigs = np.empty((self.n, self.num_perm), dtype=np.uint32)
        at = 0
        while self.blocks:  # one copy of the file's rows at a time
            part = self.blocks.pop(0)
            sigs[at : at + len(part)] = part
            at += len(part)
        return sigs

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        self.blocks = []


def _part_rows(part: str) -> np.ndarray:
    """The signature rows a range's task left in its part."""
    with np.load(part, allow_pickle=False) as z:
        return np.asarray(z["signatures"], dtype=np.uint32)


def signature_slices(batch: BatchResult, first: int, n: int, step: int = 1 << 16) -> Iterator[np.ndarray]:
    """The signature rows of documents ``first`` to ``first + n`` of ``batch``, a slice at a time
    (joined ranges keep theirs in line order: gathered by ``sig_order``, their mapped pages let go).

    Gathered rows come in one buffer, filled again for each slice (a new array of 32 MB a
    slice was 32 MB of fresh pages): a slice is to be used before the next is asked for."""
    sigs, order = batch.signatures, batch.sig_order
    if order is None:
        for a in range(first, first + n, step):
            yield sigs[a : a + min(step, first + n - a)]
            release(sigs)
        return
    buf = np.empty((min(step, n), sigs.shape[1]), dtype=np.uint32)
    for a in range(first, first + n, step):
        b = min(a + step, first + n)
        if isinstance(sigs, StackedRows):
            yield sigs.gather(order[a:b], buf[: b - a])
            sigs.release()
        else:
            # "clip" takes straight into the buffer ("raise" copies first); the order is an argsort of
            # the file's rows, so no index needs checking.
            yield np.take(sigs, order[a:b], axis=0, out=buf[: b - a], mode="clip")
            release(sigs)

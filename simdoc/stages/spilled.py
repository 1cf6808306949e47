"""A long document's sorted shingle set, built and stored in bounded memory (`simdoc shingle`).

`simdoc shingle` run as a stage of its own stores every document's sorted
set of shingle hashes with their counts. Built whole, a document of few
repeats (random text) held some 50 bytes a character. Here its windows come
a piece at a time (:func:`simdoc.corpus.streaming.windows_in_pieces` or a
streamed file's sink); each piece's sorted (hash, count) pairs are gathered
up to :data:`RUN_ITEMS`, summed into one sorted run and written to a
temporary file of the index folder. The runs are then merged a block of
each at a time (:func:`_merge`) into the document's set on disk, which
:func:`write_rows` copies into the stored arrays as a stream: the bytes are
those of shingling it whole.

The files are temporaries of the index (``.shingles.data.tmp.npy.*.tmp``):
a run killed midway leaves them for the next writer's clean-up.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simdoc.corpus.streaming import sum_repeats
from simdoc.shinglesets import ShingleSets

# (hash, count) pairs gathered before they are summed into a run (~8 bytes each, and the
# sort's ~32 bytes an item at the merge): ~80 MB at most.
RUN_ITEMS = 1 << 21
COPY_ITEMS = 1 << 20  # items copied at once from a set on disk into the stored arrays
MERGE_BLOCK = 1 << 15  # items read of each run at least, per step of the merge


def _temporary(folder: str) -> tuple[int, str]:
    return tempfile.mkstemp(prefix=".shingles.data.tmp.npy.", suffix=".tmp", dir=folder)


@dataclass(frozen=True)
class SpilledSet:
    """One document's sorted set on disk: ``n`` uint32 hashes, then their ``n`` uint32 counts.

    Small and picklable: it travels from a reading task to the stage's writer in place of the set.
    """

    path: str
    n: int

    def chunks(self, items: int = COPY_ITEMS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(hashes, counts) of consecutive runs of the set, ``items`` at a time."""
        for start in range(0, self.n, items):
            count = min(items, self.n - start)
            data = np.fromfile(self.path, np.uint32, count, offset=4 * start)
            counts = np.fromfile(self.path, np.uint32, count, offset=4 * (self.n + start))
            yield data, counts

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class SetRuns:
    """Sorted (hash, count) pieces of one document in, its sorted set on disk out (:meth:`finish`).

    ``add`` takes what :func:`simdoc.shingling.shingle_texts` gives a piece with
    ``form="sets"``: sorted unique hashes and their counts. ``n_windows`` is the
    sum of the counts (the document's window count).
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.pieces: list[tuple[np.ndarray, np.ndarray]] = []
        self.held = 0
        self.runs: list[SpilledSet] = []
        self.n_windows = 0

    def add(self, data: np.ndarray, counts: np.ndarray) -> None:
        if not len(data):
            return
        self.pieces.append((np.asarray(data, np.uint32), np.asarray(counts, np.uint32)))
        self.held += len(data)
        self.n_windows += int(np.sum(counts, dtype=np.int64))
        if self.held >= RUN_ITEMS:
            self._spill()

    def _summed(self) -> tuple[np.ndarray, np.ndarray]:
        data = np.concatenate([p[0] for p in self.pieces])
        counts = np.concatenate([p[1] for p in self.pieces])
        self.pieces, self.held = [], 0
        return sum_repeats(data, counts)

    def _spill(self) -> None:
        if self.pieces:
            self.runs.append(_write(self.folder, [self._summed()]))

    def finish(self) -> SpilledSet:
        """The document's set on disk (its runs removed)."""
        self._spill()
        runs, self.runs = self.runs, []
        if len(runs) == 1:
            return runs[0]
        try:
            return _write(self.folder, _merge(runs))
        finally:
            for r in runs:
                r.remove()

    def abort(self) -> None:
        for r in self.runs:
            r.remove()
        self.runs = []


def _write(folder: str, chunks) -> SpilledSet:
    """A set on disk from consecutive (hashes, counts) chunks: the hashes, then the counts."""
    fd, path = _temporary(folder)
    try:
        n = 0
        cfd, cpath = _temporary(folder)  # the counts, until they are appended after the hashes
        try:
            with os.fdopen(fd, "wb", closefd=False) as out, os.fdopen(cfd, "w+b", closefd=False) as side:
                for data, counts in chunks:
                    out.write(np.ascontiguousarray(data, np.uint32).data)
                    side.write(np.ascontiguousarray(counts, np.uint32).data)
                    n += len(data)
                side.seek(0)
                while block := side.read(4 * COPY_ITEMS):
                    out.write(block)
        finally:
            os.close(cfd)
            with contextlib.suppress(OSError):
                os.unlink(cpath)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)
    return SpilledSet(path, n)


def _merge(runs: list[SpilledSet]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The sorted set of the runs' union (counts summed), a block of each run at a time.

    Each step reads the next block of every run and takes, of each, the hashes up
    to the smallest last hash of a block that does not end its run: no later
    block holds one of those, so the step's union is final. The run with that
    smallest last hash gives its whole block, so every step moves on.
    """
    block = max(MERGE_BLOCK, RUN_ITEMS // max(1, len(runs)))
    at = [0] * len(runs)
    while True:
        got = []
        for i, r in enumerate(runs):
            count = min(block, r.n - at[i])
            if count > 0:
                got.append((i, np.fromfile(r.path, np.uint32, count, offset=4 * at[i])))
        if not got:
            return
        ending = [data[-1] for i, data in got if at[i] + len(data) < runs[i].n]
        cut = min(ending) if ending else None
        data_parts, count_parts = [], []
        for i, data in got:
            take = len(data) if cut is None else int(np.searchsorted(data, cut, side="right"))
            r = runs[i]
            data_parts.append(data[:take])
            count_parts.append(np.fromfile(r.path, np.uint32, take, offset=4 * (r.n + at[i])))
            at[i] += take
        yield sum_repeats(np.concatenate(data_parts), np.concatenate(count_parts))


@dataclass
class Rows:
    """A batch's shingle sets where some rows are on disk: each part is in-memory rows (a
    ShingleSets) or one row on disk (a SpilledSet). Given in place of a ShingleSets by a
    reading task that spilled, and sliced by rows as the stage collects them."""

    parts: list[ShingleSets | SpilledSet]

    def __len__(self) -> int:
        return sum(1 if isinstance(p, SpilledSet) else len(p.indptr) - 1 for p in self.parts)

    def slice(self, start: int, stop: int) -> Rows:
        out: list[ShingleSets | SpilledSet] = []
        at = 0
        for p in self.parts:
            n = 1 if isinstance(p, SpilledSet) else len(p.indptr) - 1
            lo, hi = max(start, at), min(stop, at + n)
            if lo < hi:
                out.append(p if isinstance(p, SpilledSet) else p.slice(lo - at, hi - at))
            at += n
        return Rows(out)


def rows_of(parts: list[ShingleSets | SpilledSet]) -> ShingleSets | Rows:
    """A batch's sets: one ShingleSets, as before, unless a row is on disk."""
    if any(isinstance(p, SpilledSet) for p in parts):
        return Rows(parts)
    return ShingleSets.concatenate(parts)


def write_rows(store, build: str, parts: list[ShingleSets | Rows]) -> dict[str, tuple[str, dict]]:
    """Store the rows of ``parts`` in order as the stage's three arrays, streamed (a row on disk is
    copied a block at a time, then removed): role -> (file name, manifest entry). The bytes are
    those of ``ShingleSets.concatenate`` of the rows, saved."""
    names = {role: f"shingles.{role}.{build}.npy" for role in ("indptr", "data", "counts")}
    data_w = store.array_writer(names["data"], np.uint32)
    counts_w = store.array_writer(names["counts"], np.uint32)
    lengths: list[np.ndarray] = []
    try:
        for part in parts:
            for p in part.parts if isinstance(part, Rows) else [part]:
                if isinstance(p, SpilledSet):
                    for data, counts in p.chunks():
                        data_w.append(data)
                        counts_w.append(counts)
                    lengths.append(np.array([p.n], np.int64))
                    p.remove()
                else:
                    data_w.append(np.asarray(p.data, np.uint32))
                    counts_w.append(np.asarray(p.counts, np.uint32))
                    lengths.append(np.diff(np.asarray(p.indptr, np.int64)))
        indptr = np.zeros(1 + sum(len(x) for x in lengths), np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=indptr[1:])
        out = {"data": data_w.finish(), "counts": counts_w.finish()}
    except BaseException:
        data_w.abort()
        counts_w.abort()
        remove_spilled(parts)
        raise
    out["indptr"] = store.save_array(names["indptr"], indptr)
    return {role: (names[role], out[role]) for role in ("indptr", "data", "counts")}


def remove_spilled(parts: list) -> None:
    """Remove the sets on disk that ``parts`` name (a build that does not finish)."""
    for part in parts:
        for p in part.parts if isinstance(part, Rows) else [part]:
            if isinstance(p, SpilledSet):
                p.remove()

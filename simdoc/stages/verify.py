"""Verification: candidate pairs compared exactly, their documents read again from the corpus.

MMDS §3.4.3 ends the LSH procedure by checking each candidate pair against
"the documents themselves". The index keeps no shingles (it would be several
times the corpus), so a candidate's document is read again, the way the
docs table says it was read, and its shingles are hashed to **64 bits**
(:func:`simdoc.shingling.shingle_texts` with ``form="sets64"``): a printed
Jaccard then equals the Jaccard of the k-grams themselves unless two
distinct k-grams of a pair collide in 64 bits, about once in 10^10 pairs of
10^4-shingle documents.

This module is the whole of it, read top to bottom; it calls down into the
store (the docs table), the corpus (reading files) and the maths (the
kernels), never back up:

1. :func:`verify_pairs` orders the pairs by the connected component of the
   candidate graph they belong to, so that the documents of one component
   are read together and dropped together once its last pair is done, and
   cuts them into units of whole components of about equal cost, verified
   here or on forked processes (``jobs``), the costliest first
   (:mod:`simdoc.stages.verify_units`).
2. :meth:`_Work.run` compares first the pairs alone in their component, of
   two plain files, with no set made (:mod:`simdoc.stages.verify_lone`:
   most pairs of a corpus of near-duplicates), then the others a chunk of
   pairs at a time: as many pairs as the sets of the documents they add fit
   in :data:`CHUNK_BYTES` (and all held in ``budget``, :data:`CACHE_BYTES`).
3. :meth:`_Work.read` reads a chunk's new documents, in the order of their
   names: where they live and their digests come from the docs table a
   batch at a time, as columns. The files read whole when indexed are read
   again leanly into one buffer and checked against their digests
   (:func:`simdoc.corpus.plain.read_again_into`), the members of plain JSON
   Lines files at their places (:func:`simdoc.stages.located.jsonl_members`);
   their bytes are shingled by one kernel call straight into the rows held
   (:func:`simdoc.bytesign.sets64_spans`). Members of WARC and Parquet files,
   streamed and HTML files, a corpus at a URL or cut by ``--max-bytes`` are
   read by :meth:`simdoc.stages.reread.DocumentReader.read_batch`, the general way.
4. :meth:`_Held.compare` merges all the chunk's pairs in one kernel call,
   where their rows lie (:func:`simdoc.similarity.span_sums`: integers,
   divided once by :func:`simdoc.similarity.jaccards_of_sums`), and
   :meth:`_Held.keep` keeps the rows later pairs still need, moved to the
   front of the arena the next chunk is written after.

Each document is read and shingled once per run whenever its component's
sets fit in the budget. A larger component (a templated site) is walked
pair by pair in that order, keeping the sets of the documents its later
pairs still need, up to the budget: then a document may be read more than
once, and memory stays bounded. A pair too large to hold is compared in
passes over ranges of its hashes (:func:`simdoc.similarity.jaccard_in_passes`).

A document whose bytes no longer have the digest indexed is *stale*, one
that cannot be read any more is *gone*: neither is compared; the caller
re-indexes (``simdoc pairs CORPUS``) or warns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simdoc import kernel_choice, similarity
from simdoc.bytesign import pair_sums_compiled, sets64_spans
from simdoc.corpus import streaming
from simdoc.corpus.objects import is_url, still_there
from simdoc.corpus.plain import WIDE, read_again_into, text_at
from simdoc.corpus.streaming import Part, sets64_of_texts
from simdoc.engines.local import LocalEngine, can_fork
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import shingle_texts
from simdoc.similarity import jaccard_in_passes, jaccards_of_sums, span_sums
from simdoc.stages.located import JSONL, jsonl_members
from simdoc.stages.reread import DocumentReader
from simdoc.stages.verify_lone import compare_lone, lone_pairs
from simdoc.stages.verify_units import components, pair_costs
from simdoc.stages.verify_units import units as cut_units
from simdoc.store.doctable import HOW

CACHE_BYTES = 512 << 20  # shingle sets held at once (64-bit hashes and counts: ~12 bytes a shingle)
CHUNK_PAIRS = 1 << 16  # pairs compared per call of the merge kernel
# The sets of the documents read for one chunk of pairs, at most (about): read, shingled and
# compared while their arrays are still in the CPU's caches, and their memory is reused by
# the next chunk's (larger ones would be fresh pages each time: measured 1.4x the CPU time).
CHUNK_BYTES = 8 << 20
PROGRESS_PAIRS = 4096  # pairs compared between two moves of the progress bar
ARENA_VALUES = 1 << 20  # values the held rows start with room for (12 MB; grown when a chunk needs more)
WHOLE = HOW.index("whole")


@dataclass
class Verified:
    """Exact set and bag Jaccard of the pairs, and the documents that could not be compared."""

    set_jaccard: np.ndarray
    bag_jaccard: np.ndarray
    ok: np.ndarray  # bool per pair: both documents read as indexed
    stale: set[int]
    gone: set[int]


def verify_pairs(
    reader: DocumentReader,
    left: np.ndarray,
    right: np.ndarray,
    jobs: int = 1,
    budget: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> Verified:
    """Exact Jaccard of document pairs, reading each document (about) once, in bounded memory.

    Pairs are ordered by connected component and cut into units of whole
    components (:func:`simdoc.stages.verify_units.units`); with
    ``jobs`` > 1 the units are verified on that many forked processes, each
    holding at most ``budget`` bytes of shingle sets (default
    :data:`CACHE_BYTES`). The result does not depend on ``jobs`` or ``budget``.
    ``progress`` is called with the number of pairs of each unit done (a
    progress bar's ``update``).
    """
    budget = CACHE_BYTES if budget is None else budget
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    n_pairs = len(left)
    set_j = np.zeros(n_pairs)
    bag_j = np.zeros(n_pairs)
    ok = np.ones(n_pairs, dtype=bool)
    if not n_pairs:
        return Verified(set_j, bag_j, ok, set(), set())
    # A few MB of documents to read are shingled by the numpy reference, numba never imported (simdoc.kernel_choice).
    sizes = np.asarray(reader.table.columns["size"])
    with kernel_choice.reads(int(sizes[np.unique(np.concatenate((left, right)))].sum())):
        return _verified(reader, left, right, jobs, budget, progress, set_j, bag_j, ok)


def _verified(reader: DocumentReader, left, right, jobs: int, budget: int, progress, set_j, bag_j, ok) -> Verified:
    label = components(left, right, len(reader.table))
    order = np.lexsort((right, left, label))
    ol, orr, label = left[order], right[order], label[order]
    work = _Work(reader, ol, orr, budget)
    units = cut_units(label, pair_costs(ol, orr, work.shingles), jobs)
    bad: set[int] = set()
    if jobs > 1 and len(units) > 1 and can_fork():
        # The workers are forked holding the work (pairs, reader): only unit bounds travel.
        results = LocalEngine(jobs).map(_verify_unit, units, initializer=_install, initargs=(work,), ordered=False)
        for start, stop, s_j, b_j, k, unread, reads in results:
            _take(order, start, stop, s_j, b_j, k, set_j, bag_j, ok)
            bad |= unread
            for d, n in reads.items():
                reader.reads[d] += n
            if progress is not None:
                progress(stop - start)
    else:
        for start, stop in units:
            # In this process: the bar moves as the pairs of a unit are compared (a templated
            # corpus is one component, and so one unit).
            _, _, s_j, b_j, k, unread, _ = work.run(start, stop, progress)
            _take(order, start, stop, s_j, b_j, k, set_j, bag_j, ok)
            bad |= unread
    stale = {d for d in bad if still_there(reader.path_of(d))}
    return Verified(set_j, bag_j, ok, stale, bad - stale)


def _take(order, start, stop, s_j, b_j, k, set_j, bag_j, ok) -> None:
    where = order[start:stop]
    set_j[where], bag_j[where], ok[where] = s_j, b_j, k


_WORK: _Work | None = None  # the work shared by a pool's forked processes


def _install(work: _Work) -> None:
    global _WORK
    _WORK = work


def _verify_unit(unit: tuple[int, int]) -> tuple:
    return _WORK.run(*unit)


class _Work:
    """The ordered pairs and how to read their documents: what every unit needs."""

    def __init__(self, reader: DocumentReader, ol: np.ndarray, orr: np.ndarray, budget: int) -> None:
        self.reader, self.ol, self.orr, self.budget = reader, ol, orr, budget
        # (Memory-mapped on a Dask worker: read per document. A plain array's view of it: a
        # memmap's item costs a microsecond more, and costs are asked per document.)
        self.shingles = np.asarray(reader.table.columns["n_shingles"])
        # Files read whole when indexed are read again leanly (simdoc.corpus.plain), unless the
        # corpus is at a URL or cut by --max-bytes: those the reader's general way.
        self.lean = reader.max_bytes is None and not is_url(reader.root)

    def costs(self, docs: np.ndarray) -> np.ndarray:
        """Bytes each document's 64-bit shingle set holds while it is cached (with counts), roughly."""
        return np.asarray(self.shingles[docs], np.int64) * 12 + 64

    def in_passes(self, a: int, b: int, bad: dict) -> tuple[float, float, bool]:
        """(set, bag, ok) of one large pair, compared in passes (:func:`jaccard_in_passes`)."""
        unread: list[int] = []

        def read(part: Part) -> tuple[ShingleSets | None, ShingleSets | None]:
            got = self.reader.read_sets([a, b], part=part)
            unread.extend(d for d in (a, b) if got.get(d) is None)
            return got.get(a), got.get(b)

        got = jaccard_in_passes(read, int(self.shingles[a]), int(self.shingles[b]))
        if got is None:
            bad.update((d, None) for d in unread)
            return 0.0, 0.0, False
        return got[0], got[1], True

    def run(self, lo: int, hi: int, progress: Callable[[int], object] | None = None) -> tuple:
        """Verify ordered pairs [lo, hi): (lo, hi, set, bag, ok, unread documents, reads).

        The pairs are taken in order, a chunk at a time: as many as the sets of the
        documents they add fit the budget. Those documents are read (in the order of
        their names: a folder, a file of members, read front to back) and shingled
        together into the rows held (:meth:`read`), then the chunk's pairs are merged by
        one kernel call, where the rows lie (:func:`simdoc.similarity.span_sums`). The
        rows later pairs still need are kept for them. ``progress`` is called with each
        PROGRESS_PAIRS pairs compared (in this process only).
        """
        reader, ol, orr = self.reader, self.ol[lo:hi], self.orr[lo:hi]
        n = hi - lo
        set_j, bag_j, ok = np.zeros(n), np.zeros(n), np.ones(n, dtype=bool)
        bad: dict[int, None] = {}
        # The reads of this unit's documents only (a copy of all the process has read would
        # grow with each unit a worker takes).
        docs = np.unique(np.concatenate([ol, orr]))
        touched = docs.tolist()
        before = [reader.reads.get(d, 0) for d in touched]
        # What each document's set costs held, looked up per pair by _chunk.
        cost_of = dict(zip(touched, self.costs(docs).tolist()))
        pairs = list(zip(ol.tolist(), orr.tolist()))
        last = _last_needed(ol, orr)
        na, nb = np.asarray(self.shingles[ol], np.int64), np.asarray(self.shingles[orr], np.int64)
        split = 12 * np.minimum(na, nb) + 48 * np.maximum(na, nb) > similarity.PAIR_BYTES  # pair_passes(a, b) > 1
        for p in np.flatnonzero(split).tolist():
            set_j[p], bag_j[p], ok[p] = self.in_passes(int(ol[p]), int(orr[p]), bad)
        split |= self._lone(ol, orr, split, set_j, bag_j, ok, bad)  # (and those compared alone: done)
        held = _Held()
        start = 0
        split_list = split.tolist()
        while start < n:
            stop, new = self._chunk(pairs, start, split_list, held, cost_of)
            self.read(new, held)
            for a in range(start, stop, PROGRESS_PAIRS):
                b = min(a + PROGRESS_PAIRS, stop)
                at = a + np.flatnonzero(~split[a:b])
                set_j[at], bag_j[at], ok[at] = held.compare(ol[at], orr[at], bad)
                if progress is not None:
                    progress(b - a)
            held.keep([d for d in held.span if last[d] >= stop], self.budget, last, cost_of.__getitem__)
            start = stop
        after = [reader.reads.get(d, 0) for d in touched]
        reads = {d: a - b for d, a, b in zip(touched, after, before) if a != b}
        return lo, hi, set_j, bag_j, ok, set(bad), reads

    def _lone(self, ol: np.ndarray, orr: np.ndarray, split: np.ndarray, set_j, bag_j, ok, bad: dict) -> np.ndarray:
        """Compare the pairs alone in their component of two plain files with no set held
        (:mod:`simdoc.stages.verify_lone`), their results written; returns which were."""
        done = np.zeros(len(ol), dtype=bool)
        if not self.lean or not pair_sums_compiled(self.reader.spec):  # (word shingles: every pair declined)
            return done
        columns = self.reader.table.columns
        at = np.flatnonzero(lone_pairs(ol, orr, columns["how"], WHOLE, columns["file_size"]) & ~split)
        if not len(at):
            return done
        s_j, b_j, k, compared, unread = compare_lone(self.reader, ol[at], orr[at], CHUNK_BYTES)
        at, s_j, b_j, k = at[compared], s_j[compared], b_j[compared], k[compared]
        set_j[at], bag_j[at], ok[at] = s_j, b_j, k
        bad.update((d, None) for d in unread)
        done[at] = True
        return done

    def _chunk(self, pairs: list[tuple[int, int]], start: int, split: list[bool], held: _Held, cost_of: dict[int, int]) -> tuple[int, list[int]]:
        """The end of the chunk of pairs from ``start``, and the documents it needs that are not
        held (sorted): pairs are taken while the sets held and added fit the budget (one at least)."""
        n = len(pairs)
        stop, extra = start, 0
        new: dict[int, None] = {}
        span = held.span
        for a, b in pairs[start : min(n, start + CHUNK_PAIRS)]:
            if not split[stop]:  # (a split pair is compared in passes, on its own)
                add_a = a not in span and a not in new
                add_b = b != a and b not in span and b not in new
                more = (cost_of[a] if add_a else 0) + (cost_of[b] if add_b else 0)
                if stop > start and (held.bytes + extra + more > self.budget or extra + more > CHUNK_BYTES):
                    break
                if add_a:
                    new[a] = None
                if add_b:
                    new[b] = None
                extra += more
            stop += 1
        return stop, sorted(new)

    def read(self, docs: list[int], held: _Held) -> None:
        """Read ``docs`` again and add their sets to ``held`` (a document not read as indexed
        is held as missing). Plain files, and members of plain JSON Lines files found where they
        were, are read here, leanly, and shingled together by one call of the kernel, straight
        into the rows held; the rest by the reader."""
        reader, table = self.reader, self.reader.table
        docs_a = np.asarray(docs, dtype=np.int64)
        how = np.asarray(table.columns["how"][docs_a])
        lean = (how == WHOLE) & self.lean
        if lean.any():
            self._read_plain(docs_a[lean], held)
        others = docs_a[~lean]
        if (how == JSONL).any():  # members at their places; those not found there, and the rest: the reader's way
            got = jsonl_members(table, others, reader.confined, reader.fields[0], reader.max_bytes, reader.follow_symlinks)
            for d in got.docs.tolist():
                reader.reads[d] += 1
            self._shingle(got.raw, got.offsets[:-1], got.offsets[1:], got.docs.tolist(), got.text, held)
            others = got.rest
        if len(others):
            held.add(*reader.read_batch(others.tolist()))
        held.bytes += int(self.costs(docs_a).sum())

    def _read_plain(self, plain: np.ndarray, held: _Held) -> None:
        """:meth:`read` of files read whole when indexed: read into one buffer and their digests
        checked (:func:`read_again_into`), then :meth:`_shingle`."""
        reader, table = self.reader, self.reader.table
        docs = plain.tolist()
        paths = reader.openable(table.places(plain))
        sizes = np.asarray(table.columns["file_size"][plain], np.int64).tolist()
        buf, starts, ends = read_again_into(paths, sizes, np.asarray(table.digest[plain]), reader.follow_symlinks)
        read = starts >= 0
        for d in plain[starts != WIDE].tolist():  # (read_batch counts its own)
            reader.reads[d] += 1
        for i in np.flatnonzero(starts == -1).tolist():
            held.missing(docs[i])
        if (wide := [docs[i] for i in np.flatnonzero(starts == WIDE).tolist()]):  # UTF-16 or UTF-32: the reader's way
            held.add(*reader.read_batch(wide))
        at = np.flatnonzero(read)
        self._shingle(buf, starts[at], ends[at], [docs[i] for i in at.tolist()], lambda i: text_at(buf, starts[at[i]], ends[at[i]]), held)

    def _shingle(self, buf, starts: np.ndarray, ends: np.ndarray, docs: list[int], text_of: Callable[[int], str | bytes], held: _Held) -> None:
        """The sets of texts read into ``buf`` (UTF-8, ``buf[starts[i]:ends[i]]`` is ``docs[i]``'s,
        ``text_of(i)`` its text as the scan had it) by one kernel call, into the rows held."""
        spec = self.reader.spec
        # A long text is shingled in pieces, in bounded memory (its bytes are at least its characters).
        whole = ends - starts <= streaming.PIECE_CHARS
        for i in np.flatnonzero(~whole).tolist():
            held.add(sets64_of_texts([text_of(i)], spec), {docs[i]: 0})
        at = np.flatnonzero(whole)
        if not len(at):
            return
        data, counts = held.room(int((ends[at] - starts[at]).sum()))
        rows = sets64_spans(buf, starts[at], ends[at], spec, data, counts)
        held.wrote([docs[i] for i in at.tolist()], rows)
        declined = at[rows < 0].tolist()
        if declined:  # what the kernel cannot do exactly: the reference way
            sets = shingle_texts([text_of(i) for i in declined], spec, form="sets64")
            held.add(sets, {docs[i]: j for j, i in enumerate(declined)})


def _last_needed(ol: np.ndarray, orr: np.ndarray) -> dict[int, int]:
    """The last position (in verification order) at which each document is needed."""
    n = len(ol)
    docs, inverse = np.unique(np.concatenate([ol, orr]), return_inverse=True)
    last_of = np.full(len(docs), -1, dtype=np.int64)
    pos = np.arange(n, dtype=np.int64)
    np.maximum.at(last_of, inverse[:n], pos)
    np.maximum.at(last_of, inverse[n:], pos)
    return dict(zip(docs.tolist(), last_of.tolist()))


class _Held:
    """The 64-bit sets of the documents read and still needed, as rows of one arena reused from
    chunk to chunk (written in place by the kernel, never gathered into a new array): document
    d's row is ``data[s:e]`` with its counts, ``span[d] = (s, e)``; (-1, -1): the document could
    not be read as indexed (stale or gone). ``bytes``: about what the rows hold."""

    def __init__(self) -> None:
        self.data = np.empty(ARENA_VALUES, np.uint64)
        self.counts = np.empty(ARENA_VALUES, np.uint32)
        self.used = 0
        self.span: dict[int, tuple[int, int]] = {}
        self.bytes = 0

    def room(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Views of at least ``n`` free values after the rows held (the arena grows if need be)."""
        if self.used + n > len(self.data):
            size = max(2 * len(self.data), self.used + n)
            data, counts = np.empty(size, np.uint64), np.empty(size, np.uint32)
            data[: self.used], counts[: self.used] = self.data[: self.used], self.counts[: self.used]
            self.data, self.counts = data, counts
        return self.data[self.used :], self.counts[self.used :]

    def wrote(self, docs: list[int], sizes: np.ndarray) -> None:
        """Take the rows just written at the free end, one after another (a size < 0: none)."""
        at = self.used
        for d, m in zip(docs, sizes.tolist()):
            if m >= 0:
                self.span[d] = (at, at + m)
                at += m
        self.used = at

    def missing(self, doc: int) -> None:
        self.span[doc] = (-1, -1)

    def add(self, sets: ShingleSets, rows: dict[int, int]) -> None:
        """Copy ``sets``' row ``rows[d]`` in as document d's (-1: missing)."""
        data, counts = self.room(len(sets.data))
        start = self.used
        for d, r in rows.items():
            if r < 0:
                self.missing(d)
                continue
            a, b = int(sets.indptr[r]), int(sets.indptr[r + 1])
            at = self.used - start
            data[at : at + b - a], counts[at : at + b - a] = sets.data[a:b], sets.counts[a:b]
            self.span[d] = (self.used, self.used + b - a)
            self.used += b - a

    def compare(self, left: np.ndarray, right: np.ndarray, bad: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(set, bag, ok) of pairs of held documents; a pair with a document not read is not
        ok (0), and that document goes into ``bad``."""
        sa = np.array([self.span[d] for d in left.tolist()], np.int64).reshape(-1, 2)
        sb = np.array([self.span[d] for d in right.tolist()], np.int64).reshape(-1, 2)
        ok = (sa[:, 0] >= 0) & (sb[:, 0] >= 0)
        for d in np.concatenate([left[~(sa[:, 0] >= 0)], right[~(sb[:, 0] >= 0)]]).tolist():
            bad[d] = None
        sums = np.zeros((len(left), 5), np.int64)
        sums[ok] = span_sums(self.data, self.counts, sa[ok], sb[ok])
        set_j, bag_j = jaccards_of_sums(sums)
        return set_j, bag_j, ok

    def keep(self, docs: list[int], budget: int, last: dict[int, int], cost: Callable[[int], int]) -> None:
        """Keep only the rows of ``docs``, moved to the front of the arena; past the budget (a
        component larger than it), only those needed soonest, down to half of it."""
        held = sum(cost(d) for d in docs)
        if held > budget:
            docs = sorted(docs, key=lambda d: last[d])
            while held > budget // 2 and docs:
                held -= cost(docs.pop())
        span, at = {}, 0
        for d in sorted(docs, key=lambda d: self.span[d][0]):  # front to back: a row moves down, never onto a later one
            a, b = self.span[d]
            if a < 0:
                span[d] = (-1, -1)
                continue
            self.data[at : at + b - a], self.counts[at : at + b - a] = self.data[a:b], self.counts[a:b]
            span[d] = (at, at + b - a)
            at += b - a
        self.span, self.used, self.bytes = span, at, held

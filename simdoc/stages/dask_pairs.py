"""Candidates scored on a Dask cluster: each band cut by key range, every piece a task sized by volume.

The index stage stores each band's documents sorted by their key in that
band (``buckets``), so the documents of a key range are one contiguous
slice of it, and a bucket (the documents of one key) never straddles two
ranges. As datatrove does with its sorted band files, each band is cut into
key ranges of equal width (band keys are hashes, so equal widths hold
about equal numbers of documents); a task reads its range's slice of the
memory-mapped arrays and nothing else of the band, so no shuffle is needed
and no task holds a whole band. The number of ranges per band is set by the
data volume (:func:`scoring_ranges`): :data:`PARTITION_BYTES` of bucket rows
(8-byte key, 8-byte document number) per task, and at most
:data:`PAIRS_PER_TASK` of the pairs inside the band's buckets, which the
index stage records per band. Pairs are spread over the buckets of a band,
so equal widths hold about equal numbers of them too (one huge bucket stays
in one task).

Each task emits its buckets' pairs, keeps a pair only in the first band
where its documents share a key (so pairs are unique across tasks), expands
folded exact copies (only those of its own documents: :data:`copies` is a
table of the documents that have a copy, sorted by representative, looked
up by binary search), and scores its pairs on the worker, verifying them
against the documents re-read from the shared file system. The pairs that
are printed, and what verification learnt (pairs newly verified, documents
changed or gone), travel back; the client sorts the pairs exactly as the
local engine does (:func:`simdoc.stages.results.in_print_order`), so the
output is byte-identical whatever the number of workers or ranges.

A worker opens the index once per manifest (:func:`_opened`), not once per
task: the docs table (paths, identities) that verification needs is
checked once per worker process and stays memory-mapped, its ids decoded
only for the documents a task reads again
(:class:`simdoc.store.doctable.Strings`).

Workers write what they compute: each task writes its result (printed pairs,
newly verified pairs, changed documents) to a part file of the index,
``dask-parts/<manifest>-<question>/<band>-<range>.npz``, atomically, so a part
that exists is that task's completion record (as datatrove's
``completions/``). A client killed mid-stage leaves them; the next run of the
same index asking the same question (threshold, measure, ...) takes them
instead of running those tasks again. A run that ends removes its parts, and
those of manifests that are no more. The client still receives each task's
result too (the pairs it prints and the verified pairs it merges into the
index's one verified-pairs table).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hashlib
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simdoc.buckets import LARGE_BUCKET, BucketStats, pairs_in_runs
from simdoc.exact import expand_pairs
from simdoc.stages.dask_pairs_parts import PartitionResult, read_part, remove_parts, run_folder, write_part
from simdoc.stages.results import (
    SCORE_PAIRS,
    Scoring,
    Verifier,
    in_print_order,
    score_pairs,
)
from simdoc.store.names import parts_folder
from simdoc.store.verified import VerifiedPairs

# Bucket rows (8-byte key + 8-byte document number) one scoring task reads: 64 MiB is 4.2
# million documents of one band. With 13 bands, 10^6 documents make 13 tasks (one per band),
# 10^9 about 3,100 per band. A task's memory is this, plus the pairs of its buckets, scored
# SCORE_PAIRS at a time (~64 bytes a pair), plus the docs table the worker holds once.
PARTITION_BYTES = 64 << 20
# Candidate pairs one scoring task generates at most, of those inside its band's buckets: band 0
# keeps all its pairs and verifies the most, so without this its tasks would bound the stage
# (at 10^6 documents, one task a band: 34 s for band 0, 1.4 s for band 12, on this machine).
PAIRS_PER_TASK = 1 << 15
ROW_BYTES = 16
KEY_SPACE = 1 << 64


@dataclass(frozen=True)
class PartitionTask:
    """One key range of one band, and how to score its pairs."""

    index: str  # absolute path
    manifest: str  # sha256 of the manifest the client read: a worker's open index must be this one
    band: int
    lo: int  # keys in [lo, hi)
    hi: int
    scoring: Scoring  # without only_docs: the worker reads it from the docs table (AddedAfter new_after)
    new_after: int | None  # --new: pairs with a document added after this generation
    copies: str | np.ndarray | None  # the copies table (see copies_table), as a .npy path, or None: no copies
    part: str | None = None  # where the task writes its result (its completion record); None: nowhere


class _Recording(VerifiedPairs):
    """The index's verified-pairs table, recording what a task adds to it, to send back."""

    def __init__(self, table: VerifiedPairs) -> None:
        super().__init__(table.keys, table.jaccard)
        self.added_keys: list[np.ndarray] = []
        self.added_jaccard: list[np.ndarray] = []

    def add(self, keys: np.ndarray, jaccard: np.ndarray) -> None:
        super().add(keys, jaccard)
        if len(keys):
            self.added_keys.append(np.asarray(keys, dtype=np.uint64))
            self.added_jaccard.append(np.asarray(jaccard, dtype=np.float64))


_OPEN: dict = {}  # (index, manifest digest) -> LoadedIndex, in this worker process
_OPEN_LOCK = threading.Lock()


class AddedAfter:
    """The --new mask of a scoring task: ``mask[docs]`` is True for documents added after ``generation``.

    Read from the docs table's memory-mapped ``added`` column for the
    documents asked about: no n-long array on the worker.
    """

    def __init__(self, added: np.ndarray, generation: int) -> None:
        self.added, self.generation = added, generation

    def __getitem__(self, docs: np.ndarray) -> np.ndarray:
        return np.asarray(self.added[docs]) > self.generation


def _opened(index: str, manifest: str, new_after: int | None):
    """The index, opened once per worker process and manifest (its docs table checked once), and the
    --new mask of its documents (None without --new)."""
    from simdoc.store.loaded import open_index

    with _OPEN_LOCK:
        loaded = _OPEN.get((index, manifest))
        if loaded is None:
            _OPEN.clear()  # one index at a time: an older manifest's arrays are of no more use
            # The docs table's ids stay mapped: a task reads the few rows of the documents it verifies.
            loaded = _OPEN[(index, manifest)] = open_index(index, lazy_ids=True)
        return loaded, None if new_after is None else AddedAfter(loaded.docs().added, new_after)


def _first_at_least(keys: np.ndarray, order: np.ndarray, key: int) -> int:
    """Position of the first document of ``order`` (sorted by ``keys``) whose key is >= key.

    A binary search through the memory-mapped arrays: log2(n) reads, not n.
    """
    if key >= KEY_SPACE:
        return len(order)
    return bisect.bisect_left(range(len(order)), key, key=lambda i: int(keys[order[i]]))


def _members_of(docs: np.ndarray, copies: np.ndarray | None):
    """(indptr, members) over ``docs`` (sorted representatives): each one's group, itself first,
    from the copies table; None when none of them has a copy."""
    if copies is None or not len(docs):
        return None
    reps, members = copies[0], copies[1]
    start = np.searchsorted(reps, docs, "left")
    count = np.searchsorted(reps, docs, "right") - start
    if not count.any():
        return None
    indptr = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(np.maximum(count, 1), out=indptr[1:])
    out = np.repeat(docs, np.maximum(count, 1))  # a document with no copy stands for itself
    has = np.flatnonzero(count)
    c = count[has]
    ramp = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
    out[np.repeat(indptr[has], c) + ramp] = members[np.repeat(start[has], c) + ramp]
    return indptr, out


def _counted(left: np.ndarray, right: np.ndarray, used: np.ndarray, members, only_docs) -> int:
    """The pairs of representatives :class:`~simdoc.buckets.BucketStats` counts, as the local engine
    does (:func:`simdoc.buckets.iter_candidates`): under --new, those whose group holds a document added."""
    if only_docs is None:
        return len(left)
    if members is None:
        new = only_docs[used]
    else:
        indptr, out = members
        new = np.logical_or.reduceat(only_docs[out], indptr[:-1])  # every group holds one at least
    return int(np.count_nonzero(new[np.searchsorted(used, left)] | new[np.searchsorted(used, right)]))


def score_partition(task: PartitionTask) -> PartitionResult:
    """Pairs of the buckets of one key range of one band: first-band rule, expanded, scored, filtered.

    The result is also written to the task's part file, which a client killed
    before the end reads instead of running the task again.
    """
    result = _score(task)
    if task.part is not None:
        with contextlib.suppress(OSError):  # no room, or a read-only index: then the run is not resumable
            write_part(task.part, result)
    return result


def _score(task: PartitionTask) -> PartitionResult:
    loaded, only_docs = _opened(task.index, task.manifest, task.new_after)
    keys, buckets = loaded.bands()
    band_keys, order = keys[task.band], buckets[task.band]
    p0 = _first_at_least(band_keys, order, task.lo)
    p1 = _first_at_least(band_keys, order, task.hi)
    docs = np.asarray(order[p0:p1], dtype=np.int64)
    k = np.asarray(band_keys[docs])
    how = dataclasses.replace(task.scoring, only_docs=only_docs)
    verifier = None
    if how.verify:
        verifier = Verifier.of_index(loaded)
        verifier.table = _Recording(verifier.table)
    result = PartitionResult(task.band, (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0) if how.verify else None), 0, 0)
    if not len(docs):
        return result
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    ends = np.append(starts[1:], len(docs))
    sizes = ends - starts
    result.largest_bucket = int(sizes.max())
    result.large_buckets = int(np.count_nonzero(sizes >= LARGE_BUCKET))
    if len(docs) < 2:
        return result
    after = np.repeat(ends, sizes) - np.arange(len(docs)) - 1
    cum = np.cumsum(after)
    total = int(cum[-1])
    copies = np.load(task.copies, mmap_mode="r") if isinstance(task.copies, str) else task.copies
    parts = []
    done = q0 = 0
    while done < total:  # SCORE_PAIRS pairs at a time: a big bucket does not take all memory
        q1 = max(int(np.searchsorted(cum, done + SCORE_PAIRS, side="right")), q0 + 1)
        firsts, seconds = pairs_in_runs(after, q0, q1)
        done += len(firsts)
        q0 = q1
        if not len(firsts):
            continue
        a, b = docs[firsts], docs[seconds]
        left, right = np.minimum(a, b), np.maximum(a, b)
        keep = np.ones(len(left), bool)
        for u in range(task.band):
            idx = np.flatnonzero(keep)
            if not len(idx):
                break
            keep[idx] = keys[u][left[idx]] != keys[u][right[idx]]
        left, right = left[keep], right[keep]
        if not len(left):
            continue
        used = np.unique(np.concatenate([left, right]))
        members = _members_of(used, copies)
        result.n_pairs += _counted(left, right, used, members, how.only_docs)
        if members is not None:
            left, right = expand_pairs(np.searchsorted(used, left), np.searchsorted(used, right), members)
        scored, n = score_pairs(loaded, left, right, how, None, verifier)
        parts.append(scored)
        result.n_candidates += n
    if parts:
        result.scored = in_print_order(parts, how.verify)
    if verifier is not None:
        result.n_verified, result.n_cached = verifier.n_verified, verifier.n_cached
        result.stale, result.gone = verifier.stale, verifier.gone
        if verifier.table.added_keys:
            result.verified_keys = np.concatenate(verifier.table.added_keys)
            result.verified_jaccard = np.concatenate(verifier.table.added_jaccard)
    return result


def ranges_per_band(n_rows: int, partition_bytes: int | None = None) -> int:
    """Key ranges each band is cut into: PARTITION_BYTES of bucket rows per task."""
    return max(1, math.ceil(n_rows * ROW_BYTES / (partition_bytes or PARTITION_BYTES)))


def scoring_ranges(index_stage: dict, n_rows: int, partition_bytes: int | None = None, pairs_per_task: int | None = None) -> list[int]:
    """Key ranges of each band's scoring tasks: PARTITION_BYTES of bucket rows, and at most
    PAIRS_PER_TASK of the pairs inside the band's buckets (``bucket_pairs`` of the index stage,
    when it records them), a task."""
    bands = index_stage["params"]["bands"]
    by_rows = ranges_per_band(n_rows, partition_bytes)
    pairs = index_stage.get("bucket_pairs")
    if not isinstance(pairs, list) or len(pairs) != bands:  # an index built before they were recorded
        return [by_rows] * bands
    return [max(by_rows, math.ceil(p / (pairs_per_task or PAIRS_PER_TASK))) for p in pairs]


def key_ranges(n: int) -> list[tuple[int, int]]:
    """``n`` key ranges of equal width covering all 64-bit keys."""
    bounds = [i * KEY_SPACE // n for i in range(n + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def copies_table(rep: np.ndarray) -> np.ndarray | None:
    """(2, m) int64: [representative, member] of every document in a group of exact copies,
    sorted by representative then member (the representative, the smallest, first); None if none."""
    copies = np.flatnonzero(rep != np.arange(len(rep)))
    if not len(copies):
        return None
    docs = np.union1d(copies, rep[copies])
    of = np.asarray(rep[docs], dtype=np.int64)
    order = np.lexsort((docs, of))
    return np.stack([of[order], docs[order].astype(np.int64)])


def score_candidates(
    client,
    index: str,
    threshold: float,
    measure: str,
    verify: bool,
    all_candidates: bool,
    only_docs,
    verifier: Verifier | None = None,
    partition_bytes: int | None = None,
    pairs_per_task: int | None = None,
    recheck: bool = False,
):
    """The distributed counterpart of :func:`simdoc.stages.results.score_candidates` (same return value).

    ``verifier``: the client's, given what the workers verified (new pairs for
    the verified-pairs table, documents changed or gone), as the local
    engine's would have it.
    """
    from simdoc.engines.dask import map_ordered
    from simdoc.store.directory import MANIFEST
    from simdoc.store.loaded import open_index

    index = os.path.abspath(index)  # workers run in folders of their own
    loaded = open_index(index)
    loaded.signatures()  # damaged files are an error here, as with the local engine
    if verify:
        loaded.docs()
    manifest = hashlib.sha256((loaded.store.path / MANIFEST).read_bytes()).hexdigest()
    n_bands = loaded.stage("index")["params"]["bands"]
    n_rows = len(loaded.bands()[1][0]) if n_bands else 0
    how = Scoring(threshold, measure, verify, all_candidates, recheck=recheck)
    # The generation the client compared with to make only_docs: the workers compare with it too.
    new_after = None if only_docs is None else int(loaded.manifest.get("reported_generation", 0))
    ranges = scoring_ranges(loaded.stage("index"), n_rows, partition_bytes, pairs_per_task)
    # None (a read-only index, or a link on the way): nothing is written, nothing can be resumed.
    folder = parts_folder(loaded.store.path, run_folder(loaded, manifest, how, new_after, ranges).name)
    stats = BucketStats()
    parts: list[tuple] = []
    n_cand = 0

    def take(r: PartitionResult) -> None:
        nonlocal n_cand
        parts.append(r.scored)
        n_cand += r.n_candidates
        stats.n_candidates += r.n_pairs
        stats.large_buckets += r.large_buckets
        if (r.largest_bucket, -r.band) > (stats.largest_bucket, -stats.largest_bucket_band):  # first band wins ties
            stats.largest_bucket, stats.largest_bucket_band = r.largest_bucket, r.band
        if verifier is not None:
            verifier.n_verified += r.n_verified
            verifier.n_cached += r.n_cached
            verifier.stale |= r.stale
            verifier.gone |= r.gone
            if r.verified_keys is not None:
                verifier.table.add(r.verified_keys, r.verified_jaccard)

    with _copies_file(loaded, manifest) as copies:

        def to_run() -> Iterator[PartitionTask]:
            """The tasks whose parts are not there: those of a killed client's run are taken as they are."""
            for t in range(n_bands):
                for i, (lo, hi) in enumerate(key_ranges(ranges[t])):
                    part = None if folder is None else str(folder / f"{t:03d}-{i:06d}.npz")
                    done = None if part is None else read_part(part)
                    if done is not None:
                        take(done)
                    else:
                        yield PartitionTask(index, manifest, t, lo, hi, how, new_after, copies, part)

        for r in map_ordered(client, score_partition, to_run()):
            take(r)
    if folder is not None:
        remove_parts(folder, manifest)
    left, right, est, jac = in_print_order(parts, verify)
    return left, right, est, jac, n_cand, stats


@contextlib.contextmanager
def _copies_file(loaded, manifest: str) -> Iterator[str | np.ndarray | None]:
    """The copies table where every worker can read it: a file in the index's PARTS folder,
    removed after the run; in the tasks themselves if the index cannot be written here."""
    table = copies_table(loaded.representatives())
    if table is None:
        yield None
        return
    folder = parts_folder(loaded.store.path)
    if folder is None:  # a read-only index, or a link on the way: the table is 16 bytes per document with a copy
        yield table
        return
    path = folder / f"copies.{manifest[:16]}.npy"
    try:
        tmp = folder / f".copies.{os.getpid()}.tmp.npy"
        np.save(tmp, table)
        os.replace(tmp, path)
    except OSError:  # no room: the table goes in the tasks
        yield table
        return
    try:
        yield str(path)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()  # unless parts are left in it

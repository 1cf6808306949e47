"""A band's buckets: what they hold, and the candidate pairs in them (MMDS §3.4.1).

Each band's r values are hashed to one 64-bit key per document; documents
are sorted by key per band (``buckets``), and runs of equal keys are buckets.
Pairs are produced band by band in bounded chunks; a pair is emitted only in
the first band where its two documents share a key, so no global
deduplication table is needed and a huge bucket streams through in pieces.

:func:`bucket_sizes` counts a band's buckets as the index stage keeps them
(the pairs inside, the largest, the large ones); :class:`BucketStats` is what
a walk of the buckets (:func:`iter_candidates`) reports. The keys themselves,
and the choice of bands and rows, are :mod:`simdoc.lsh`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from simdoc.lsh import stable_order
from simdoc.memory import release

PAIR_CHUNK = 1 << 21  # candidate pairs handed out at once


def bucket_pairs(sorted_keys: np.ndarray) -> int:
    """Pairs inside the buckets of one band, ``sum s(s-1)/2`` over its runs of equal keys.

    ``sorted_keys``: the band's keys in bucket order (or any slice of it
    that no bucket straddles).
    """
    return bucket_sizes(sorted_keys)[0]


def bucket_sizes(sorted_keys: np.ndarray) -> tuple[int, int, int]:
    """Of the buckets of one band (``sorted_keys`` as :func:`bucket_pairs` takes them): the pairs
    inside them, the size of the largest, and how many hold :data:`LARGE_BUCKET` documents or
    more (no key: 0, 0, 0; buckets of one document only: 0, 1, 0). Counted on slices of a band
    that no bucket straddles, they add up (the largest: its maximum). The index stage keeps
    them (:meth:`BucketStats.of_bands`)."""
    if len(sorted_keys) < 2:
        return 0, len(sorted_keys), 0
    # Runs counted among the keys of buckets of two or more only: arrays a position of the band
    # (most of its buckets hold one document) are ~0.25 GB at 10^7 documents.
    same = sorted_keys[1:] == sorted_keys[:-1]
    shared = np.zeros(len(sorted_keys), dtype=bool)
    shared[1:] = same
    shared[:-1] |= same
    keys = sorted_keys[shared]
    if not len(keys):
        return 0, 1, 0
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sizes = np.diff(np.append(starts, len(keys)))
    return int(np.sum(sizes * (sizes - 1) // 2)), int(sizes.max()), int(np.count_nonzero(sizes >= LARGE_BUCKET))


def bucket_order(keys: np.ndarray, eligible: np.ndarray, threads: int = 1, pairs: np.ndarray | None = None) -> np.ndarray:
    """Per band, the eligible documents sorted by key (stable, so ties keep document order).

    numpy sorts without holding the GIL, so ``threads`` threads sort bands at
    once (13 bands of 10^6 documents: 1.3 s on one, 0.7 s on two).
    ``pairs`` (int64, one per band), if given, receives each band's
    :func:`bucket_pairs`.

    Returns
    -------
    ndarray of shape (bands, n_eligible), dtype int64
    """
    docs = np.flatnonzero(eligible)
    out = np.empty((keys.shape[0], len(docs)), dtype=np.int64)

    def sort_band(t: int) -> None:
        order, ordered = stable_order(keys[t, docs])
        out[t] = docs[order]
        if pairs is not None:
            pairs[t] = bucket_pairs(ordered)

    if threads <= 1:
        for t in range(keys.shape[0]):
            sort_band(t)
        return out
    with ThreadPoolExecutor(min(threads, keys.shape[0])) as pool:
        list(pool.map(sort_band, range(keys.shape[0])))
    return out


@dataclass
class BucketStats:
    n_candidates: int = 0
    largest_bucket: int = 0
    largest_bucket_band: int = -1
    large_buckets: int = 0  # buckets with at least LARGE_BUCKET documents

    @classmethod
    def of_bands(cls, largest: list[int], large: list[int], banded: int) -> BucketStats:
        """What :func:`iter_candidates` counts in a walk that yields no pair, from each band's largest
        bucket and count of large ones (:func:`bucket_sizes`) when ``banded`` documents are banded:
        it passes over every band of fewer than two, and the first band wins a tie."""
        if banded < 2:
            return cls()
        top = max(largest, default=0)
        return cls(0, top, largest.index(top) if top else -1, sum(large))


LARGE_BUCKET = 10_000


def pairs_in_runs(after: np.ndarray, p0: int, p1: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of every pair inside runs of a sorted array, for i in [p0, p1).

    ``after[i]`` is how many later members position i's run has; pairs come
    out by first position, then second.
    """
    counts = after[p0:p1]
    n_pairs = int(counts.sum())
    firsts = np.repeat(np.arange(p0, p1, dtype=np.int64), counts)
    ramp = np.arange(n_pairs, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return firsts, firsts + 1 + ramp


def iter_candidates(
    keys: np.ndarray, buckets: np.ndarray, stats: BucketStats | None = None, chunk: int = PAIR_CHUNK,
    touching: np.ndarray | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield candidate pairs as (left, right) int64 arrays with left < right.

    Every pair of documents that share a key in at least one band is yielded
    exactly once (in the first such band), in chunks of about ``chunk`` pairs.
    ``touching`` (bool per document): only the pairs with at least one such
    document, made from the buckets that hold one (an update's few: a nightly
    run does not walk the pairs of every bucket to drop nearly all of them).
    ``stats``: its largest buckets describe every bucket all the same; ``n_candidates`` counts
    the pairs yielded (with ``touching``, those of a document touched).
    """
    stats = stats if stats is not None else BucketStats()
    n_bands = keys.shape[0]
    for t in range(n_bands):
        # The pages of the bands read so far let go: memory-mapped, the keys and buckets would
        # otherwise all count in this process's resident size (2 GB at 10^7 documents, 13 bands).
        release(keys, buckets)
        order = np.asarray(buckets[t])
        if len(order) < 2:
            continue
        # Only the positions in buckets of two or more make pairs: the rest (most of a band at
        # 10^7 documents) is dropped before the per-position arrays are made (each n int64:
        # ~0.6 GB of them a band at 10^7, when made for every position).
        sk = keys[t][order]
        same = sk[1:] == sk[:-1]
        shared = np.zeros(len(order), dtype=bool)
        shared[1:] = same
        shared[:-1] |= same
        del same
        at = np.flatnonzero(shared)
        del shared
        order, sk = order[at], sk[at]
        del at
        release(keys, buckets)  # this band's keys and buckets are read: only the shared ones are held
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1]))) if len(order) else np.zeros(0, np.int64)
        ends = np.append(starts[1:], len(order))
        sizes = ends - starts
        biggest = int(sizes.max()) if len(sizes) else 1
        if biggest > stats.largest_bucket:
            stats.largest_bucket, stats.largest_bucket_band = biggest, t
        stats.large_buckets += int(np.count_nonzero(sizes >= LARGE_BUCKET))
        if biggest < 2:
            continue
        if touching is not None:
            # The buckets holding a document touched, alone; their keys stay sorted and grouped.
            hit = np.repeat(np.logical_or.reduceat(touching[order], starts), sizes)
            order, sk = order[hit], sk[hit]
            if len(order) < 2:
                continue
            starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
            ends = np.append(starts[1:], len(order))
            sizes = ends - starts
        # For each sorted position: how many later members its bucket has.
        group_end = np.repeat(ends, sizes)
        after = group_end - np.arange(len(order)) - 1
        cum = np.cumsum(after)
        total = int(cum[-1])
        done = 0
        p0 = 0
        while done < total:
            p1 = int(np.searchsorted(cum, done + chunk, side="right"))
            p1 = max(p1, p0 + 1)
            firsts, seconds = pairs_in_runs(after, p0, p1)
            n_pairs = len(firsts)
            if n_pairs:
                a = order[firsts]
                b = order[seconds]
                left, right = np.minimum(a, b), np.maximum(a, b)
                keep = np.ones(n_pairs, dtype=bool) if touching is None else touching[left] | touching[right]
                for u in range(t):
                    idx = np.flatnonzero(keep)
                    if len(idx) == 0:
                        break
                    keep[idx] = keys[u][left[idx]] != keys[u][right[idx]]
                    # A chunk's pairs touch pages all over band u's keys: let them go before the
                    # next band's (else the earlier bands' keys all count: ~1 GB at 10^7, 13 bands).
                    release(keys)
                left, right = left[keep], right[keep]
                stats.n_candidates += len(left)
                if len(left):
                    yield left, right
            done += n_pairs
            p0 = p1
    release(keys, buckets)

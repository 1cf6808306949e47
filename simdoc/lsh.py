"""Locality-sensitive hashing by banding (MMDS §3.4).

A signature of ``num_perm`` rows is cut into ``bands`` bands of ``rows``
rows (``bands * rows <= num_perm``; rows past the last band are not used for
banding, only for the estimate). Two documents become a *candidate pair* if
they agree on every row of at least one band. For a pair of Jaccard
similarity s this happens with probability ``1 - (1 - s**rows)**bands``, the
S-curve, whose steepest point lies near ``(1/bands)**(1/rows)``.

Choosing b and r
----------------
Equal-weight optimisers (minimise false positives + false negatives) put the
S-curve's midpoint on the threshold and so miss about half of the pairs that
sit exactly at it. simdoc instead asks for a *recall* at the threshold
(default 0.95: a pair with J = t becomes a candidate with probability at
least 0.95) and, among all (b, r) that reach it, takes the one with the
least false-positive area ``∫_0^t P(s) ds``. Every candidate is verified
exactly afterwards, so extra candidates cost time, never precision.

Candidate generation
--------------------
Each band's r values are hashed to one 64-bit key per document; documents
are sorted by key per band (``buckets``), and runs of equal keys are buckets.
Pairs are produced band by band in bounded chunks; a pair is emitted only in
the first band where its two documents share a key, so no global
deduplication table is needed and a huge bucket streams through in pieces.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from simdoc.errors import UsageError
from simdoc.kernel_choice import wanted
from simdoc.memory import release

DEFAULT_RECALL = 0.95
PAIR_CHUNK = 1 << 21  # candidate pairs handed out at once
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def check_threshold(threshold: float) -> float:
    if not isinstance(threshold, (int, float, np.floating)) or not 0.0 < float(threshold) <= 1.0:
        raise UsageError(f"--threshold must be in (0, 1], got {threshold!r}")
    return float(threshold)


def check_bands_rows(bands: int, rows: int, num_perm: int) -> None:
    if bands < 1 or rows < 1:
        raise UsageError(f"--bands and --rows must be at least 1, got --bands {bands} --rows {rows}")
    if bands * rows > num_perm:
        raise UsageError(
            f"--bands {bands} times --rows {rows} = {bands * rows} is larger than --num-perm {num_perm}",
            hint="lower --bands or --rows, or raise --num-perm (the signature must have b*r rows)",
        )


def candidate_probability(s, bands: int, rows: int):
    """Probability that a pair of Jaccard similarity s becomes a candidate: 1-(1-s^r)^b.

    >>> round(candidate_probability(0.8, 20, 5), 4)
    0.9996
    """
    s = np.asarray(s, dtype=np.float64)
    p = 1.0 - (1.0 - s**rows) ** bands
    return float(p) if p.ndim == 0 else p


def s_curve_threshold(bands: int, rows: int) -> float:
    """The similarity (1/b)^(1/r) near which the S-curve is steepest.

    >>> s_curve_threshold(16, 4)
    0.5
    """
    return (1.0 / bands) ** (1.0 / rows)


_AREA_GRID = np.linspace(0.0, 1.0, 257)
_AREA_BLOCK = 512  # bandings whose areas are computed in one numpy pass (512 x 257 floats)


def _false_positive_areas(bands: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
    """``∫_0^threshold P(s) ds`` of each banding (trapezoids on 257 points), one float per (bands, rows)."""
    s = _AREA_GRID * threshold
    ds = np.diff(s)
    out = np.empty(len(rows), dtype=np.float64)
    for i in range(0, len(rows), _AREA_BLOCK):
        b = bands[i : i + _AREA_BLOCK, None].astype(np.float64)
        r = rows[i : i + _AREA_BLOCK, None].astype(np.float64)
        p = 1.0 - (1.0 - s**r) ** b
        out[i : i + _AREA_BLOCK] = np.sum((p[:, 1:] + p[:, :-1]) * ds, axis=1) / 2.0
    return out


def _bands_needed(threshold: float, rows: int, recall: float, max_bands: int) -> int | None:
    """The fewest bands of ``rows`` rows whose P(threshold) reaches ``recall``; None if more than ``max_bands``."""
    p_row = threshold**rows
    if p_row >= 1.0:
        return 1
    if p_row <= 0.0:  # threshold**rows underflowed: no number of bands is enough
        return None
    # For a tiny p_row, log1p(-p_row) is about -p_row and the quotient can pass the
    # largest float (inf): compare it as a float before making it an int.
    ratio = math.log1p(-recall) / math.log1p(-p_row)
    if not ratio <= max_bands + 1:
        return None
    need = max(math.ceil(ratio - 1e-12), 1)
    return need if need <= max_bands else None


def choose_bands_rows(threshold: float, num_perm: int, recall: float = DEFAULT_RECALL) -> tuple[int, int]:
    """Pick (bands, rows) with candidate probability >= ``recall`` at ``threshold``.

    Among all pairs with ``bands * rows <= num_perm`` that reach the recall,
    the one with the least false-positive area below the threshold wins. If
    none reaches it (a tiny threshold with few permutations), the pair with
    the highest recall, ``(num_perm, 1)``, is returned; callers report that
    probability.

    The bands needed grow with the rows (``threshold**rows`` shrinks) while
    the bands allowed, ``num_perm // rows``, shrink, so the first number of
    rows that cannot reach the recall ends the search. When none can, one
    row per band is the best there is: ``(1-t)**r <= 1 - t**r``, so
    ``1 - (1-t)**num_perm >= 1 - (1 - t**r)**(num_perm // r)`` for every r.

    Every threshold in (0, 1] and every ``num_perm >= 1`` gives an answer.
    """
    threshold = check_threshold(threshold)
    if not 0.0 < recall < 1.0:
        raise UsageError(f"recall must be in (0, 1), got {recall!r}")
    if num_perm < 1:
        raise UsageError(f"--num-perm must be at least 1, got {num_perm}")
    feasible_rows, feasible_bands = [], []
    for rows in range(1, num_perm + 1):
        need = _bands_needed(threshold, rows, recall, num_perm // rows)
        if need is None:
            break
        feasible_rows.append(rows)
        feasible_bands.append(need)
    if not feasible_rows:
        return num_perm, 1
    areas = _false_positive_areas(np.array(feasible_bands), np.array(feasible_rows), threshold)
    best = 0
    for i in range(1, len(areas)):
        # A later choice must be smaller by more than rounding to win a tie.
        if areas[i] < areas[best] - 1e-15:
            best = i
    return feasible_bands[best], feasible_rows[best]


@dataclass(frozen=True)
class BandingReport:
    bands: int
    rows: int
    threshold: float
    midpoint: float
    probabilities: dict[float, float]

    @classmethod
    def of(cls, bands: int, rows: int, threshold: float) -> BandingReport:
        points = [round(x, 10) for x in (threshold - 0.1, threshold, threshold + 0.1) if 0.0 < x <= 1.0]
        return cls(
            bands,
            rows,
            threshold,
            s_curve_threshold(bands, rows),
            {s: candidate_probability(s, bands, rows) for s in points},
        )

    def describe(self) -> str:
        # 3 decimals, as the midpoint and the probabilities: a threshold taken from the midpoint
        # of a hand-chosen banding (0.549280) must not print as J=0.44928.
        probs = ", ".join(f"P(J={f'{s:.3f}'.rstrip('0').rstrip('.')})={p:.3f}" for s, p in self.probabilities.items())
        return f"bands={self.bands} rows={self.rows} midpoint (1/b)^(1/r)={self.midpoint:.3f}; {probs}"


BAND_BLOCK_ROWS = 1 << 16  # signature rows banded at once (32 MB of a 128-value matrix)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """64-bit key of each document's values in each band.

    Parameters
    ----------
    signatures : ndarray of shape (n_docs, num_perm), dtype uint32

    Returns
    -------
    ndarray of shape (bands, n_docs), dtype uint64
        Equal band values give equal keys; different values collide with
        probability about 2**-64 (a collision only adds a candidate, which
        verification then scores).
    """
    n = signatures.shape[0]
    check_bands_rows(bands, rows, signatures.shape[1])
    out = np.empty((bands, n), dtype=np.uint64)
    if signatures.dtype == np.uint32 and n and _compiled_order(n * bands):
        from simdoc import kernels

        seeds = np.array([((t + 1) * int(_GOLDEN)) & 0xFFFFFFFFFFFFFFFF for t in range(bands)], dtype=np.uint64)
        # A block of rows at a time, its pages of a memory-mapped matrix let go after it: the
        # matrix (512 MB at 10^6 documents) never counts whole in this process's resident size.
        block = np.empty((bands, min(n, BAND_BLOCK_ROWS)), dtype=np.uint64)
        for a in range(0, n, BAND_BLOCK_ROWS):
            b = min(a + BAND_BLOCK_ROWS, n)
            part = block[:, : b - a] if b - a == block.shape[1] else np.empty((bands, b - a), dtype=np.uint64)
            kernels.band_keys_rows(np.ascontiguousarray(signatures[a:b]), rows, seeds, _GOLDEN, _MIX1, _MIX2, part)
            out[:, a:b] = part
            release(signatures)
        return out
    for t in range(bands):
        h = np.full(n, ((t + 1) * int(_GOLDEN)) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
        for c in range(t * rows, (t + 1) * rows):
            h ^= signatures[:, c].astype(np.uint64)
            h *= _GOLDEN
            h ^= h >> np.uint64(29)
        h ^= h >> np.uint64(30)
        h *= _MIX1
        h ^= h >> np.uint64(27)
        h *= _MIX2
        h ^= h >> np.uint64(31)
        out[t] = h
    return out


# A band of at least this many keys is ordered by the compiled sort, and a matrix of at least
# this many band keys is hashed by the compiled loop, even where numba is not loaded yet (a run
# that only bands again): 13 bands of 2^21 keys save more than its import costs.
COMPILED_ORDER_AFTER = 1 << 21


def stable_order(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(keys, kind="stable")`` and the keys in that order, sooner.

    A band's uint64 keys go to :func:`simdoc.kernels_sort.argsort64` where numba is in use
    and loaded (a build: the scan loaded it), or the band is long enough to pay for loading it:
    ~10 ms for 10^6 keys. Otherwise numpy: its stable sort of 10^6 64-bit keys takes twice its
    default one, which is not stable, but a band's equal keys are few (its buckets of two or
    more): they alone are put back in position order afterwards (~70 ms). Both give the same.
    """
    if len(keys) >= 2 and keys.dtype == np.uint64 and _compiled_order(len(keys)):
        return _compiled_order_of(keys)
    order = np.argsort(keys)
    ordered = keys[order]
    if len(keys) < 2:
        return order, ordered
    same = ordered[1:] == ordered[:-1]
    if same.any():
        tied = np.zeros(len(keys), dtype=bool)  # every member of a run of equal keys
        tied[1:] = same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        sub = order[at]
        order[at] = sub[np.lexsort((sub, ordered[at]))]  # runs stay where they are, sorted inside
    return order, ordered


def _compiled_order(n: int) -> bool:
    """Whether ``n`` keys (a band to order, or all the band keys to hash) go to the compiled loops:
    numba is loaded already, or ``n`` pays for loading it, and the kernels are wanted (simdoc.kernel_choice)."""
    if "numba" not in sys.modules and n < COMPILED_ORDER_AFTER:
        return False  # (simdoc.jit imports numba: asked only once it is loaded, or worth loading)
    return wanted()


def _compiled_order_of(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from simdoc import kernels_sort

    n = len(keys)
    bits = min(22, max(1, (n // 4).bit_length()))  # buckets of ~2-4 keys, at most 32 MB of counters
    order, ordered = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.uint64)
    kernels_sort.argsort64(np.ascontiguousarray(keys), order, ordered, np.zeros((1 << bits) + 1, dtype=np.int64))
    return order, ordered


def bucket_pairs(sorted_keys: np.ndarray) -> int:
    """Pairs inside the buckets of one band, ``sum s(s-1)/2`` over its runs of equal keys.

    ``sorted_keys``: the band's keys in bucket order (or any slice of it
    that no bucket straddles).
    """
    if len(sorted_keys) < 2:
        return 0
    # Runs counted among the keys of buckets of two or more only: arrays a position of the band
    # (most of its buckets hold one document) are ~0.25 GB at 10^7 documents.
    same = sorted_keys[1:] == sorted_keys[:-1]
    shared = np.zeros(len(sorted_keys), dtype=bool)
    shared[1:] = same
    shared[:-1] |= same
    keys = sorted_keys[shared]
    if not len(keys):
        return 0
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sizes = np.diff(np.append(starts, len(keys)))
    return int(np.sum(sizes * (sizes - 1) // 2))


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

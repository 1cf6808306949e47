"""Exact Jaccard similarity of shingle sets and bags, and the MinHash estimate.

* Set Jaccard: ``|A ∩ B| / |A ∪ B|``.
* Bag Jaccard (MMDS §3.1.1): the intersection counts each element the
  minimum number of times it occurs in either bag, the "union" is the sum of
  the two bag sizes, so identical bags score 1/2. Example: {a,a,a,b} and
  {a,a,b,b,c} share a twice and b once: 3 / (4 + 5) = 1/3.
* Estimate: the fraction of signature positions where two MinHash
  signatures agree.

The pair functions work on many pairs at once without a Python loop: rows
are sorted, so tagging every value with its pair number gives one globally
sorted array in which ``searchsorted`` finds all common shingles.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable

import numpy as np

from simdoc import memory
from simdoc.memory import release
from simdoc.shingling import ShingleSets, Workspace

MEASURES = ("set", "bag")
# Buffers for the rows of one batch of pairs, kept from call to call per thread (see ShingleSets.take).
_LOCAL = threading.local()
# Shingles gathered per batch of pairs (each side); bounds the temporary arrays.
PAIR_BATCH_ITEMS = 1 << 23
SIGNATURE_BATCH_PAIRS = 1 << 16
# Pairs estimated between two releases of memory-mapped signature pages (see simdoc.memory).
RELEASE_EVERY_PAIRS = 1 << 13


def jaccard(a: Iterable, b: Iterable) -> float:
    """Set Jaccard similarity of two collections (sets, lists or arrays of shingles).

    >>> jaccard({"a", "d"}, {"a", "c", "d"})
    0.6666666666666666
    """
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        inter = len(np.intersect1d(a, b))
        union = len(np.union1d(a, b))
    else:
        sa, sb = set(a), set(b)
        inter, union = len(sa & sb), len(sa | sb)
    return inter / union if union else 0.0


def bag_jaccard(a: Iterable, b: Iterable) -> float:
    """Bag Jaccard similarity of two multisets given as sequences (repeats count).

    >>> bag_jaccard("aaab", "aabbc")
    0.3333333333333333
    """
    ca, cb = Counter(a), Counter(b)
    total = sum(ca.values()) + sum(cb.values())
    inter = sum(min(n, cb[x]) for x, n in ca.items())
    return inter / total if total else 0.0


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Fraction of positions where two signatures agree."""
    sig_a, sig_b = np.asarray(sig_a), np.asarray(sig_b)
    if sig_a.shape != sig_b.shape:
        raise ValueError(f"signatures differ in shape: {sig_a.shape} vs {sig_b.shape}")
    return float(np.mean(sig_a == sig_b))


def pair_estimates(signatures: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Estimated Jaccard of many pairs: float64 array aligned with ``left``/``right``."""
    out = np.empty(len(left), dtype=np.float64)
    step = min(SIGNATURE_BATCH_PAIRS, RELEASE_EVERY_PAIRS)
    for s in range(0, len(left), step):
        sl = slice(s, s + step)
        eq = signatures[left[sl]] == signatures[right[sl]]
        out[sl] = eq.sum(axis=1) / signatures.shape[1]
        release(signatures)
    return out


def set_jaccard_bound(sizes_a: np.ndarray, sizes_b: np.ndarray) -> np.ndarray:
    """``min/max`` of two set sizes, an upper bound of their set Jaccard (0 when both are empty).

    ``|A ∩ B| <= min`` and ``|A ∪ B| >= max``, and rounding to float64 keeps
    the order, so the Jaccard that :func:`pair_jaccard` computes never exceeds
    the bound: a pair whose bound is below a threshold is below it too.
    """
    a = np.asarray(sizes_a, dtype=np.float64)
    b = np.asarray(sizes_b, dtype=np.float64)
    hi = np.maximum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hi > 0, np.minimum(a, b) / np.where(hi > 0, hi, 1), 0.0)


# A candidate whose signatures agree in so few positions that a pair at the threshold
# would show so few with at most this probability is not verified (see min_matches).
RULE_OUT_PROBABILITY = 1e-9
# OPH sets with at least this many shingles per bin: (almost) no bin is empty and filled in.
OPH_FULL_BINS = 4


def min_matches(num_perm: int, threshold: float, eps: float | None = None) -> int:
    """Fewest agreeing signature positions not too unlikely for a pair of Jaccard ``threshold``.

    A pair of Jaccard J agrees in each of ``num_perm`` positions with
    probability J; for classic MinHash independently (a binomial count), for
    one-permutation hashing with no empty bin with negative dependence, whose
    spread is smaller. The result k is the smallest count with
    ``P(Binomial(num_perm, threshold) <= k) >= eps``; the probability only
    falls as J rises, so a pair of Jaccard >= threshold shows fewer than k
    agreements with probability below ``eps`` (default RULE_OUT_PROBABILITY;
    0 rules nothing out). Threshold 1 gives num_perm: equal sets have equal
    signatures.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    eps = RULE_OUT_PROBABILITY if eps is None else eps
    if eps <= 0.0:
        return 0
    if threshold == 1.0:
        return num_perm
    log_t, log_f = math.log(threshold), math.log1p(-threshold)
    cdf = 0.0
    for k in range(num_perm + 1):
        log_pmf = math.lgamma(num_perm + 1) - math.lgamma(k + 1) - math.lgamma(num_perm - k + 1) + k * log_t + (num_perm - k) * log_f
        cdf += math.exp(log_pmf)
        if cdf >= eps:
            return k
    return num_perm


def estimate_rules_out(
    est: np.ndarray, sizes_a: np.ndarray, sizes_b: np.ndarray, num_perm: int, scheme: str, threshold: float
) -> np.ndarray:
    """Pairs whose MinHash estimate alone rules out set Jaccard >= ``threshold`` (see min_matches).

    Only pairs whose estimate the binomial bound holds for: any pair with
    classic MinHash; with OPH, pairs of sets of at least OPH_FULL_BINS
    shingles per bin, whose bins are (almost) all filled by their own shingles.
    """
    matches = np.rint(np.asarray(est, dtype=np.float64) * num_perm)
    low = matches < min_matches(num_perm, threshold)
    if scheme != "classic":
        floor = OPH_FULL_BINS * num_perm
        low &= (np.asarray(sizes_a) >= floor) & (np.asarray(sizes_b) >= floor)
    return low


def _gather(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat positions of the given CSR rows, concatenated; with each position's owner (row's index)."""
    lens = indptr[rows + 1] - indptr[rows]
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    before = np.cumsum(lens) - lens
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(before - indptr[rows], lens)
    return pos, owner, lens


def pair_jaccard(
    sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str = "set", threads: int = 1
) -> np.ndarray:
    """Exact Jaccard of many pairs of rows of ``sets``.

    Parameters
    ----------
    sets : ShingleSets
    left, right : ndarray of shape (n_pairs,), int
        Row numbers of the two sides.
    measure : {"set", "bag"}
    threads : int
        Batches of pairs verified at once (reading rows and the compiled
        merge both release the GIL). The result does not depend on it.

    Returns
    -------
    ndarray of shape (n_pairs,), dtype float64
        A pair of two empty rows scores 0.
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    # Verify in order of each pair's larger row, then its smaller one. A batch's larger rows
    # are then neighbours in the file, read by few large requests; and they are the rows that
    # come from disk: an index's hashes past an eighth of memory are written past the page
    # cache (simdoc.direct), while the smaller rows lie more often in the cached start.
    # Verifying the 227,427 pairs of the 10^6 benchmark: 8.1-9.4 s by smaller row, 6.3-6.8 s so.
    order = np.lexsort((np.minimum(left, right), np.maximum(left, right)))
    if np.any(order[1:] < order[:-1]):
        got = pair_jaccard(sets, left[order], right[order], measure, threads)
        out = np.empty(len(left), dtype=np.float64)
        out[order] = got
        return out
    out = np.zeros(len(left), dtype=np.float64)
    sizes = np.diff(sets.indptr)
    cost = np.cumsum(sizes[left] + sizes[right])
    # Cut batches at roughly PAIR_BATCH_ITEMS shingles; always at least one pair. Only a
    # batch's rows are read into memory (ShingleSets.take, into per-thread buffers reused
    # from batch to batch), so memory stays bounded.
    spans = []
    start = 0
    while start < len(left):
        stop = int(np.searchsorted(cost, (cost[start - 1] if start else 0) + PAIR_BATCH_ITEMS, side="right"))
        stop = max(stop, start + 1)
        spans.append((start, stop))
        start = stop

    ahead = _RowsAhead.start(sets, left, right, spans, measure)

    def verify(span: tuple[int, int]) -> None:
        start, stop = span
        if ahead is not None:
            ahead.started()
        out[start:stop] = _verify_batch(sets, left[start:stop], right[start:stop], measure)

    try:
        if threads > 1 and len(spans) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(threads, len(spans))) as pool:
                list(pool.map(verify, spans))
        else:
            for span in spans:
                verify(span)
    finally:
        if ahead is not None:
            ahead.close()
    return out


PREFETCH_SPANS = 2  # batches of pairs whose rows are asked for ahead of their verification


class _RowsAhead:
    """A thread asking the kernel for the rows of the next batches of pairs (see memory.prefetch).

    Rows written past the page cache (simdoc.direct) come from disk: asked
    for a batch or two ahead, they are read while the batch before is
    verified, with the disk's whole queue in use. Each batch calls
    :meth:`started` as its verification begins; the thread keeps at most
    PREFETCH_SPANS batches ahead and skips batches already begun.
    """

    def __init__(self, sets: ShingleSets, left, right, spans: list[tuple[int, int]], measure: str) -> None:
        self._tokens = threading.Semaphore(PREFETCH_SPANS)
        self._lock = threading.Lock()
        self._begun = 0
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, args=(sets, left, right, spans, measure), name="simdoc-prefetch", daemon=True
        )
        self._thread.start()

    def _run(self, sets, left, right, spans, measure) -> None:
        indptr = np.asarray(sets.indptr)
        for i, (start, stop) in enumerate(spans):
            self._tokens.acquire()
            with self._lock:
                if self._closed:
                    return
                if i < self._begun:
                    continue
            rows = np.unique(np.concatenate([left[start:stop], right[start:stop]]))
            memory.prefetch(sets.data, indptr[rows], indptr[rows + 1])
            if measure == "bag":
                memory.prefetch(sets.counts, indptr[rows], indptr[rows + 1])

    def started(self) -> None:
        with self._lock:
            self._begun += 1
        self._tokens.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._tokens.release()
        self._thread.join()

    @classmethod
    def start(cls, sets: ShingleSets, left, right, spans, measure: str) -> _RowsAhead | None:
        """None when there is nothing to gain: one batch, rows not read from a file, or SIMDOC_PREFETCH=off."""
        if len(spans) < 2 or not memory.is_mapped(sets.data) or not memory.prefetch_enabled():
            return None
        return cls(sets, left, right, spans, measure)


def _scratch() -> Workspace:
    ws = getattr(_LOCAL, "scratch", None)
    if ws is None:
        ws = _LOCAL.scratch = Workspace()
    return ws


def _verify_batch(sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str) -> np.ndarray:
    from simdoc import kernels

    n = len(left)
    rows, local = np.unique(np.concatenate([left, right]), return_inverse=True)
    batch = sets.take(rows, counts=measure == "bag", scratch=_scratch())
    if not kernels.ENABLED:
        return _batch_jaccard(batch, local[:n], local[n:], measure)
    inter = np.empty(n, dtype=np.float64)
    union = np.empty(n, dtype=np.float64)
    # The merge reads counts only for bags; for sets it gets the (contiguous) hashes in their
    # place, so that it runs the one compiled version.
    counts = batch.counts if measure == "bag" else batch.data
    kernels.pair_overlap(batch.indptr, batch.data, counts, local[:n], local[n:], measure == "bag", inter, union)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _batch_jaccard(sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str) -> np.ndarray:
    m = len(left)
    pos_a, own_a, len_a = _gather(sets.indptr, left)
    pos_b, own_b, len_b = _gather(sets.indptr, right)
    tag_a = (own_a.astype(np.uint64) << np.uint64(32)) | sets.data[pos_a].astype(np.uint64)
    tag_b = (own_b.astype(np.uint64) << np.uint64(32)) | sets.data[pos_b].astype(np.uint64)
    if len(tag_b):
        at = np.minimum(np.searchsorted(tag_b, tag_a), len(tag_b) - 1)
        hit = tag_b[at] == tag_a
    else:
        at = np.zeros(len(tag_a), dtype=np.int64)
        hit = np.zeros(len(tag_a), dtype=bool)
    if measure == "set":
        inter = np.bincount(own_a[hit], minlength=m).astype(np.float64)
        union = (len_a + len_b).astype(np.float64) - inter
    else:
        ca = sets.counts[pos_a]
        cb = sets.counts[pos_b]
        common = np.minimum(ca[hit], cb[at[hit]]).astype(np.float64)
        # bincount of an empty array is int64 even with weights: cast.
        inter = np.bincount(own_a[hit], weights=common, minlength=m).astype(np.float64)
        union = np.bincount(own_a, weights=ca.astype(np.float64), minlength=m).astype(np.float64)
        union += np.bincount(own_b, weights=cb.astype(np.float64), minlength=m)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)

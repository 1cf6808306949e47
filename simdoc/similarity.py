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
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from simdoc.kernel_choice import wanted
from simdoc.memory import release
from simdoc.shinglesets import ShingleSets

MEASURES = ("set", "bag")
SIGNATURE_BATCH_PAIRS = 1 << 16
# A matrix larger than MAP_WHOLE_BYTES (memory-mapped) has its rows read in row order: the
# distinct rows of a block of pairs copied out, its pages let go (see simdoc.memory) whenever the
# rows read leave a window of RELEASE_BYTES of the matrix, and every RELEASE_ROWS rows: each of
# its folios is faulted in once, and at most a window's are mapped at a time.
# Read at random, a row can map far more than its page (Linux 6.18, ext4: large folios in the
# page cache, ~2 MB a row), so pages were let go every 128 pairs: the 126,444 candidates of 10^6
# JSON Lines records took 0.48 CPU-s of page faults so, in the main process, the other core idle.
# A block's pairs are as many as make ESTIMATE_BYTES of rows (two a pair): the copy and the
# block's gathered rows stay a few tens of MB whatever the permutations (16,384 pairs at 128).
ESTIMATE_BYTES = 16 << 20
RELEASE_ROWS = 1 << 12
RELEASE_BYTES = 8 << 20
# A matrix of at most this many bytes may be mapped whole while its pairs are estimated (its pages
# let go once a batch, its rows read as the pairs name them): it bounds what mapping it can cost.
# c100k's 48 MB matrix, 29,296 candidates: 0.154 -> 0.021 CPU-s, in the main process before verification.
MAP_WHOLE_BYTES = 64 << 20


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


def shown_estimate(sig_a: np.ndarray, sig_b: np.ndarray, both_shingled: bool) -> float:
    """:func:`estimate_jaccard` as the reports show it: 0 unless both documents have shingles.
    Two empty signatures agree everywhere, which is no evidence of likeness (such a document is
    never a candidate)."""
    return estimate_jaccard(sig_a, sig_b) if both_shingled else 0.0


def pair_estimates(signatures: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Estimated Jaccard of many pairs: float64 array aligned with ``left``/``right``."""
    out = np.empty(len(left), dtype=np.float64)
    if signatures.nbytes > MAP_WHOLE_BYTES:
        block = estimate_block(signatures)
        for s in range(0, len(left), block):
            sl = slice(s, s + block)
            rows, (a, b) = _rows_in_order(signatures, left[sl], right[sl])
            out[sl] = _batched(rows, a, b, step=block)
        return out
    return _batched(signatures, left, right, out)


def estimate_block(signatures: np.ndarray) -> int:
    """Pairs estimated a block at a time from a large mapped matrix (see ESTIMATE_BYTES)."""
    return max(1, ESTIMATE_BYTES // (2 * max(1, signatures.shape[1] * signatures.itemsize)))


def _batched(
    signatures: np.ndarray, left: np.ndarray, right: np.ndarray, out: np.ndarray | None = None, step: int = SIGNATURE_BATCH_PAIRS
) -> np.ndarray:
    """The estimates, ``step`` pairs at a time (a mapped matrix's pages let go after each)."""
    out = np.empty(len(left), dtype=np.float64) if out is None else out
    for s in range(0, len(left), step):
        sl = slice(s, s + step)
        eq = signatures[left[sl]] == signatures[right[sl]]
        out[sl] = eq.sum(axis=1) / signatures.shape[1]
        release(signatures)
    return out


def _rows_in_order(signatures: np.ndarray, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The distinct rows of ``left`` and ``right`` copied out of a (memory-mapped) matrix in row
    order, its pages let go at each RELEASE_BYTES window and every RELEASE_ROWS rows; and ``left``,
    ``right`` as rows of that copy."""
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    needed, where = np.unique(np.concatenate([left, right]), return_inverse=True)
    rows = np.empty((len(needed), signatures.shape[1]), dtype=signatures.dtype)
    # Rows far apart (32,768 of 10^6 documents) spanned ~70 MB of the matrix in 4,096 rows, all of
    # it mapped before it was let go: r1m's main process peaked at 743 MB, 515 MB so.
    row_bytes = max(1, signatures.shape[1] * signatures.itemsize)
    windows = needed // max(1, RELEASE_BYTES // row_bytes)
    cuts = np.flatnonzero(windows[1:] != windows[:-1]) + 1
    bounds = np.union1d(np.concatenate([[0], cuts, [len(needed)]]), np.arange(0, len(needed), RELEASE_ROWS))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        rows[a:b] = signatures[needed[a:b]]
        release(signatures)
    where = where.reshape(-1)
    return rows, (where[: len(left)], where[len(left) :])


# A candidate whose signatures agree in so few positions that a pair at the threshold
# would show so few with at most this probability is not verified (see min_matches).
RULE_OUT_PROBABILITY = 1e-9


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
    est: np.ndarray, dense_a: np.ndarray, dense_b: np.ndarray, num_perm: int, scheme: str, threshold: float
) -> np.ndarray:
    """Pairs whose MinHash estimate alone rules out set Jaccard >= ``threshold`` (see min_matches).

    Only pairs whose estimate the binomial bound holds for: any pair with
    classic MinHash; with OPH, pairs of documents whose bins are all filled by
    their own shingles (``dense``: no bin borrowed by densification, see
    :func:`simdoc.stages.results.filled_bins`).
    """
    matches = np.rint(np.asarray(est, dtype=np.float64) * num_perm)
    low = matches < min_matches(num_perm, threshold)
    if scheme != "classic":
        low &= np.asarray(dense_a, dtype=bool) & np.asarray(dense_b, dtype=bool)
    return low


def _gather(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat positions of the given CSR rows, concatenated; with each position's owner (row's index)."""
    lens = indptr[rows + 1] - indptr[rows]
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    before = np.cumsum(lens) - lens
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(before - indptr[rows], lens)
    return pos, owner, lens


def pair_jaccard(sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str = "set") -> np.ndarray:
    """Exact Jaccard of many pairs of rows of ``sets`` (held in memory).

    Parameters
    ----------
    sets : ShingleSets
    left, right : ndarray of shape (n_pairs,), int
        Row numbers of the two sides.
    measure : {"set", "bag"}

    Returns
    -------
    ndarray of shape (n_pairs,), dtype float64
        A pair of two empty rows scores 0.
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    return _batch_jaccard(sets, np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64), measure)


def _batch_jaccard(sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str) -> np.ndarray:
    m = len(left)
    pos_a, own_a, len_a = _gather(sets.indptr, left)
    pos_b, own_b, len_b = _gather(sets.indptr, right)
    if sets.data.dtype == np.uint64:
        return _wide_jaccard(sets, left, right, measure)
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


def _wide_jaccard(sets: ShingleSets, left: np.ndarray, right: np.ndarray, measure: str) -> np.ndarray:
    """pair_jaccard for 64-bit shingle sets (verification's): :func:`pair_sums`, a merge a pair."""
    set_j, bag_j = jaccards_of_sums(pair_sums(sets, left, right))
    return set_j if measure == "set" else bag_j


def pair_sums(sets: ShingleSets, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(n_pairs, 5) int64: for rows ``left[p]`` and ``right[p]`` of ``sets``, their distinct
    shingles, each; the shared ones; the sum over those of the smaller count; the sum of all
    counts of both. The set and bag Jaccards are made of them (:func:`jaccards_of_sums`),
    and so are the sums over the passes of a pair compared a hash range at a time."""
    left = np.ascontiguousarray(left, dtype=np.int64)
    right = np.ascontiguousarray(right, dtype=np.int64)
    return _sums(sets.indptr, sets.data, sets.counts, left, right)


def span_sums(data: np.ndarray, counts: np.ndarray, spans_a: np.ndarray, spans_b: np.ndarray) -> np.ndarray:
    """:func:`pair_sums` of rows given by where they lie in ``data``/``counts`` (sorted 64-bit
    sets with counts, anywhere in one array): pair p compares ``data[spans_a[p, 0]:spans_a[p, 1]]``
    with ``data[spans_b[p, 0]:spans_b[p, 1]]``. Rows stay where they are (none is copied)."""
    m = len(spans_a)
    # The spans as the rows of a CSR whose every other row is a gap: row 2p is pair p's a, 2m + 2p its b.
    bounds = np.concatenate([np.asarray(spans_a, np.int64).reshape(-1), np.asarray(spans_b, np.int64).reshape(-1)])
    rows = 2 * np.arange(m, dtype=np.int64)
    return _sums(bounds, data, counts, rows, rows + 2 * m)


def _sums(indptr: np.ndarray, data: np.ndarray, counts: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    out = np.zeros((len(left), 5), np.int64)
    if wanted():
        from simdoc import kernels  # here: numba is imported only by a run that compiles or calls a kernel

        kernels.pair_sums(indptr, data, counts, left, right, out)
        return out
    for p, (a, b) in enumerate(zip(left.tolist(), right.tolist())):  # the kernel's reference
        ra, rb = data[indptr[a] : indptr[a + 1]], data[indptr[b] : indptr[b + 1]]
        _, ia, ib = np.intersect1d(ra, rb, assume_unique=True, return_indices=True)
        ca, cb = counts[indptr[a] : indptr[a + 1]], counts[indptr[b] : indptr[b + 1]]
        out[p] = (
            len(ra), len(rb), len(ia), np.minimum(ca[ia], cb[ib]).sum(dtype=np.int64),
            ca.sum(dtype=np.int64) + cb.sum(dtype=np.int64),
        )
    return out


def jaccards_of_sums(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(set, bag) Jaccards from :func:`pair_sums`' rows (0 where a pair has nothing): the
    integers divided once, so any way of summing them gives the same floats."""
    sums = np.asarray(sums, dtype=np.int64).reshape(-1, 5)
    union = sums[:, 0] + sums[:, 1] - sums[:, 2]
    total = sums[:, 4]
    set_j = np.divide(sums[:, 2], union, out=np.zeros(len(sums)), where=union > 0)
    bag_j = np.divide(sums[:, 3], total, out=np.zeros(len(sums)), where=total > 0)
    return set_j, bag_j


# A pair whose two sets would need more than this to be read is compared in passes, each
# reading both documents again and keeping one range of their hashes: exact, in bounded memory.
PAIR_BYTES = 128 << 20
# (lo, hi, P): only the 64-bit hashes in ranges lo..hi-1 of P equal ones (simdoc.corpus.streaming.Part)
Part = tuple[int, int, int]


def pair_passes(n_a: int, n_b: int) -> int:
    """How many passes a pair of ``n_a`` and ``n_b`` shingles (window counts) is compared in, for a
    pass to hold about PAIR_BYTES: the first document's range (12 bytes a shingle) while the
    second's is merged (~48 bytes a shingle). One: the pair is compared whole."""
    small, large = sorted((int(n_a), int(n_b)))
    return max(1, -(-(12 * small + 48 * large) // PAIR_BYTES))


def jaccard_in_passes(
    read: Callable[[Part], tuple[ShingleSets | None, ShingleSets | None]], n_a: int, n_b: int
) -> tuple[float, float] | None:
    """(set, bag) Jaccard of one pair of one-row 64-bit sets, one hash range at a time, in about
    PAIR_BYTES whatever the documents hold; None if ``read`` gave None for either (not compared).

    ``read(part)`` gives the two documents' sets restricted to ``part`` (see
    ``simdoc.corpus.streaming.in_part``), reading them again. The sums of the ranges'
    counts are those of the whole sets, so the Jaccards are the same floats as comparing
    them whole. ``n_a``, ``n_b``: their window counts, to plan the first pass.
    """
    sums = sums_in_passes(read, n_a, n_b)
    if sums is None:
        return None
    size_a, size_b, common, common_bag, total = sums
    union = size_a + size_b - common
    return (common / union if union else 0.0), (common_bag / total if total else 0.0)


def sums_in_passes(
    read: Callable[[Part], tuple[ShingleSets | None, ShingleSets | None]], n_a: int, n_b: int
) -> tuple[int, int, int, int, int] | None:
    """The counts behind :func:`jaccard_in_passes`, summed over the passes: distinct shingles of
    each, shared ones, the sum of the smaller count of each shared one, and of all counts."""
    size_a = size_b = common = common_bag = total = 0
    n_parts = pair_passes(n_a, n_b)  # planned from the window counts: repeats make it too many
    lo, step = 0, 1
    while lo < n_parts:
        hi = min(n_parts, lo + step)
        ra, rb = read((lo, hi, n_parts))
        if ra is None or rb is None:
            return None
        _, ia, ib = np.intersect1d(ra.data, rb.data, assume_unique=True, return_indices=True)
        common += len(ia)
        size_a += len(ra.data)
        size_b += len(rb.data)
        common_bag += int(np.minimum(ra.counts[ia], rb.counts[ib]).sum(dtype=np.int64))
        total += int(ra.counts.sum(dtype=np.int64)) + int(rb.counts.sum(dtype=np.int64))
        # The rest in as few passes as the distinct shingles seen per range allow.
        small, large = sorted((len(ra.data), len(rb.data)))
        step = max(1, PAIR_BYTES * (hi - lo) // max(1, 12 * small + 48 * large))
        lo = hi
    return size_a, size_b, common, common_bag, total

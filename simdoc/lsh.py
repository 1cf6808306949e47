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

What a band's buckets hold, and the candidate pairs in them: :mod:`simdoc.buckets`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from simdoc.errors import UsageError
from simdoc.kernel_choice import wanted
from simdoc.memory import release

DEFAULT_RECALL = 0.95
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

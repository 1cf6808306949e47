"""Verification's pairs grouped by connected component and cut into units of work of about equal cost.

:func:`simdoc.stages.verify.verify_pairs` orders the candidate pairs by the
component of the candidate graph they belong to (:func:`components`), so that
a document is read once for all its pairs, and hands out units of whole
components (:func:`units`) to its processes, the costliest first.

A unit's cost is what verifying it takes (:func:`pair_costs`): each of its
documents read again and shingled once, each of its pairs merged. Cut by
the number of pairs instead, units differed 20-fold in time (Python's
sources: a component of 5,217 pairs of short files cost less than one of
1,065 pairs of long ones), and the process that took the last long one
finished alone.
"""

from __future__ import annotations

import numpy as np

UNITS_PER_JOB = 8  # units about this many per process: the last ones are small, for balance
UNIT_PAIRS = 1 << 15  # pairs of one unit at most (whole components, unless one is larger)
# A document's cost, read and shingled, against a pair's merge of its two rows (a value each):
# per shingle (~13 ns a byte read, digested and shingled, to ~1.8 ns a value merged, c100k), and
# per file (its open, stat, read and close: ~10 us).
SHINGLE_COST = 7
FILE_COST = 6000


def components(left: np.ndarray, right: np.ndarray, n: int) -> np.ndarray:
    """Label of each pair's connected component in the graph of the pairs (the smallest document in it)."""
    label = np.arange(n, dtype=np.int64)
    if not len(left):
        return np.zeros(0, np.int64)
    while True:
        lo = np.minimum(label[left], label[right])
        changed = False
        for side in (left, right):
            before = label[side]
            np.minimum.at(label, side, lo)
            changed |= bool(np.any(label[side] != before))
        label = label[label]  # pointer jumping: a label's label is smaller still
        if not changed and np.array_equal(label[left], label[right]):
            break
    return label[left]


def pair_costs(ol: np.ndarray, orr: np.ndarray, shingles: np.ndarray) -> np.ndarray:
    """What verifying each of the ordered pairs (``ol[i]``, ``orr[i]``) adds: the merge of its two
    rows, and the reading and shingling of a document at the first pair that needs it.
    ``shingles``: each document's shingle count."""
    n = len(ol)
    na, nb = np.asarray(shingles[ol], np.int64), np.asarray(shingles[orr], np.int64)
    cost = na + nb
    docs, inverse = np.unique(np.concatenate([ol, orr]), return_inverse=True)
    first = np.full(len(docs), n, np.int64)
    pos = np.arange(n, dtype=np.int64)
    np.minimum.at(first, inverse, np.concatenate([pos, pos]))
    np.add.at(cost, first, FILE_COST + SHINGLE_COST * np.asarray(shingles[docs], np.int64))
    return cost


def units(label: np.ndarray, cost: np.ndarray, jobs: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of the ordered pairs (``label``: their components, in runs), cut at
    component boundaries into about :data:`UNITS_PER_JOB` a job of about equal ``cost`` (and at
    most :data:`UNIT_PAIRS` pairs, unless one component is larger), the costliest first."""
    n = len(label)
    if not n:
        return []
    ends = np.cumsum(cost, dtype=np.float64)
    target = ends[-1] / (max(jobs, 1) * UNITS_PER_JOB)
    bounds = [0, *(np.flatnonzero(label[1:] != label[:-1]) + 1).tolist(), n]
    cut, start = [], 0
    for b, e in zip(bounds[1:-1], bounds[2:]):  # the component [b, e): in this unit, or the next one's first
        if ends[b - 1] - (ends[start - 1] if start else 0.0) >= target or e - start > UNIT_PAIRS:
            cut.append((start, b))
            start = b
    cut.append((start, n))
    weight = [ends[b - 1] - (ends[a - 1] if a else 0.0) for a, b in cut]
    order = sorted(range(len(cut)), key=lambda i: (-weight[i], i))
    return [cut[i] for i in order]

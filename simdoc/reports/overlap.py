"""How much two shingle sets share: set and bag Jaccard and containment (`simdoc show`).

:func:`texts_overlap` compares two texts' 64-bit sets whole, or, when they
are too long for that, in passes over hash ranges as `pairs` verifies a
pair (:func:`simdoc.similarity.sums_in_passes`): the same numbers in
bounded memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec



@dataclass(frozen=True)
class ShingleOverlap:
    """Similarity of two shingle sets.

    Attributes
    ----------
    n_a, n_b : int
        Distinct shingles of A and of B.
    n_common : int
        Shingles in both, ``|A∩B|``.
    set_jaccard : float
        ``|A∩B| / |A∪B|``; 0 when both are empty.
    bag_jaccard : float
        Sum of the smaller multiplicity of each common shingle over the sum of
        both bag sizes; identical bags give 1/2.
    containment_a : float
        ``|A∩B| / |A|``: the share of A's shingles that are also in B.
    containment_b : float
        ``|A∩B| / |B|``.
    """

    n_a: int
    n_b: int
    n_common: int
    set_jaccard: float
    bag_jaccard: float
    containment_a: float
    containment_b: float

    @property
    def n_union(self) -> int:
        return self.n_a + self.n_b - self.n_common


def shingle_overlap(sets: ShingleSets, a: int, b: int) -> ShingleOverlap:
    """Set and bag Jaccard and containment of rows ``a`` and ``b`` of ``sets``.

    Examples
    --------
    >>> sets = ShingleSets.from_sets([[1, 1, 2, 3], [2, 3, 4, 5, 6, 7]])
    >>> o = shingle_overlap(sets, 0, 1)
    >>> (o.n_common, round(o.set_jaccard, 4), round(o.bag_jaccard, 4), o.containment_a, round(o.containment_b, 4))
    (2, 0.2857, 0.2, 0.6666666666666666, 0.3333)
    """
    ra, rb = sets.row(a), sets.row(b)
    ca, cb = sets.row_counts(a), sets.row_counts(b)
    _, ia, ib = np.intersect1d(ra, rb, assume_unique=True, return_indices=True)
    n_a, n_b, n_c = len(ra), len(rb), len(ia)
    union = n_a + n_b - n_c
    bag_total = int(ca.sum(dtype=np.int64)) + int(cb.sum(dtype=np.int64))
    bag_common = int(np.minimum(ca[ia], cb[ib]).sum(dtype=np.int64))
    return ShingleOverlap(
        n_a,
        n_b,
        n_c,
        n_c / union if union else 0.0,
        bag_common / bag_total if bag_total else 0.0,
        n_c / n_a if n_a else 0.0,
        n_c / n_b if n_b else 0.0,
    )


def texts_overlap(text_a: str | bytes, text_b: str | bytes, spec: ShingleSpec) -> ShingleOverlap:
    """:func:`shingle_overlap` of two texts' 64-bit sets; texts too long to compare whole are
    compared in passes over hash ranges, as `pairs` verifies a pair: the same numbers."""
    from simdoc.corpus.streaming import sets64_of_texts
    from simdoc.similarity import pair_passes, sums_in_passes

    # A text has at most as many windows as characters, whatever the unit: passes planned from them.
    if pair_passes(len(text_a), len(text_b)) == 1:
        return shingle_overlap(sets64_of_texts([text_a, text_b], spec), 0, 1)

    def read(part):
        sets = sets64_of_texts([text_a, text_b], spec, part)
        return sets.slice(0, 1), sets.slice(1, 2)

    n_a, n_b, n_c, common_bag, total = sums_in_passes(read, len(text_a), len(text_b))
    union = n_a + n_b - n_c
    return ShingleOverlap(
        n_a, n_b, n_c, n_c / union if union else 0.0, common_bag / total if total else 0.0,
        n_c / n_a if n_a else 0.0, n_c / n_b if n_b else 0.0,
    )

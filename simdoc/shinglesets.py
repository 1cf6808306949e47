"""Many documents' shingle sets in one CSR structure: ShingleSets.

The shingling functions (:mod:`simdoc.shingling`) return, and MinHash and
the exact Jaccard (:mod:`simdoc.minhash`, :mod:`simdoc.similarity`) take,
the sets of a whole batch of documents as three flat arrays rather than a
list of Python sets: ``indptr`` (where each document's row starts),
``data`` (its sorted unique shingle hashes) and, optionally, ``counts``
(how often each occurs, for bag Jaccard). Rows are views, so a batch of
10^4 documents is three allocations, not 10^4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class ShingleSets:
    """Shingle sets of many documents in CSR form.

    Attributes
    ----------
    indptr : ndarray of shape (n_docs + 1,), dtype int64
        Row i is ``data[indptr[i]:indptr[i + 1]]``.
    data : ndarray of shape (nnz,), dtype uint32 (or uint64 for verification's 64-bit shingles)
        Shingle hashes, sorted ascending and unique within each row (but for
        ``shingle_texts(form="stream")``, which keeps every window in text order).
    counts : ndarray of shape (nnz,), dtype uint32
        How often each shingle occurs in its document (for bag similarity).
    """

    __slots__ = ("indptr", "data", "counts")

    def __init__(self, indptr: np.ndarray, data: np.ndarray, counts: np.ndarray | None = None) -> None:
        self.indptr = np.asarray(indptr, dtype=np.int64)
        # 32-bit shingle hashes, or 64-bit ones for exact verification (shingle_texts(form="sets64")).
        self.data = data if isinstance(data, np.ndarray) and data.dtype == np.uint64 else np.asarray(data, dtype=np.uint32)
        if counts is None:
            self.counts = np.ones(len(self.data), dtype=np.uint32)
        else:
            self.counts = np.asarray(counts, dtype=np.uint32)
        if self.indptr.ndim != 1 or len(self.indptr) < 1 or self.indptr[0] != 0:
            raise ValueError("indptr must be 1-D and start at 0")
        if self.indptr[-1] != len(self.data) or len(self.counts) != len(self.data):
            raise ValueError("indptr, data and counts disagree on the number of shingles")

    @classmethod
    def from_sets(cls, sets: Iterable[Iterable[int]]) -> ShingleSets:
        """Build from explicit integer sets (e.g. textbook examples); duplicates are counted."""
        rows = [np.asarray(sorted(s), dtype=np.uint64) for s in sets]
        indptr = [0]
        data, counts = [], []
        for row in rows:
            if len(row) and (row.max() >= 2**32):
                raise ValueError("shingle ids must fit in 32 bits")
            uniq, cnt = np.unique(row.astype(np.uint32), return_counts=True)
            data.append(uniq)
            counts.append(cnt.astype(np.uint32))
            indptr.append(indptr[-1] + len(uniq))
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.uint32))
        return cls(np.array(indptr, np.int64), cat(data), cat(counts))

    @classmethod
    def concatenate(cls, parts: Sequence[ShingleSets]) -> ShingleSets:
        if not parts:
            return cls(np.zeros(1, np.int64), np.zeros(0, np.uint32))
        offsets = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        indptr = np.concatenate([[0]] + [p.indptr[1:] + off for p, off in zip(parts, offsets)])
        counts = np.concatenate([np.asarray(p.counts) for p in parts])
        return cls(indptr, np.concatenate([p.data for p in parts]), counts)

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    def __len__(self) -> int:
        return self.n_docs

    def sizes(self) -> np.ndarray:
        """Number of distinct shingles per document, int64."""
        return np.diff(self.indptr)

    def row(self, i: int) -> np.ndarray:
        return self.data[self.indptr[i] : self.indptr[i + 1]]

    def row_counts(self, i: int) -> np.ndarray:
        return self.counts[self.indptr[i] : self.indptr[i + 1]]

    def slice(self, start: int, stop: int) -> ShingleSets:
        lo, hi = self.indptr[start], self.indptr[stop]
        return ShingleSets(self.indptr[start : stop + 1] - lo, self.data[lo:hi], self.counts[lo:hi])

    def take(self, rows: np.ndarray) -> ShingleSets:
        """The given rows, in that order, as a CSR of their own (copied)."""
        rows = np.asarray(rows, dtype=np.int64)
        lens = self.indptr[rows + 1] - self.indptr[rows]
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lens, out=indptr[1:])
        at = np.arange(indptr[-1], dtype=np.int64) + np.repeat(self.indptr[rows] - indptr[:-1], lens)
        return ShingleSets(indptr, self.data[at], self.counts[at])

"""Groups of exact duplicates: documents whose shingle bags are identical.

Thousands of copies of one page (mirrors, templates, empty-ish files) put
every copy in the same bucket of every band, and n copies mean n(n-1)/2
candidate pairs. simdoc folds each group onto its first member (the
*representative*) before banding: only representatives enter the buckets,
and the pairs inside a group (set Jaccard 1, bag Jaccard 1/2, estimate 1)
are produced on the fly when printed, without being held in memory.

Two documents are in one group when their shingle sets *and* the counts of
each shingle are equal, so that both the set and the bag measure are known
without computing them. That is decided by comparing their rows, except for
documents whose text is known to be byte-identical (equal BLAKE2b digests,
see ``same_text``): those have equal rows by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from simdoc.lsh import band_keys
from simdoc.memory import prefetch
from simdoc.shingling import ShingleSets

COMPARE_ITEMS = 1 << 22  # shingles of candidate copies read into memory at a time
PREFETCH_ITEMS = 1 << 28  # shingles of candidate copies asked for ahead (1 GiB of hashes)


def representatives(
    sets: ShingleSets, signatures: np.ndarray, same_text: Callable[[int], Hashable | None] | None = None
) -> np.ndarray:
    """rep[i]: the smallest document whose shingle bag equals document i's.

    Parameters
    ----------
    sets : ShingleSets
        Rows in document order.
    signatures : ndarray of shape (n_docs, num_perm), dtype uint32
        Equal bags have equal signatures, so only documents whose signatures
        hash alike are compared.
    same_text : callable, optional
        ``same_text(i)``: an identity of document i's text (None if unknown)
        such that documents with equal identities have identical text, read
        the same way, such as a cryptographic digest of the file's bytes and
        how its name says to read it. Of candidates sharing an identity only
        the first one's row is read and compared. At 10^6 documents that
        leaves 32,754 of 62,428 rows to read (the others are byte-identical
        files): 3.3-4.2 s -> 2.1 s with the rows on disk. Called only for
        candidates (documents sharing a signature with another).

    Returns
    -------
    ndarray of shape (n_docs,), dtype int64
        ``rep[i] == i`` for a document with no earlier copy, and for every
        document with no shingles (those are never grouped).
    """
    n = sets.n_docs
    rep = np.arange(n, dtype=np.int64)
    indptr = np.asarray(sets.indptr)
    sizes = np.diff(indptr)
    docs = np.flatnonzero(sizes > 0)
    if len(docs) < 2:
        return rep
    # Keys of every row, then of the non-empty ones: cheaper than first copying those
    # rows out of a mapped matrix (512 MB at 10^6 documents).
    key = band_keys(signatures, 1, signatures.shape[1])[0][docs]
    order = np.argsort(key, kind="stable")
    sk = key[order]
    starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
    ends = np.append(starts[1:], len(sk))
    several = ends - starts > 1
    if not several.any():
        return rep
    groups = [np.sort(docs[order[s:e]]) for s, e in zip(starts[several], ends[several])]
    if same_text is not None:
        # Followers point at the first member with their text; once the texts' first members
        # are grouped, rep[rep] sends each follower where its first member went.
        groups = [g for g in (_first_of_each_text(g, same_text, rep) for g in groups) if len(g) > 1]
        if not groups:
            return rep[rep]
    # Start reading the candidates' rows now: the counts were written past the page
    # cache (simdoc.direct) and come from disk. At most PREFETCH_ITEMS shingles' worth,
    # so that thousands of copies of a large page do not flood the page cache.
    candidates = np.sort(np.concatenate(groups))
    candidates = candidates[: int(np.searchsorted(np.cumsum(sizes[candidates]), PREFETCH_ITEMS, side="right"))]
    for arr in (sets.counts, sets.data):
        prefetch(arr, indptr[candidates], indptr[candidates + 1])
    # Groups of candidates are compared in memory, many small groups per read of their rows.
    batch: list[np.ndarray] = []
    held = 0

    def compare_batch() -> None:
        nonlocal held
        local = sets.take(np.concatenate(batch))
        at = 0
        for members in batch:
            for doc, first in _copies_in(local.slice(at, at + len(members)), members):
                rep[doc] = first
            at += len(members)
        batch.clear()
        held = 0

    for members in groups:
        items = int(sizes[members].sum())
        if items > COMPARE_ITEMS:
            for doc, first in copies_among(sets, members):
                rep[doc] = first
            continue
        batch.append(members)
        held += items
        if held >= COMPARE_ITEMS:
            compare_batch()
    if batch:
        compare_batch()
    return rep[rep] if same_text is not None else rep


def _first_of_each_text(members: np.ndarray, same_text: Callable, rep: np.ndarray) -> np.ndarray:
    """The members (sorted) that are the first with their text; rep[m] = that first for the others."""
    first: dict = {}
    out = []
    for m in members.tolist():
        text = same_text(m)
        if text is None:
            out.append(m)
            continue
        f = first.setdefault(text, m)
        if f == m:
            out.append(m)
        else:
            rep[m] = f
    return np.asarray(out, dtype=np.int64)


def copies_among(sets: ShingleSets, members: np.ndarray) -> list[tuple[int, int]]:
    """(document, its first equal member) for every member that copies an earlier one.

    ``members`` are candidates for being copies (equal signature hashes),
    sorted; their shingle rows and counts are compared exactly. Rows are
    read into memory a chunk at a time with :meth:`ShingleSets.take`, never
    through the file's map, so a group of 10^5 copies costs little memory.
    """
    sizes = np.diff(np.asarray(sets.indptr))
    members = np.asarray(members, dtype=np.int64)
    if int(sizes[members].sum()) <= COMPARE_ITEMS:  # the usual case: a few copies, read at once
        return _copies_in(sets.take(members), members)
    out = []
    remaining = [int(m) for m in members]
    while remaining:
        first = remaining[0]
        head = sets.take(np.array([first]))
        row, cnt = head.row(0), head.row_counts(0)
        rest = [m for m in remaining[1:] if sizes[m] != len(row)]
        same_size = [m for m in remaining[1:] if sizes[m] == len(row)]
        step = max(1, COMPARE_ITEMS // max(len(row), 1))
        for c in range(0, len(same_size), step):
            chunk = same_size[c : c + step]
            local = sets.take(np.array(chunk, dtype=np.int64))
            for k, m in enumerate(chunk):
                if np.array_equal(local.row(k), row) and np.array_equal(local.row_counts(k), cnt):
                    out.append((m, first))
                else:
                    rest.append(m)
        remaining = sorted(rest)
    return out


def _copies_in(local: ShingleSets, members: np.ndarray) -> list[tuple[int, int]]:
    """copies_among for rows already in memory: row i of ``local`` is document members[i]."""
    out = []
    remaining = list(range(len(members)))
    while remaining:
        first = remaining[0]
        row, cnt = local.row(first), local.row_counts(first)
        rest = []
        for m in remaining[1:]:
            if np.array_equal(local.row(m), row) and np.array_equal(local.row_counts(m), cnt):
                out.append((int(members[m]), int(members[first])))
            else:
                rest.append(m)
        remaining = rest
    return out


def groups_of(rep: np.ndarray) -> list[np.ndarray]:
    """The groups with at least two members, each sorted, ordered by first member."""
    copies = np.flatnonzero(rep != np.arange(len(rep)))
    if not len(copies):
        return []
    heads = np.unique(rep[copies])
    order = np.argsort(rep, kind="stable")
    sorted_rep = rep[order]
    out = []
    for h in heads:
        lo, hi = np.searchsorted(sorted_rep, h, "left"), np.searchsorted(sorted_rep, h, "right")
        out.append(np.sort(order[lo:hi]))
    return out

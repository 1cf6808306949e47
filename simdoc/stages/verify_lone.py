"""Verification's lone pairs: two plain files that no other candidate pair needs, compared with no set held.

Most candidate pairs of a corpus of near-duplicates are alone in their
component of the candidate graph (c100k: 16,163 of its 26,729 pairs, 32,326
of the 43,833 documents read again): neither document is needed by another
pair, so a sorted 64-bit set (:mod:`simdoc.stages.verify`'s rows held) would
be made for one merge. Here both files are read again together
(:func:`simdoc.corpus.plain.read_again_into`: their digests checked) and each
pair is compared by one kernel call that counts both documents' window hashes
in one table (:func:`simdoc.bytesign.pair_sums_spans`): the same integers as
the sorted rows' merge, so the same Jaccards, with no sort.

A pair the kernel declines (a character its table cannot map, word shingles)
is left to the sorted way, as is a pair with a file in UTF-16 or UTF-32 (its
text not UTF-8: read the general way there); a file that cannot be read as
indexed makes its pair not compared, as there.
"""

from __future__ import annotations

import numpy as np

from simdoc.bytesign import pair_sums_spans
from simdoc.corpus.plain import WIDE, read_again_into
from simdoc.corpus.streaming import PIECE_CHARS
from simdoc.similarity import jaccards_of_sums
from simdoc.stages.reread import DocumentReader


def lone_pairs(ol: np.ndarray, orr: np.ndarray, how: np.ndarray, whole: int, sizes: np.ndarray) -> np.ndarray:
    """Which pairs (``ol[i]``, ``orr[i]``) of a unit of whole components are alone in theirs (each
    document in no other pair), of two files read whole when indexed (``how`` is ``whole``, as
    the docs table's columns say) and short enough to be shingled whole (``sizes``: bytes)."""
    docs, counts = np.unique(np.concatenate([ol, orr]), return_counts=True)
    once = (counts[np.searchsorted(docs, ol)] == 1) & (counts[np.searchsorted(docs, orr)] == 1)
    plain = (np.asarray(how[ol]) == whole) & (np.asarray(how[orr]) == whole)
    short = (np.asarray(sizes[ol]) <= PIECE_CHARS) & (np.asarray(sizes[orr]) <= PIECE_CHARS)
    return once & (ol != orr) & plain & short


def compare_lone(
    reader: DocumentReader, ol: np.ndarray, orr: np.ndarray, chunk_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(set, bag, ok, done, unread documents) of lone pairs of plain files, read about
    ``chunk_bytes`` of files at a time; ``done`` False: the kernel declined the pair (its
    set, bag and ok are to be made the sorted way)."""
    m = len(ol)
    sums = np.zeros((m, 5), np.int64)
    ok, done = np.ones(m, dtype=bool), np.zeros(m, dtype=bool)
    unread: list[int] = []
    table = reader.table
    size = np.asarray(table.columns["file_size"], np.int64)
    ends = np.cumsum(size[ol] + size[orr])
    start = 0
    while start < m:
        before = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + chunk_bytes, side="right")))
        docs = np.stack([ol[start:stop], orr[start:stop]], axis=1).reshape(-1)  # a, b, a, b...
        buf, s, e = read_again_into(
            reader.openable(table.places(docs)), size[docs].tolist(), np.asarray(table.digest[docs]), reader.follow_symlinks
        )
        read = (s >= 0).reshape(-1, 2)
        both = read.all(axis=1)
        unread.extend(docs[s == -1].tolist())
        wide = (s == WIDE).reshape(-1, 2).any(axis=1) & ~(s == -1).reshape(-1, 2).any(axis=1)  # left to the sorted way
        for d in docs.reshape(-1, 2)[~wide].reshape(-1).tolist():  # (those of the others are counted where they are read)
            reader.reads[d] += 1
        at = np.flatnonzero(both)
        got, handled = pair_sums_spans(buf, np.stack([s[2 * at], s[2 * at + 1]], 1).reshape(-1), np.stack([e[2 * at], e[2 * at + 1]], 1).reshape(-1), reader.spec)
        sums[start + at] = got
        done[start + at[handled]] = True
        gone = start + np.flatnonzero(~both & ~wide)
        ok[gone], done[gone] = False, True
        start = stop
    set_j, bag_j = jaccards_of_sums(sums)
    return set_j, bag_j, ok, done, unread

"""Verification reads a chunk's documents in one batch and merges its pairs in one kernel call
(issue 32): the Jaccards are those of the sets compared one pair at a time, whatever the
chunk size, and a document shared by many pairs is read once while the budget holds it."""

from __future__ import annotations

import numpy as np
import pytest

import simdoc
import simdoc.stages.verify as verify
from simdoc.shingling import shingle_texts
from simdoc.similarity import jaccard, bag_jaccard
from simdoc.stages.reread import reader_of
from simdoc.store.loaded import open_index

from test_verify_progress import _templated


@pytest.mark.parametrize("chunk_bytes", [1, 5000, verify.CHUNK_BYTES])
def test_chunks_give_the_jaccards_of_each_pair_and_read_each_document_once(tmp_path, monkeypatch, chunk_bytes):
    _templated(tmp_path / "c", 12)
    (tmp_path / "c" / "empty.txt").write_text("", encoding="utf-8")  # an empty set, in pairs too
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    n = len(loaded.docs())
    # A star (document 0 with every other), a chain, and each document with the empty one.
    empty = loaded.docs().ids.index("empty.txt")
    left = np.array([0] * (n - 1) + list(range(1, n - 1)) + [d for d in range(n) if d != empty], np.int64)
    right = np.array(list(range(1, n)) + list(range(2, n)) + [empty] * (n - 1), np.int64)
    monkeypatch.setattr(verify, "CHUNK_BYTES", chunk_bytes)
    reader = reader_of(loaded)
    got = verify.verify_pairs(reader, left, right, jobs=1)
    assert got.ok.all() and not got.stale and not got.gone
    assert set(reader.reads.values()) == {1}  # one component, within the budget: read once each
    texts = [(tmp_path / "c" / name).read_text(encoding="utf-8") for name in loaded.docs().ids]
    sets = shingle_texts(texts, loaded.spec(), form="sets64")
    for p, (a, b) in enumerate(zip(left.tolist(), right.tolist())):
        bag_a = [v for v, c in zip(sets.row(a).tolist(), sets.row_counts(a).tolist()) for _ in range(c)]
        bag_b = [v for v, c in zip(sets.row(b).tolist(), sets.row_counts(b).tolist()) for _ in range(c)]
        assert got.set_jaccard[p] == jaccard(set(bag_a), set(bag_b))
        assert got.bag_jaccard[p] == bag_jaccard(bag_a, bag_b)

"""Candidates ruled out by their MinHash estimate before verification (simdoc.stages.results.Verifier.jaccard):
exactly those :func:`simdoc.similarity.estimate_rules_out` names when given every candidate's documents' bins,
though only the documents of pairs with a low estimate have their bins counted."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.stages.results as results
from simdoc.similarity import estimate_rules_out
from simdoc.stages.results import Scoring, Verifier, filled_bins
from simdoc.stages.verify import Verified
from simdoc.store.verified import VerifiedPairs

NUM_PERM = 16


@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from(["oph", "classic"]), st.sampled_from([0.5, 0.8, 0.9]))
def test_the_pairs_verified_are_those_the_estimate_does_not_rule_out(data, scheme, threshold):
    n = data.draw(st.integers(2, 8))
    # Rows of few distinct values are not dense (bins borrowed by densification).
    rows = [data.draw(st.lists(st.integers(0, data.draw(st.sampled_from([3, 1000]))), min_size=NUM_PERM, max_size=NUM_PERM)) for _ in range(n)]
    signatures = np.array(rows, dtype=np.uint32)
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=30))
    left = np.array([a for a, _ in pairs], np.int64)
    right = np.array([b for _, b in pairs], np.int64)
    est = np.array(data.draw(st.lists(st.integers(0, NUM_PERM), min_size=len(pairs), max_size=len(pairs)))) / NUM_PERM
    ident = np.arange(16 * n, dtype=np.uint8).reshape(n, 16)
    verified = []

    def fake_verify(reader, l, r, *args, **kwargs):
        verified.extend(zip(l.tolist(), r.tolist()))
        m = len(l)
        return Verified(np.ones(m), np.ones(m), np.ones(m, bool), set(), set())

    monkey = results.verify_pairs
    results.verify_pairs = fake_verify
    try:
        jac, ok = Verifier(None, VerifiedPairs(), ident, NUM_PERM, scheme).jaccard(signatures, left, right, est, Scoring(threshold))
    finally:
        results.verify_pairs = monkey
    dense = filled_bins(signatures, np.arange(n)) == NUM_PERM
    out = estimate_rules_out(est, dense[left], dense[right], NUM_PERM, scheme, threshold)
    assert sorted(verified) == sorted(p for p, o in zip(pairs, out.tolist()) if not o)
    assert ok.all() and np.array_equal(jac, np.where(out, 0.0, 1.0))

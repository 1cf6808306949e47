"""similarity: exact set and bag Jaccard (MMDS examples), pair functions, and the estimate's rule-out bound."""

import numpy as np
import pytest
from conftest import random_sets
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.similarity as similarity
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.similarity import (
    bag_jaccard,
    jaccard,
    pair_estimates,
    pair_jaccard,
)

S1, S2, S3, S4 = {"a", "d"}, {"c"}, {"b", "d", "e"}, {"a", "c", "d"}


def test_mmds_jaccard_examples():
    assert jaccard(S1, S3) == pytest.approx(1 / 4)
    assert jaccard(S1, S4) == pytest.approx(2 / 3)
    assert jaccard(S1, S2) == 0.0


def test_mmds_jaccard_examples_on_csr_rows():
    # Rows a..e numbered 0..4 (MMDS Fig. 3.2).
    sets = ShingleSets.from_sets([{0, 3}, {2}, {1, 3, 4}, {0, 2, 3}])
    got = pair_jaccard(sets, np.array([0, 0, 0]), np.array([2, 3, 1]))
    assert got.tolist() == pytest.approx([1 / 4, 2 / 3, 0.0])


def test_mmds_bag_similarity():
    assert bag_jaccard("aaab", "aabbc") == pytest.approx(1 / 3)
    sets = ShingleSets.from_sets([[1, 1, 1, 2], [1, 1, 2, 2, 3]])
    assert pair_jaccard(sets, [0], [1], "bag").tolist() == pytest.approx([1 / 3])
    # Identical bags score 1/2, the maximum.
    assert pair_jaccard(sets, [0], [0], "bag").tolist() == pytest.approx([1 / 2])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=30), min_size=2, max_size=8), st.data())
def test_pair_jaccard_matches_python_sets(rows, data):
    sets = ShingleSets.from_sets(rows)
    n = len(rows)
    left = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20))
    right = data.draw(st.lists(st.integers(0, n - 1), min_size=len(left), max_size=len(left)))
    got = pair_jaccard(sets, np.array(left), np.array(right))
    want = [jaccard(set(rows[i]), set(rows[j])) for i, j in zip(left, right)]
    assert got.tolist() == pytest.approx(want)
    got_bag = pair_jaccard(sets, np.array(left), np.array(right), "bag")
    want_bag = [bag_jaccard(rows[i], rows[j]) for i, j in zip(left, right)]
    assert got_bag.tolist() == pytest.approx(want_bag)


def test_pair_functions_do_not_depend_on_batch_size(monkeypatch):
    rng = np.random.default_rng(11)
    sets = ShingleSets.from_sets(random_sets(rng, 30, 200, universe=500))
    sigs = MinHasher(32, 1).signatures(sets)
    left, right = np.triu_indices(30, 1)
    j1, e1 = pair_jaccard(sets, left, right, "bag"), pair_estimates(sigs, left, right)
    monkeypatch.setattr(similarity, "SIGNATURE_BATCH_PAIRS", 7)
    assert np.array_equal(j1, pair_jaccard(sets, left, right, "bag"))
    assert np.array_equal(e1, pair_estimates(sigs, left, right))


@st.composite
def rows_and_pairs(draw, row):
    """Rows drawn with ``row``, and pairs of row numbers (in any order) as two arrays."""
    rows = draw(st.lists(row, min_size=1, max_size=8))
    pairs = draw(st.lists(st.tuples(st.integers(0, len(rows) - 1), st.integers(0, len(rows) - 1)), min_size=1, max_size=30))
    return rows, np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


@settings(max_examples=100, deadline=None)
@given(rows_and_pairs(st.lists(st.integers(0, 30), max_size=25)))
def test_pair_jaccard_is_aligned_with_pairs_in_any_order(drawn):
    rows, left, right = drawn
    sets = ShingleSets.from_sets(rows)
    wide = ShingleSets(sets.indptr, sets.data.astype(np.uint64), sets.counts)  # verification's 64-bit sets
    for measure, one in (("set", jaccard), ("bag", bag_jaccard)):
        want = [one(rows[a], rows[b]) if (rows[a] or rows[b]) else 0.0 for a, b in zip(left, right)]
        assert pair_jaccard(sets, left, right, measure).tolist() == pytest.approx(want)
        assert pair_jaccard(wide, left, right, measure).tolist() == pytest.approx(want)


# ---------------------------------------------------------------- ruling pairs out by their estimate


def test_min_matches_worked_examples():
    from simdoc.similarity import min_matches

    # Binomial(10, 1/2): P(X <= 0) = 1/1024, P(X <= 1) = 11/1024, P(X <= 2) = 56/1024.
    assert min_matches(10, 0.5, eps=0.05) == 2
    assert min_matches(10, 0.5, eps=0.01) == 1
    assert min_matches(10, 0.5, eps=0.001) == 1
    assert min_matches(10, 0.5, eps=0.0009) == 0
    assert min_matches(128, 1.0) == 128  # equal sets have equal signatures
    assert min_matches(128, 0.8, eps=0.0) == 0  # nothing is ruled out
    # The default at 128 permutations and 0.8: fewer than 73 agreements (0.57).
    assert min_matches(128, 0.8) == 73
    with pytest.raises(ValueError):
        min_matches(128, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 80), st.floats(0.01, 0.99), st.floats(1e-12, 0.5))
def test_min_matches_is_the_binomial_quantile(n, t, eps):
    """Checked against the exact binomial distribution in rational arithmetic."""
    import math
    from fractions import Fraction

    from hypothesis import assume

    from simdoc.similarity import min_matches

    k = min_matches(n, t, eps)
    p = Fraction(t)
    cdf = [Fraction(0)]
    for j in range(n + 1):
        cdf.append(cdf[-1] + math.comb(n, j) * p**j * (1 - p) ** (n - j))
    below, at = float(cdf[k]), float(cdf[k + 1])  # P(X <= k - 1), P(X <= k)
    assume(abs(below - eps) > 1e-9 * eps and abs(at - eps) > 1e-9 * eps)  # not on a rounding edge
    assert below < eps <= at


def test_estimate_rules_out_only_where_the_bound_holds():
    from simdoc.similarity import estimate_rules_out

    est = np.array([0.5, 0.56, 0.57, 0.9])  # 64, 72, 73 and 115 of 128 positions
    dense = np.ones(4, dtype=bool)
    assert estimate_rules_out(est, dense, dense, 128, "classic", 0.8).tolist() == [True, True, False, False]
    assert estimate_rules_out(est, dense, dense, 128, "oph", 0.8).tolist() == [True, True, False, False]
    # An OPH signature with a bin filled by densification: no bound, always verified.
    sparse = ~dense
    assert not estimate_rules_out(est, sparse, dense, 128, "oph", 0.8).any()
    assert estimate_rules_out(est, sparse, dense, 128, "classic", 0.8).tolist() == [True, True, False, False]


def test_filled_bins_counts_the_bins_a_document_filled_itself():
    from simdoc.stages.results import filled_bins

    hasher = MinHasher(128, 1)
    sets = ShingleSets.from_sets([range(5), range(5000)])
    counts = filled_bins(hasher.signatures(sets), np.array([0, 1]))
    assert counts[0] <= 5 and counts[1] == 128

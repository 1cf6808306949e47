"""minhash: the hash family, signatures (MMDS example 3.8), and estimates that converge to the exact Jaccard."""

import numpy as np
import pytest
from conftest import random_sets
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import simdoc.minhash as minhash
from simdoc.minhash import MinHasher, signature_matrix, splitmix64
from simdoc.shinglesets import ShingleSets
from simdoc.similarity import (
    estimate_jaccard,
    jaccard,
)


def test_mmds_signature_matrix_example_3_8():
    sets = ShingleSets.from_sets([{0, 3}, {2}, {1, 3, 4}, {0, 2, 3}])
    sig = signature_matrix(sets, [lambda x: (x + 1) % 5, lambda x: (3 * x + 1) % 5])
    assert sig.T.tolist() == [[1, 3, 0, 1], [0, 2, 0, 0]]
    # MMDS: the estimate for SIM(S1, S4) from these two rows is 1, the true value 2/3.
    assert estimate_jaccard(sig[0], sig[3]) == 1.0


def test_family_is_pinned_and_odd():
    h = MinHasher(num_perm=4, seed=1)
    draws = splitmix64(1, 8)
    assert h.a.tolist() == [(d >> 32) | 1 for d in draws[0::2]]
    assert h.b.tolist() == [d >> 32 for d in draws[1::2]]
    # SplitMix64 reference value for seed 1 (first output).
    assert draws[0] == 0x910A2DEC89025CC1
    assert np.all(h.a % 2 == 1)
    assert not np.array_equal(MinHasher(4, seed=2).a, h.a)


def test_each_hash_function_is_a_permutation_on_a_sample():
    h = MinHasher(num_perm=8, seed=3)
    x = np.arange(0, 2**32, 2**32 // 65536, dtype=np.uint64).astype(np.uint32)
    values = h.hash_values(x)
    for row in values:
        assert len(np.unique(row)) == len(x)


def test_empty_set_signature_and_shapes():
    sets = ShingleSets.from_sets([set(), {1, 2}])
    sig = MinHasher(16, 1).signatures(sets)
    assert sig.shape == (2, 16) and sig.dtype == np.uint32
    assert np.all(sig[0] == 0xFFFFFFFF)


def test_bad_parameters():
    from simdoc.errors import UsageError

    with pytest.raises(UsageError):
        MinHasher(num_perm=0)
    with pytest.raises(UsageError):
        MinHasher(seed=-1)


def test_signatures_do_not_depend_on_blocking(monkeypatch):
    rng = np.random.default_rng(5)
    sets = ShingleSets.from_sets(random_sets(rng, 40) + [set()] + random_sets(rng, 3, 3000))
    whole = MinHasher(64, 9).signatures(sets)
    monkeypatch.setattr(minhash, "BLOCK", 37)
    small = MinHasher(64, 9).signatures(sets)
    assert np.array_equal(whole, small)
    parts = np.vstack([MinHasher(64, 9).signatures(sets.slice(i, i + 1)) for i in range(sets.n_docs)])
    assert np.array_equal(whole, parts)


def pair_with_jaccard(rng, inter, union):
    """Two random sets with |A ∩ B| = inter and |A ∪ B| = union."""
    universe = rng.choice(2**32, size=union, replace=False)
    only = union - inter
    a = set(universe[: inter + only // 2].tolist())
    b = set(universe[:inter].tolist()) | set(universe[inter + only // 2 :].tolist())
    return a, b


@pytest.mark.parametrize("inter,union", [(10, 80), (50, 100), (80, 100), (95, 100), (200, 1000)])
def test_estimates_are_unbiased_with_binomial_spread(inter, union):
    rng = np.random.default_rng(inter * 1000 + union)
    j = inter / union
    num_perm, trials = 128, 150
    estimates = []
    for t in range(trials):
        a, b = pair_with_jaccard(rng, inter, union)
        sig = MinHasher(num_perm, seed=t + 1).signatures(ShingleSets.from_sets([a, b]))
        estimates.append(estimate_jaccard(sig[0], sig[1]))
    estimates = np.array(estimates)
    se_mean = np.sqrt(j * (1 - j) / (num_perm * trials))
    assert abs(estimates.mean() - j) < 4 * se_mean
    sd = np.sqrt(j * (1 - j) / num_perm)
    assert 0.75 * sd < estimates.std() < 1.3 * sd


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 400), st.integers(1, 400), st.integers(0, 400), st.sampled_from(["classic", "oph"]))
def test_estimate_within_binomial_error(seed, only_a, only_b, common, scheme):
    # The binomial bound is the classic scheme's (256 independent permutations). One-permutation
    # hashing has that spread only for sets larger than the bins: a smaller union fills a few bins
    # and densification copies their values (the module says so), e.g. a union of 3 whose
    # elements share one bin gives 0 or 1. Its estimate is still unbiased (the test above).
    assume(scheme == "classic" or only_a + only_b + common >= 256)
    rng = np.random.default_rng(seed)
    universe = rng.choice(2**32, size=only_a + only_b + common, replace=False).tolist()
    a = set(universe[: only_a + common])
    b = set(universe[only_a:])
    j = common / (only_a + only_b + common)
    sig = MinHasher(256, seed=seed, scheme=scheme).signatures(ShingleSets.from_sets([a, b]))
    est = estimate_jaccard(sig[0], sig[1])
    assert abs(est - j) <= 5 * np.sqrt(j * (1 - j) / 256) + 2 / 256
    assert jaccard(a, b) == pytest.approx(j)

"""LSH banding: the S-curve, the (b, r) choice, and candidate generation."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.buckets import BucketStats, bucket_order, bucket_pairs, bucket_sizes, iter_candidates
from simdoc.errors import UsageError
from simdoc.lsh import band_keys, candidate_probability, check_bands_rows, choose_bands_rows, s_curve_threshold


def test_s_curve_b20_r5_worked_numbers():
    s = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    want = [0.006, 0.047, 0.186, 0.470, 0.802, 0.975, 0.9996]
    got = candidate_probability(s, 20, 5)
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=0.0006)


def test_threshold_approximation():
    assert s_curve_threshold(16, 4) == pytest.approx(0.5)
    assert s_curve_threshold(20, 5) == pytest.approx((1 / 20) ** (1 / 5))


@settings(max_examples=60, deadline=None)
@given(st.floats(0.3, 0.97), st.sampled_from([64, 128, 200, 256]))
def test_choice_reaches_recall_at_threshold(threshold, num_perm):
    b, r = choose_bands_rows(threshold, num_perm)
    assert b * r <= num_perm
    assert candidate_probability(threshold, b, r) >= 0.95


def test_choice_beats_equal_weight_midpoint_at_threshold():
    # The brief: peers' midpoint-on-threshold choices catch 31-55% at T; we want >= 95%.
    b, r = choose_bands_rows(0.8, 128)
    assert (b, r) == (13, 7)
    assert candidate_probability(0.8, b, r) >= 0.95
    assert candidate_probability(0.5, b, r) < 0.12


def test_choice_when_recall_is_unreachable_returns_best_possible():
    b, r = choose_bands_rows(0.01, 16)
    assert (b, r) == (16, 1)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.0, 1.0, exclude_min=True, allow_subnormal=True),
    st.one_of(st.integers(1, 65536), st.sampled_from([1, 16, 128, 512, 2048, 65536])),
)
def test_every_valid_threshold_and_num_perm_gets_a_banding(threshold, num_perm):
    # Issue 17.5: tiny thresholds made threshold**rows so small that the bands needed
    # overflowed to infinity. Every value the help calls valid must give an answer.
    b, r = choose_bands_rows(threshold, num_perm)
    assert isinstance(b, int) and isinstance(r, int)
    assert b >= 1 and r >= 1 and b * r <= num_perm
    p = candidate_probability(threshold, b, r)
    if p < 0.95 - 1e-9:
        # The recall cannot be reached: one row per band is the most any banding catches.
        assert (b, r) == (num_perm, 1)
        assert p >= candidate_probability(threshold, num_perm // 2, 2) - 1e-12


@pytest.mark.parametrize("threshold", [0.001, 0.005, 0.01, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.99, 1.0])
@pytest.mark.parametrize("num_perm", [16, 128, 512, 2048])
def test_low_thresholds_choose_without_overflow(threshold, num_perm):
    b, r = choose_bands_rows(threshold, num_perm)
    assert b * r <= num_perm


def test_the_search_ends_at_the_first_row_count_that_cannot_reach_the_recall():
    # 0.15 with 512 permutations: two rows reach 0.95 with 132 bands; three rows would need more than 170.
    assert choose_bands_rows(0.15, 512) == (132, 2)
    assert choose_bands_rows(5e-324, 65536) == (65536, 1)


def test_bands_rows_validation():
    with pytest.raises(UsageError, match="larger than --num-perm 128"):
        check_bands_rows(30, 5, 128)
    check_bands_rows(32, 4, 128)
    with pytest.raises(UsageError):
        choose_bands_rows(0.0, 128)
    with pytest.raises(UsageError):
        choose_bands_rows(1.2, 128)


def brute_candidates(sig, bands, rows, eligible):
    out = set()
    n = sig.shape[0]
    for i, j in itertools.combinations(range(n), 2):
        if not (eligible[i] and eligible[j]):
            continue
        for t in range(bands):
            if np.array_equal(sig[i, t * rows : (t + 1) * rows], sig[j, t * rows : (t + 1) * rows]):
                out.add((i, j))
                break
    return out


def collect(keys, order, chunk):
    pairs = []
    for left, right in iter_candidates(keys, order, chunk=chunk):
        assert np.all(left < right)
        pairs.extend(zip(left.tolist(), right.tolist()))
    return pairs


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 40), st.integers(1, 6), st.integers(1, 4), st.integers(1, 50))
def test_candidates_equal_brute_force_and_are_unique(seed, n, bands, rows, chunk):
    rng = np.random.default_rng(seed)
    # Few distinct values so that bands collide often.
    sig = rng.integers(0, 3, size=(n, bands * rows + 1)).astype(np.uint32)
    eligible = rng.random(n) > 0.2
    keys = band_keys(sig, bands, rows)
    order = bucket_order(keys, eligible)
    # Bands sorted on threads come out the same (ties keep document order).
    assert np.array_equal(bucket_order(keys, eligible, threads=3), order)
    pairs = collect(keys, order, chunk)
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == brute_candidates(sig, bands, rows, eligible)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 30))
def test_identical_documents_are_always_candidates(seed, n):
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 2**32, size=(n, 64), dtype=np.uint64).astype(np.uint32)
    i, j = sorted(rng.choice(n, 2, replace=False).tolist())
    sig[j] = sig[i]
    keys = band_keys(sig, 8, 8)
    pairs = set(collect(keys, bucket_order(keys, np.ones(n, bool)), 1 << 20))
    assert (i, j) in pairs


def test_big_bucket_streams_in_chunks_and_is_reported():
    n = 300
    sig = np.zeros((n, 8), dtype=np.uint32)  # every document in one bucket per band
    keys = band_keys(sig, 2, 4)
    stats = BucketStats()
    chunks = list(iter_candidates(keys, bucket_order(keys, np.ones(n, bool)), stats, chunk=1000))
    assert max(len(left) for left, _ in chunks) <= 1000 + n
    assert sum(len(left) for left, _ in chunks) == n * (n - 1) // 2 == stats.n_candidates
    assert stats.largest_bucket == n


def test_band_keys_shape_and_equality():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [5, 5, 3, 4]], dtype=np.uint32)
    keys = band_keys(sig, 2, 2)
    assert keys.shape == (2, 3) and keys.dtype == np.uint64
    assert keys[0, 0] == keys[0, 1] and keys[0, 0] != keys[0, 2]
    assert keys[1, 0] == keys[1, 2] and keys[1, 0] != keys[1, 1]
    # Same values in different bands give different keys.
    sig2 = np.array([[7, 7, 7, 7]], dtype=np.uint32)
    k2 = band_keys(sig2, 2, 2)
    assert k2[0, 0] != k2[1, 0]


def test_bucket_pairs_counts_the_pairs_inside_runs_of_equal_keys():
    assert bucket_pairs(np.array([], np.uint64)) == 0
    assert bucket_pairs(np.array([7], np.uint64)) == 0
    # Runs of 3, 1, 2 and 4: 3 + 0 + 1 + 6 pairs.
    assert bucket_pairs(np.array([1, 1, 1, 2, 5, 5, 9, 9, 9, 9], np.uint64)) == 10


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 40), st.integers(1, 5))
def test_bucket_order_reports_each_bands_pairs(seed, n, bands):
    """What bucket_order records per band is the number of pairs iter_candidates walks in that band."""
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 3, size=(n, bands * 2)).astype(np.uint32)
    eligible = rng.random(n) > 0.2
    keys = band_keys(sig, bands, 2)
    pairs = np.full(bands, -1, np.int64)
    bucket_order(keys, eligible, threads=2, pairs=pairs)
    for t in range(bands):
        docs = np.flatnonzero(eligible)
        want = sum(1 for i in range(len(docs)) for j in range(i + 1, len(docs)) if keys[t, docs[i]] == keys[t, docs[j]])
        assert pairs[t] == want


def test_bucket_sizes_of_a_band_worked_example(monkeypatch):
    import simdoc.buckets

    assert bucket_sizes(np.array([], np.uint64)) == (0, 0, 0)
    assert bucket_sizes(np.array([7], np.uint64)) == (0, 1, 0)
    assert bucket_sizes(np.array([3, 7, 8], np.uint64)) == (0, 1, 0)
    monkeypatch.setattr(simdoc.buckets, "LARGE_BUCKET", 3)
    # Runs of 3, 1, 2 and 4: 3 + 0 + 1 + 6 pairs, the largest 4, two of 3 or more.
    assert bucket_sizes(np.array([1, 1, 1, 2, 5, 5, 9, 9, 9, 9], np.uint64)) == (10, 4, 2)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 5), st.integers(1, 4), st.integers(1, 6))
def test_the_index_stages_bucket_sizes_are_what_a_walk_of_the_buckets_counts(seed, n, bands, values, large):
    """A --new night with nothing new reads no bucket: it says the largest buckets from the sizes
    the index stage kept (bucket_sizes per band, added over slices no bucket straddles, as a Dask
    run counts them). They are what a walk of the buckets (iter_candidates) counts."""
    import simdoc.buckets

    rng = np.random.default_rng(seed)
    sig = rng.integers(0, values, size=(n, bands * 2)).astype(np.uint32)
    eligible = rng.random(n) > 0.2
    keys = band_keys(sig, bands, 2)
    order = bucket_order(keys, eligible)
    old = simdoc.buckets.LARGE_BUCKET
    simdoc.buckets.LARGE_BUCKET = large
    try:
        walked = BucketStats()
        for left, _ in iter_candidates(keys, order, walked, touching=np.zeros(n, bool)):
            assert not len(left)
        sizes = np.array([bucket_sizes(keys[t][order[t]]) for t in range(bands)]).reshape(bands, 3)
        # The same, a band cut into slices between buckets (a Dask run's key ranges).
        for t in range(bands):
            sk = keys[t][order[t]]
            cuts = sorted(set(rng.integers(0, len(sk) + 1, size=3).tolist()) | {0, len(sk)})
            cuts = [c for c in cuts if c in (0, len(sk)) or sk[c] != sk[c - 1]]
            parts = [bucket_sizes(sk[a:b]) for a, b in zip(cuts, cuts[1:])]
            assert (sum(p[0] for p in parts), max((p[1] for p in parts), default=0), sum(p[2] for p in parts)) == tuple(sizes[t])
    finally:
        simdoc.buckets.LARGE_BUCKET = old
    kept = BucketStats.of_bands(sizes[:, 1].tolist(), sizes[:, 2].tolist(), int(eligible.sum()))
    assert kept == walked
    assert sizes[:, 0].tolist() == [bucket_pairs(keys[t][order[t]]) for t in range(bands)]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5), max_size=300))
def test_stable_order_is_numpys_stable_argsort(keys):
    """A band's bucket order by the default sort, its ties put back in position order: exactly
    np.argsort(kind="stable"), and the keys in that order."""
    from simdoc.lsh import stable_order

    band = np.array(keys, dtype=np.uint64)
    order, ordered = stable_order(band)
    want = np.argsort(band, kind="stable")
    assert order.dtype == want.dtype and np.array_equal(order, want)
    assert np.array_equal(ordered, band[want])

"""The candidates of a band are found from its shared buckets only, and the pages of the earlier
bands' keys they are checked against are let go band by band (issue 29).

At 10^7 documents and 13 bands the main process held, while it scored, ~0.6 GB
of arrays a position of the band (most of them in buckets of one) and ~1 GB of
mapped pages of the earlier bands' keys, touched at random by the check that a
pair is yielded in its first band only: 2,170 MB in all (target: 2 GB).
"""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import buckets as buckets_module
from simdoc.buckets import BucketStats, bucket_order, iter_candidates, pairs_in_runs


def _every_position(keys, buckets, stats, chunk):
    """The candidates as iter_candidates made them before (arrays over every position of a band)."""
    for t in range(keys.shape[0]):
        order = np.asarray(buckets[t])
        if len(order) < 2:
            continue
        sk = keys[t][order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        ends = np.append(starts[1:], len(order))
        sizes = ends - starts
        biggest = int(sizes.max())
        if biggest > stats.largest_bucket:
            stats.largest_bucket, stats.largest_bucket_band = biggest, t
        stats.large_buckets += int(np.count_nonzero(sizes >= buckets_module.LARGE_BUCKET))
        if biggest < 2:
            continue
        after = np.repeat(ends, sizes) - np.arange(len(order)) - 1
        cum = np.cumsum(after)
        done = p0 = 0
        while done < int(cum[-1]):
            p1 = max(int(np.searchsorted(cum, done + chunk, side="right")), p0 + 1)
            firsts, seconds = pairs_in_runs(after, p0, p1)
            a, b = order[firsts], order[seconds]
            left, right = np.minimum(a, b), np.maximum(a, b)
            keep = np.ones(len(left), dtype=bool)
            for u in range(t):
                keep &= keys[u][left] != keys[u][right]
            stats.n_candidates += int(keep.sum())
            if keep.any():
                yield left[keep], right[keep]
            done += len(firsts)
            p0 = p1


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 60), st.integers(1, 5), st.integers(1, 6), st.integers(1, 40))
def test_the_candidates_from_shared_buckets_are_those_from_every_position_chunk_for_chunk(seed, n, bands, values, chunk):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, values, size=(bands, n)).astype(np.uint64)
    eligible = rng.random(n) > 0.2
    buckets = bucket_order(keys, eligible)
    got_stats, want_stats = BucketStats(), BucketStats()
    got = [(a.tolist(), b.tolist()) for a, b in iter_candidates(keys, buckets, got_stats, chunk=chunk)]
    want = [(a.tolist(), b.tolist()) for a, b in _every_position(keys, buckets, want_stats, chunk)]
    assert got == want
    assert got_stats == want_stats


def _keys_with_pairs_in_the_last_band(tmp_path, n: int, bands: int):
    """Mapped keys and buckets: distinct keys everywhere but in the last band, where documents
    2i and 2i + 1 share one (n / 2 pairs spread over every page of the earlier bands' keys)."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**63, size=(bands, n), dtype=np.uint64)
    keys[-1] = np.arange(n, dtype=np.uint64) // 2
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "b.npy", np.argsort(keys, axis=1, kind="stable"))
    return np.load(tmp_path / "k.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r")


def _rss_file_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="RssFile is Linux's")
def test_the_earlier_bands_keys_checked_at_random_do_not_stay_resident(tmp_path):
    n, bands = 1 << 20, 4  # 8 MB of keys a band
    keys, buckets = _keys_with_pairs_in_the_last_band(tmp_path, n, bands)
    before = _rss_file_kb()
    grown, pairs = 0, 0
    for left, _ in iter_candidates(keys, buckets):
        pairs += len(left)
        grown = max(grown, _rss_file_kb() - before)
    assert pairs == n // 2
    # kB: the last band's keys and buckets and the three earlier bands' keys (~40 MB) stayed
    # resident as its pairs were checked; now at most about one band's.
    assert grown < 12 << 10, grown


def test_a_band_of_few_shared_buckets_holds_no_array_a_position(tmp_path):
    n, bands = 1 << 20, 2
    keys, buckets = _keys_with_pairs_in_the_last_band(tmp_path, n, bands)
    keys = np.array(keys)
    keys[-1] = np.arange(n, dtype=np.uint64)
    keys[-1, :100] = 7  # one bucket of 100 documents, the rest alone
    buckets = np.argsort(keys, axis=1, kind="stable")
    tracemalloc.start()
    try:
        pairs = sum(len(left) for left, _ in iter_candidates(keys, buckets))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert pairs == 100 * 99 // 2
    # The band's keys in bucket order (8 MB) and two masks; with ~8 arrays of n int64, ~70 MB.
    assert peak < 24 << 20, peak

"""reports.stats: what an index holds, bucket sizes and the stats report."""

from __future__ import annotations

import numpy as np
from conftest import TEXT_A, TEXT_C, write

from simdoc.reports.stats import (
    BucketSummary,
    IndexStats,
    LargeBucket,
    format_stats,
    index_stats,
    size_histogram,
    summarise_buckets,
)
from simdoc.shingling import normalise, shingle_texts
from simdoc.stages.pairs import find_pairs
from simdoc.store.loaded import open_index


def test_size_histogram_bins():
    assert size_histogram(np.array([1, 1, 2, 3, 4, 5, 8, 9, 16, 17, 1000])) == (
        (1, 1, 2),
        (2, 2, 1),
        (3, 4, 2),
        (5, 8, 2),
        (9, 16, 2),
        (17, 32, 1),
        (513, 1024, 1),
    )
    assert size_histogram(np.array([], dtype=np.int64)) == ()


def test_summarise_buckets_by_hand():
    # Band 0: keys 7,7,3,7,3 -> buckets {2,4} and {0,1,3}; band 1: all keys differ.
    keys = np.array([[7, 7, 3, 7, 3], [1, 2, 3, 4, 5]], dtype=np.uint64)
    buckets = np.array([[2, 4, 0, 1, 3], [0, 1, 2, 3, 4]], dtype=np.int64)
    n, shared, hist, largest = summarise_buckets(keys, buckets, ["a", "b", "c", "d", "e"], top=5)
    assert (n, shared) == (7, 2)
    assert hist == ((1, 1, 5), (2, 2, 1), (3, 4, 1))
    assert largest == (LargeBucket(3, 0, "a"), LargeBucket(2, 0, "c"))
    assert summarise_buckets(keys, buckets, list("abcde"), top=1)[3] == (LargeBucket(3, 0, "a"),)


def test_the_same_bucket_in_several_bands_is_listed_once():
    # Band 0 and band 2 put {0, 1, 3} together; band 1 puts {0, 1} together and {2, 3, 4}.
    keys = np.array([[7, 7, 3, 7, 3], [1, 1, 2, 2, 2], [5, 5, 6, 5, 9]], dtype=np.uint64)
    buckets = np.array([[2, 4, 0, 1, 3], [0, 1, 2, 3, 4], [0, 1, 3, 2, 4]], dtype=np.int64)
    _, _, _, largest = summarise_buckets(keys, buckets, list("abcde"), top=5)
    assert largest == (
        LargeBucket(3, 0, "a", bands=2),
        LargeBucket(3, 1, "c", bands=1),
        LargeBucket(2, 0, "c", bands=1),
        LargeBucket(2, 1, "a", bands=1),
    )


def test_format_stats():
    stats = IndexStats(
        5, 1, 2, 0, 10.0, 12.5, 40, 62,
        BucketSummary(2, 3, 0.7, True, 7, 2, ((1, 1, 5), (2, 2, 1), (3, 4, 1)), (LargeBucket(3, 0, "a"),)),
    )
    assert format_stats(stats, bar_width=20) == [
        "documents: 5 (1 with no shingles, 2 files skipped: `simdoc stats --skipped` lists them)",
        "shingles per document (with repeats): min 0, median 10, mean 12.50, max 40; 62 in all",
        "banding: bands=2 rows=3 (threshold 0.7)",
        "buckets: 7 in 2 bands, 2 shared by two or more documents",
        "bucket sizes (buckets per size, bars on a log scale):",
        "          1         5  ####################",
        "          2         1  ########",  # 20 * log(2) / log(6) = 7.7
        "        3-4         1  ########",
        "largest shared buckets (each once; bands: how many hold the same documents together):",
        "       size      band     bands  sample member",
        "          3         0         1  a",
    ]


def test_format_stats_without_buckets():
    stats = IndexStats(1, 0, 0, 3, 3.0, 3.0, 3, 3)
    assert format_stats(stats)[-1].startswith("buckets: none yet")


def test_index_stats_of_a_built_index(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    write(corpus / "empty.txt", "  \n")
    find_pairs(corpus, tmp_path / "idx", threshold=0.6, jobs=1)
    stats = index_stats(open_index(tmp_path / "idx"), top=3)
    # Shingles with repeats (the index keeps no sets to count distinct ones in): one per 5-character window.
    sizes = np.array([max(len(normalise(t)) - 4, 0) for t in (TEXT_A, TEXT_A, TEXT_C, "")])
    assert sizes.tolist() == [int(shingle_texts([t]).counts.sum()) for t in (TEXT_A, TEXT_A, TEXT_C, "")]
    assert sizes.sum() > shingle_texts([TEXT_A, TEXT_A, TEXT_C, ""]).sizes().sum()  # the texts repeat shingles
    assert (stats.n_docs, stats.n_empty, stats.n_skipped) == (4, 1, 0)
    assert (stats.shingles_min, stats.shingles_max, stats.shingles_total) == (0, sizes.max(), sizes.sum())
    assert stats.shingles_median == float(np.median(sizes))
    b = stats.buckets
    assert (b.bands, b.rows, b.current) == (22, 4, True)
    # Every band: {a, b} together, {c} alone; the empty document is in no bucket.
    assert (b.n_buckets, b.n_shared, b.histogram) == (44, 22, ((1, 1, 22), (2, 2, 22)))
    # Issue 17.15: the exact copies a and b (one bucket in every band) are listed once, not once per band.
    assert b.largest == (LargeBucket(2, 0, "a.txt", bands=22, copies=True),)

"""tune (banding report, S-curve) and stats (documents, shingles, buckets)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TEXT_A, TEXT_C, write
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.errors import UsageError
from simdoc.lsh import candidate_probability
from simdoc.reports.tuning import (
    BucketSummary,
    IndexStats,
    LargeBucket,
    format_stats,
    format_tune,
    index_stats,
    render_s_curve,
    size_histogram,
    summarise_buckets,
    tune,
)
from simdoc.shingling import normalise, shingle_texts
from simdoc.stages.pairs import find_pairs
from simdoc.store.loaded import open_index

# ---------------------------------------------------------------- tune


@pytest.mark.parametrize("t, b, r", [(0.5, 23, 3), (0.6, 22, 4), (0.7, 17, 5), (0.8, 13, 7), (0.9, 10, 12)])
def test_tune_chooses_what_index_chooses(t, b, r):
    rep = tune(t, 128)
    assert (rep.bands, rep.rows, rep.explicit) == (b, r, False)
    assert rep.false_negative_rate == pytest.approx(1 - candidate_probability(t, b, r), abs=1e-6)
    assert rep.false_positive_at == pytest.approx(t - 0.2)
    assert rep.false_positive_rate == pytest.approx(candidate_probability(t - 0.2, b, r), abs=1e-6)
    assert rep.recall_reached
    assert rep.midpoint == pytest.approx((1 / b) ** (1 / r), abs=1e-6)


def test_tune_probability_points():
    rep = tune(0.75, 128)
    sims = [s for s, _ in rep.probabilities]
    assert sims == [0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0]
    for s, p in rep.probabilities:
        assert p == pytest.approx(candidate_probability(s, rep.bands, rep.rows), abs=1e-6)
    assert dict(rep.probabilities)[1.0] == 1.0


def test_tune_explicit_bands_rows():
    rep = tune(0.8, 128, bands=20, rows=5)
    assert (rep.bands, rep.rows, rep.explicit) == (20, 5, True)
    assert rep.false_negative_rate == pytest.approx(1 - 0.99964, abs=1e-5)


def test_tune_low_threshold_has_no_false_positive_point():
    rep = tune(0.1, 16)
    assert rep.false_positive_at is None and rep.false_positive_rate is None
    assert not rep.recall_reached  # 16 bands of 1 row give P(0.1) = 0.81 only
    assert "n/a" in format_tune(rep)[3]


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0, exclude_min=True, allow_subnormal=True), st.integers(1, 65536))
def test_tune_reports_every_valid_threshold_and_num_perm(threshold, num_perm):
    rep = tune(threshold, num_perm)
    assert rep.bands * rep.rows <= num_perm
    assert 0.0 <= rep.false_negative_rate <= 1.0
    assert all(0.0 <= p <= 1.0 for _, p in rep.probabilities)
    assert rep.recall_reached or (rep.bands, rep.rows) == (num_perm, 1)
    assert format_tune(rep) and render_s_curve(rep.bands, rep.rows, rep.threshold)


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": 0.8, "bands": 4}, "go together"),
        ({"threshold": 0.8, "bands": 20, "rows": 7}, "larger than --num-perm 128"),
        ({"threshold": 0.8, "num_perm": 0}, "num-perm"),
    ],
)
def test_tune_errors(kw, needle):
    with pytest.raises(UsageError, match=needle):
        tune(**kw)


def test_format_tune():
    assert format_tune(tune(0.8, 128)) == [
        "threshold T=0.8, num_perm=128: bands b=13, rows r=7 (chosen; 91 of 128 signature rows banded)",
        "S-curve midpoint (1/b)^(1/r) = 0.6932",
        "false-negative rate at J=0.8: 0.0469  (1 - P(T): pairs at T that never become candidates)",
        "false-positive rate at J=0.6: 0.3086  (P(T-0.2): pairs there that still become candidates)",
        "",
        "similarity  P(candidate)",
        "      0.10  0.0000",
        "      0.20  0.0002",
        "      0.30  0.0028",
        "      0.40  0.0211",
        "      0.50  0.0969",
        "      0.60  0.3086  <- T-0.2",
        "      0.70  0.6728",
        "      0.80  0.9531  <- T",
        "      0.90  0.9998",
        "      1.00  1.0000",
    ]


def test_s_curve_of_the_identity():
    # b = r = 1: P(s) = s, a straight line; worked out by hand in the comment of each row.
    assert render_s_curve(1, 1, 0.5, width=11, height=3) == [
        " 1.0 |     |  ***",  # s = 0.8 .. 1.0 round to the top row
        " 0.5 |   *****",  # s = 0.3 .. 0.7 (0.5 covers the threshold column)
        " 0.0 +***--+-----",  # s = 0 .. 0.2; '+' where the threshold crosses the axis
        "      0.0 0.4 1.0",  # 0.2, 0.6 and 0.8 would touch a neighbour
        "     T=0.5 ^",  # no room on the right: the label goes left of the marker
    ]


def test_s_curve_shape():
    lines = render_s_curve(13, 7, 0.8)
    assert len(lines) == 11 + 2
    assert all(len(line) <= 6 + 51 for line in lines)
    assert lines[-1] == " " * (6 + 40) + "^ T=0.8"
    assert lines[-2] == "      0.0       0.2       0.4       0.6       0.8     1.0"
    assert lines[0].endswith("*" * 11)  # P = 1 from s = 0.8 on
    assert lines[10].startswith(" 0.0 +" + "*" * 23)  # P rounds to 0 below s = 0.46
    # The curve is monotone: the first '*' of each row moves right going up.
    firsts = [line.index("*") for line in lines[:11]]
    assert firsts == sorted(firsts, reverse=True)


def test_s_curve_without_threshold_and_too_small():
    lines = render_s_curve(20, 5)
    assert len(lines) == 12 and "|" not in "".join(line[6:] for line in lines)
    with pytest.raises(ValueError):
        render_s_curve(20, 5, width=5)


# ---------------------------------------------------------------- stats


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

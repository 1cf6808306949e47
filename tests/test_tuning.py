"""tune (banding report, S-curve) and stats (documents, shingles, buckets)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.errors import UsageError
from simdoc.lsh import candidate_probability
from simdoc.reports.tuning import format_tune, render_s_curve, tune

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



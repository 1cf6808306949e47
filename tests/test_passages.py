"""reports.passages: words, common runs (greedy string tiling) and segments of two texts."""

from __future__ import annotations

import pytest
from conftest import DOC_A, DOC_B
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.errors import UsageError
from simdoc.reports.passages import (
    Segment,
    common_runs,
    document_segments,
    render_plain,
    split_words,
)


def test_split_words_keys_and_spans():
    keys, spans = split_words("«Hello», World — again\n")
    assert keys == ["hello", "world", "—", "again"]
    assert spans == [(0, 8), (9, 14), (15, 16), (17, 22)]
    assert split_words("Hello", lowercase=False)[0] == ["Hello"]


def test_common_runs_find_moved_passages():
    a, _ = split_words(DOC_A)
    b, _ = split_words(DOC_B)
    assert common_runs(a, b, 5) == [(4, 20, 14), (23, 0, 14)]


def test_common_runs_cut_overlapping_runs():
    # "x y z" occurs twice in A but once in B: only one copy can be a passage.
    a = "p q x y z w 1 2 x y z".split()
    b = "p q x y z w".split()
    assert common_runs(a, b, 3) == [(0, 0, 6)]
    # A run that overlaps a longer one keeps its unclaimed part if that is long enough.
    a = "a b c d e f g h".split()
    b = "a b c d e f x c d e f g h".split()
    assert common_runs(a, b, 2) == [(0, 0, 6), (6, 11, 2)]


def test_common_runs_min_words():
    a = "one two three four".split()
    assert common_runs(a, a, 5) == []
    assert common_runs(a, a, 4) == [(0, 0, 4)]
    assert common_runs(a, a, 1) == [(0, 0, 4)]
    with pytest.raises(UsageError):
        common_runs(a, a, 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcd"), max_size=40),
    st.lists(st.sampled_from("abcd"), max_size=40),
    st.integers(1, 4),
)
def test_common_runs_are_common_and_disjoint(a, b, m):
    runs = common_runs(a, b, m)
    used_a, used_b = set(), set()
    for i, j, n in runs:
        assert n >= m
        assert a[i : i + n] == b[j : j + n]
        span_a, span_b = set(range(i, i + n)), set(range(j, j + n))
        assert not (span_a & used_a) and not (span_b & used_b)
        used_a |= span_a
        used_b |= span_b
    assert runs == sorted(runs)


def test_segments_and_plain_rendering():
    text = " ".join(f"w{i}" for i in range(30))
    _, spans = split_words(text)
    segs = document_segments(text, spans, [(20, 26, 2), (5, 8, 1)], context=2)
    assert segs == [
        Segment("own", None, "", 3, "w3 w4"),
        Segment("shared", 1, "w5 w6 w7"),
        Segment("own", None, "w8 w9", 8, "w18 w19"),
        Segment("shared", 2, "w20 w21", 2, "w24 w25"),
        Segment("own", None, "w26 w27", 2, ""),
    ]
    assert render_plain(segs) == (
        "(... 3 words ...) w3 w4 [[1: w5 w6 w7]] w8 w9 (... 8 words ...) w18 w19 "
        "[[2: w20 w21 (... 2 words ...) w24 w25]] w26 w27 (... 2 words ...)"
    )
    full = document_segments(text, spans, [(20, 26, 2), (5, 8, 1)], context=None)
    assert render_plain(full) == (
        "w0 w1 w2 w3 w4 [[1: w5 w6 w7]] w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 "
        "[[2: w20 w21 w22 w23 w24 w25]] w26 w27 w28 w29"
    )


def test_segments_without_passages_keep_the_opening():
    text = "a b c d e f g"
    _, spans = split_words(text)
    assert render_plain(document_segments(text, spans, [], context=2)) == "a b c d (... 3 words ...)"
    assert render_plain(document_segments(text, spans, [], context=5)) == "a b c d e f g"


def test_segments_keep_the_original_words():
    text = "Hello,   WORLD\nagain"
    _, spans = split_words(text)
    assert render_plain(document_segments(text, spans, [(0, 2, 1)], None)) == "[[1: Hello, WORLD]] again"

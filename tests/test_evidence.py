"""Evidence for one pair: shingle numbers, shared passages, display segments."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import write
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.errors import UsageError
from simdoc.reports.evidence import (
    Segment,
    common_runs,
    document_segments,
    pair_evidence,
    render_plain,
    resolve_doc,
    shingle_overlap,
    split_words,
)
from simdoc.shingling import ShingleSets, normalise
from simdoc.similarity import bag_jaccard, jaccard
from simdoc.stages.pairs import find_pairs
from simdoc.store.loaded import open_index

P1 = "the harbour lantern festival returns to Port Ellery on the first Saturday of August"
P2 = "stalls open at noon and the lantern parade leaves the old quay at nine"
DOC_A = f"Header of site A. {P1}. Something only in A here. {P2}.\n"
DOC_B = f"{P2}! Totally different words in B now.\n\n{P1}, footer.\n"

# ---------------------------------------------------------------- shingle numbers


def test_overlap_worked_example():
    sets = ShingleSets.from_sets([[1, 1, 2, 3], [2, 3, 4, 5, 6, 7]])
    o = shingle_overlap(sets, 0, 1)
    assert (o.n_a, o.n_b, o.n_common, o.n_union) == (3, 6, 2, 7)
    assert o.set_jaccard == 2 / 7
    assert o.bag_jaccard == 2 / (4 + 6)  # the bag {1,1,2,3} has 4 elements
    assert (o.containment_a, o.containment_b) == (2 / 3, 2 / 6)


def test_overlap_of_empty_rows():
    o = shingle_overlap(ShingleSets.from_sets([[], []]), 0, 1)
    assert (o.set_jaccard, o.bag_jaccard, o.containment_a, o.containment_b) == (0.0, 0.0, 0.0, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.lists(st.integers(0, 40), max_size=30))
def test_overlap_matches_reference_functions(a, b):
    o = shingle_overlap(ShingleSets.from_sets([a, b]), 0, 1)
    assert o.set_jaccard == pytest.approx(jaccard(set(a), set(b)))
    assert o.bag_jaccard == pytest.approx(bag_jaccard(a, b))
    common = len(set(a) & set(b))
    assert o.containment_a == (common / len(set(a)) if a else 0.0)
    assert o.containment_b == (common / len(set(b)) if b else 0.0)


# ---------------------------------------------------------------- passages


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


# ---------------------------------------------------------------- segments


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


# ---------------------------------------------------------------- one pair of an index


@pytest.fixture
def pair_index(tmp_path):
    corpus = tmp_path / "corpus"
    write(corpus / "a.txt", DOC_A)
    write(corpus / "sub" / "b.txt", DOC_B)
    write(corpus / "c.txt", "nothing in common with the others, just kelp and gulls\n")
    idx = tmp_path / "idx"
    find_pairs(corpus, idx, jobs=1)
    return corpus, idx


def char_grams(text: str, k: int = 5) -> list[str]:
    t = normalise(text)
    return [t[i : i + k] for i in range(len(t) - k + 1)]


def test_pair_evidence(pair_index):
    corpus, idx = pair_index
    loaded = open_index(idx)
    ev = pair_evidence(loaded, "a.txt", "sub/b.txt")
    # The numbers are those of the k-grams themselves (the index keeps no shingles: the texts are re-read).
    grams_a, grams_b = char_grams(DOC_A), char_grams(DOC_B)
    assert ev.overlap.set_jaccard == pytest.approx(jaccard(grams_a, grams_b), abs=1e-12)
    assert ev.overlap.bag_jaccard == pytest.approx(bag_jaccard(grams_a, grams_b), abs=1e-12)
    assert (ev.overlap.n_a, ev.overlap.n_b) == (len(set(grams_a)), len(set(grams_b)))
    assert ev.indexed is None  # both documents as indexed: no second set of numbers
    assert ev.num_perm == 128 and 0.0 <= ev.estimated <= 1.0
    assert (ev.words_a, ev.words_b) == (37, 35)
    assert [(p.number, p.a_start, p.a_end, p.b_start, p.b_end, p.words) for p in ev.passages] == [
        (1, 4, 18, 20, 34, 14),
        (2, 23, 37, 0, 14, 14),
    ]
    assert ev.passages[0].text == P1 + "."
    assert ev.passages[1].text == P2 + "."
    assert ev.shared_words == 28 and ev.warnings == []
    d = ev.as_dict()
    assert d["passages"][0] == {"number": 1, "a_start": 4, "a_end": 18, "b_start": 20, "b_end": 34, "words": 14, "text": P1 + "."}
    assert d["doc_a"] == "a.txt" and d["set_jaccard"] == round(ev.overlap.set_jaccard, 4)


def test_pair_evidence_by_path_and_reversed(pair_index, monkeypatch):
    corpus, idx = pair_index
    monkeypatch.chdir(corpus.parent)
    ev = pair_evidence(open_index(idx), os.path.join("corpus", "sub", "b.txt"), "a.txt")
    assert (ev.doc_a, ev.doc_b) == ("sub/b.txt", "a.txt")
    assert [(p.a_start, p.b_start, p.words) for p in ev.passages] == [(0, 23, 14), (20, 4, 14)]


def test_pair_evidence_warns_about_changed_and_missing_files(pair_index):
    corpus, idx = pair_index
    indexed = pair_evidence(open_index(idx), "a.txt", "sub/b.txt").overlap
    write(corpus / "a.txt", DOC_A + "One more line.\n")
    changed = pair_evidence(open_index(idx), "a.txt", "sub/b.txt")
    assert changed.warnings == ["a.txt changed since it was indexed: the numbers and passages are from today's text"]
    # Today's text is compared, and the Jaccards verified for the indexed texts are given beside it.
    assert changed.overlap.set_jaccard == pytest.approx(jaccard(char_grams(DOC_A + "One more line.\n"), char_grams(DOC_B)))
    assert changed.overlap.set_jaccard != pytest.approx(indexed.set_jaccard)
    assert changed.indexed == pytest.approx((indexed.set_jaccard, indexed.bag_jaccard))
    (corpus / "sub" / "b.txt").unlink()
    ev = pair_evidence(open_index(idx), "a.txt", "sub/b.txt")
    assert len(ev.warnings) == 2
    assert "a.txt changed since it was indexed" in ev.warnings[0]
    assert ev.warnings[1].startswith("sub/b.txt: ") and ev.warnings[1].endswith("; no passages")
    assert ev.passages == [] and ev.words_b == 0 and ev.segments("b") == []
    assert ev.overlap is None  # nothing to compare b with today
    assert ev.indexed == pytest.approx((indexed.set_jaccard, indexed.bag_jaccard))  # still known from the index
    d = ev.as_dict()
    assert d["set_jaccard"] is None and d["shingles_b"] is None
    assert d["indexed_set_jaccard"] == round(indexed.set_jaccard, 4)


@pytest.mark.parametrize(
    "a, b, needle",
    [
        ("a.txt", "a.txt", "same document"),
        ("a.txt", "nope.txt", "nope.txt is not a document"),
    ],
)
def test_pair_evidence_errors(pair_index, a, b, needle):
    _, idx = pair_index
    with pytest.raises(UsageError, match=needle):
        pair_evidence(open_index(idx), a, b)
    with pytest.raises(UsageError, match="min-words"):
        pair_evidence(open_index(idx), "a.txt", "c.txt", min_words=0)


def test_resolve_doc_outside_the_corpus(tmp_path):
    outside = write(tmp_path / "elsewhere" / "a.txt", "x")
    with pytest.raises(UsageError):
        resolve_doc(str(outside), ["a.txt"], str(tmp_path / "corpus"))
    assert resolve_doc("a.txt", ["a.txt", "b.txt"], None) == 0
    assert np.int64(resolve_doc("b.txt", ["a.txt", "b.txt"], None)) == 1

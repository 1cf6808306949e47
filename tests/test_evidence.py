"""Evidence for one pair: shingle numbers, shared passages, display segments."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import DOC_A, DOC_B, P1, P2, write
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.errors import UsageError
from simdoc.reports.evidence import pair_evidence, resolve_doc
from simdoc.reports.overlap import shingle_overlap
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import normalise
from simdoc.similarity import bag_jaccard, jaccard
from simdoc.stages.pairs import find_pairs
from simdoc.store.loaded import open_index

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


# ---------------------------------------------------------------- segments


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


def test_documents_without_shingles_show_no_estimated_likeness(run, tmp_path):
    """Two empty signatures agree in every position: `show` printed estimated 1.0 beside a set
    Jaccard of 0 for an empty file and a blank one (never candidates of each other)."""
    import json

    c = tmp_path / "c"
    write(c / "empty.txt", "")
    write(c / "blank.txt", "  \n\t ")
    write(c / "a.txt", DOC_A)
    alone = run("show", c / "empty.txt", c / "blank.txt", "--format", "json")
    assert alone.exit_code == 0, alone.stderr
    assert json.loads(alone.stdout)["estimated"] == 0.0
    assert run("pairs", c, "--index", tmp_path / "idx", "-q").exit_code == 0
    indexed = run("show", c, "empty.txt", "blank.txt", "--index", tmp_path / "idx", "--format", "json")
    assert indexed.exit_code == 0, indexed.stderr
    assert json.loads(indexed.stdout)["estimated"] == 0.0


def test_a_folder_named_to_show_is_called_a_directory(run, tmp_path):
    """`simdoc show FILE FOLDER` said 'not a regular file any more (FIFO, device or socket?)'."""
    c = tmp_path / "c"
    write(c / "a.txt", DOC_A)
    r = run("show", c / "a.txt", c)
    assert r.exit_code == 3
    assert "a directory" in r.stderr and "FIFO" not in r.stderr


def test_a_file_the_index_skipped_is_said_to_be_so(tmp_path, monkeypatch):
    """`simdoc show CORPUS img.png a.txt`: not 'not a document of the index' alone, but that the
    index skipped it, and why; by its id or by a path to it."""
    corpus = tmp_path / "corpus"
    write(corpus / "a.txt", DOC_A)
    write(corpus / "b.txt", DOC_B)
    write(corpus / "img.png", b"\x89PNG\r\n\x1a\n\0\0binary")
    find_pairs(corpus, tmp_path / "idx", jobs=1)
    monkeypatch.chdir(tmp_path)
    for name in ("img.png", os.path.join("corpus", "img.png")):
        with pytest.raises(UsageError, match=r"is not a document of the index, which skipped it: binary file \(NUL byte\)"):
            pair_evidence(open_index(tmp_path / "idx"), name, "a.txt")
    with pytest.raises(UsageError, match=r"^nothing.txt is not a document of the index\n"):
        pair_evidence(open_index(tmp_path / "idx"), "nothing.txt", "a.txt")

"""Shingling: worked examples, the pinned hash definition, and batch invariance."""

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.shinglesets import ShingleSets
from simdoc.shingling import (
    SHINGLE_SEED,
    ShingleSpec,
    normalise,
    shingle_texts,
    stop_words,
)


def char_hash(s: str) -> int:
    return mmh3.hash(s.encode("utf-32-le"), SHINGLE_SEED, signed=False)


def word_shingle_hash(words: list[str]) -> int:
    packed = np.array([mmh3.hash(w, SHINGLE_SEED, signed=False) for w in words], dtype="<u4").tobytes()
    return mmh3.hash(packed, SHINGLE_SEED, signed=False)


def test_mmds_2_shingles_of_abcdabd():
    # MMDS Example 3.3: the 2-shingles of "abcdabd" are {ab, bc, cd, da, bd}.
    sets = shingle_texts(["abcdabd"], ShingleSpec("char", 2, lowercase=False))
    expected = sorted(char_hash(s) for s in ["ab", "bc", "cd", "da", "bd"])
    assert sets.row(0).tolist() == expected
    # "ab" occurs twice: bag counts keep that.
    counts = dict(zip(sets.row(0).tolist(), sets.row_counts(0).tolist()))
    assert counts[char_hash("ab")] == 2
    assert sum(counts.values()) == 6


def test_pinned_hash_value():
    # The hash is part of the index format: a change here invalidates every stored index.
    sets = shingle_texts(["hello"], ShingleSpec("char", 5))
    assert sets.row(0).tolist() == [char_hash("hello")]
    assert char_hash("hello") == mmh3.hash("hello".encode("utf-32-le"), 0, signed=False)


@settings(max_examples=80, deadline=None)
@given(st.text(min_size=0, max_size=60), st.integers(1, 7), st.booleans())
def test_char_shingles_are_mmh3_of_code_points(text, k, lower):
    spec = ShingleSpec("char", k, lowercase=lower)
    norm = normalise(text, lower)
    if len(norm) >= k:
        expected = {char_hash(norm[i : i + k]) for i in range(len(norm) - k + 1)}
    elif norm:
        expected = {char_hash(norm)}
    else:
        expected = set()
    assert set(shingle_texts([text], spec).row(0).tolist()) == expected


def test_accented_text_shingles_by_code_point():
    # "café!" is 5 code points (6 UTF-8 bytes): exactly one 5-shingle.
    sets = shingle_texts(["café!"], ShingleSpec("char", 5, lowercase=False))
    assert sets.row(0).tolist() == [char_hash("café!")]


def test_normalisation_collapses_whitespace_and_lowercases():
    assert normalise("  Hello\t\tWORLD \n\n again\u00a0x ") == "hello world again x"
    assert normalise("A  B", lowercase=False) == "A B"
    a = shingle_texts(["The quick  brown\nfox"])
    b = shingle_texts(["the quick brown fox"])
    assert a.row(0).tolist() == b.row(0).tolist()


def test_word_shingles():
    sets = shingle_texts(["a rose is a rose is a rose"], ShingleSpec("word", 4))
    words = "a rose is a rose is a rose".split()
    expected = {word_shingle_hash(words[i : i + 4]) for i in range(len(words) - 3)}
    assert set(sets.row(0).tolist()) == expected
    assert len(expected) == 3  # "a rose is a", "rose is a rose", "is a rose is"


def test_stopword_shingles_mmds_example_3_5():
    text = (
        "A spokesperson for the Sudzo Corporation revealed today that studies "
        "have shown it is good for people to buy Sudzo products."
    )
    sets = shingle_texts([text], ShingleSpec("stopword", 3, lowercase=False))
    got = set(sets.row(0).tolist())
    # MMDS: the first three shingles are these.
    for first in (["A", "spokesperson", "for"], ["for", "the", "Sudzo"], ["the", "Sudzo", "Corporation"]):
        assert word_shingle_hash(first) in got
    # A shingle that does not start with a stop word is absent.
    assert word_shingle_hash(["spokesperson", "for", "the"]) not in got
    assert {"the", "a", "for", "to", "is"} <= stop_words()


def test_stopword_ads_contribute_nothing():
    # MMDS: the ad "Buy Sudzo." has no stop word, so it adds no shingles.
    assert len(shingle_texts(["Buy Sudzo soap today please"], ShingleSpec("stopword")).row(0)) == 0


def test_short_and_empty_documents():
    sets = shingle_texts(["hi", "", "   \n\t ", "hello"], ShingleSpec("char", 5))
    assert sets.row(0).tolist() == [char_hash("hi")]
    assert len(sets.row(1)) == 0 and len(sets.row(2)) == 0
    assert sets.sizes().tolist() == [1, 0, 0, 1]


def test_bare_string_is_refused():
    with pytest.raises(TypeError):
        shingle_texts("not a list")


@pytest.mark.parametrize("bad", [{"unit": "byte"}, {"k": 0}, {"k": 1000}, {"k": 2.5}])
def test_bad_spec(bad):
    from simdoc.errors import UsageError

    with pytest.raises(UsageError):
        ShingleSpec(**bad)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8), st.sampled_from(["char", "word", "stopword"]))
def test_batch_equals_one_by_one(texts, unit):
    spec = ShingleSpec(unit)
    batch = shingle_texts(texts, spec)
    singles = ShingleSets.concatenate([shingle_texts([t], spec) for t in texts])
    assert batch.indptr.tolist() == singles.indptr.tolist()
    assert batch.data.tolist() == singles.data.tolist()
    assert batch.counts.tolist() == singles.counts.tolist()


def test_rows_sorted_unique():
    sets = shingle_texts(["the cat sat on the mat with the hat", "aaaaaaaaaa"])
    for i in range(sets.n_docs):
        row = sets.row(i)
        assert np.all(row[1:] > row[:-1])
    assert sets.row(1).tolist() == [char_hash("aaaaa")] and sets.row_counts(1).tolist() == [6]


def test_a_word_with_a_lone_surrogate_hashes_as_its_bytes_and_does_not_crash():
    # A JSON Lines text may hold "\ud800"; mmh3 given such a str killed the worker (SIGSEGV).
    # In a child process, so that the old crash fails this test instead of ending the run.
    import subprocess
    import sys

    code = (
        "import mmh3\n"
        "from simdoc.shingling import ShingleSpec, _word_hashes, shingle_texts\n"
        "shingle_texts(['one \\ud800 two'], ShingleSpec('word', 1), form='stream')\n"
        "got = _word_hashes(['one', '\\ud800', 'two']).tolist()\n"
        "want = [mmh3.hash(w.encode('utf-8', 'surrogatepass'), 0, signed=False) for w in ['one', '\\ud800', 'two']]\n"
        "assert got == want, (got, want)\n"
        "shingle_texts(['one \\ud800 two'], ShingleSpec('word', 2), form='sets64')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

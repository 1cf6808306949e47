"""simdoc.LSHIndex: an index in memory to insert documents into and query (issue 27, item 12)."""

from __future__ import annotations

import doctest
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.lshindex
from simdoc.errors import UsageError
from simdoc.lshindex import LSHIndex

FOX = "The quick brown fox jumps over the lazy dog"


def test_docstring_examples():
    assert doctest.testmod(simdoc.lshindex, raise_on_error=False).failed == 0


def test_is_public():
    assert simdoc.LSHIndex is LSHIndex and "LSHIndex" in simdoc.__all__ and "IndexMatch" in simdoc.__all__


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 0},
        {"threshold": 1.5},
        {"threshold": "high"},
        {"bands": 4},
        {"rows": 4},
        {"bands": 20, "rows": 7},  # 140 > 128
        {"bands": 0, "rows": 4},
        {"bands": 2.5, "rows": 4},
        {"num_perm": 0},
        {"seed": -1},
        {"scheme": "fast"},
        {"unit": "sentence"},
        {"k": 0},
    ],
)
def test_bad_parameters_fail_before_any_document(kwargs):
    with pytest.raises(UsageError):
        LSHIndex(**kwargs)


def test_insert_query_remove():
    index = LSHIndex(threshold=0.5)
    index.update([("a", FOX), ("b", FOX.replace("jumps", "jumped")), ("c", "Tide pools at low water, crabs and anemones")])
    assert len(index) == 3 and index.keys() == ["a", "b", "c"]
    assert index.query(FOX) == ["a", "b"]
    assert index.query("Tide pools at low water, crabs and anemones!") == ["c"]
    with pytest.raises(ValueError, match="already in the index"):
        index.insert("a", "another text")
    with pytest.raises(ValueError, match="already in the index"):
        index.update([("d", FOX), ("d", FOX)])
    assert "d" not in index  # nothing of a refused batch was added
    index.remove("a")
    assert index.query(FOX) == ["b"] and "a" not in index
    with pytest.raises(KeyError):
        index.remove("a")
    index.insert("a", FOX)  # a removed key can be used again
    assert index.query(FOX) == ["a", "b"]


def test_threshold_and_all_candidates():
    index = LSHIndex(threshold=0.9, bands=128, rows=1)  # one row a band: nearly every pair is a candidate
    index.insert("a", FOX)
    index.insert("b", FOX.replace("jumps", "jumped"))
    assert index.query(FOX) == ["a"]
    both = index.matches(FOX, all_candidates=True)
    assert [m.key for m in both] == ["a", "b"] and both[0].jaccard == 1.0 and both[1].jaccard < 0.9


def test_without_verification_matches_are_estimates():
    index = LSHIndex(threshold=0.5, verify=False)
    index.insert("a", FOX)
    (m,) = index.matches(FOX)
    assert m.key == "a" and m.estimated == 1.0 and m.jaccard is None


def test_shingles_given_as_integers():
    index = LSHIndex(threshold=0.5)
    sets = simdoc.shingle_texts([FOX, FOX.replace("jumps", "jumped"), "unrelated words entirely here"])
    for i in range(3):
        index.insert(i, sets.row(i))
    index.insert("list", [int(x) for x in sets.row(0)])
    assert index.query(sets.row(0)) == [0, "list", 1]
    assert index.query(FOX) == []  # a text is compared with texts only
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        index.insert("bad", [1, 2**32])
    with pytest.raises(ValueError):
        index.insert("bad", [-1])
    with pytest.raises(TypeError):
        index.insert("bad", b"bytes")


def test_documents_without_shingles_are_never_candidates():
    index = LSHIndex(threshold=0.5)
    index.update([("empty", ""), ("blank", "   \n"), ("fox", FOX)])
    assert len(index) == 3
    assert index.query("") == [] and index.query("  ") == []
    assert index.query(FOX) == ["fox"]
    index.remove("empty")
    assert len(index) == 2


# ---------------------------------------------------------------- agreement with find_pairs


def _corpus(seed: int, n: int) -> list[str]:
    """n texts: a few originals and edited copies of them (words replaced), exact copies, an empty one."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6))) for _ in range(60)]
    originals = [[rng.choice(vocabulary) for _ in range(rng.randint(5, 60))] for _ in range(3)]
    texts = []
    for _ in range(n):
        words = list(rng.choice(originals))
        for _ in range(rng.randint(0, len(words) // 3)):
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        texts.append(" ".join(words) if rng.random() > 0.05 else "")
    return texts


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(2, 14), threshold=st.sampled_from([0.3, 0.5, 0.6, 0.8]))
def test_queries_agree_with_find_pairs(tmp_path_factory, seed, n, threshold):
    """Every document queried against an index of all of them gives the candidates, estimates and
    exact Jaccards of find_pairs over the same texts, and its verified pairs at the threshold."""
    folder = tmp_path_factory.mktemp("corpus")
    texts = _corpus(seed, n)
    names = [f"d{i:02}.txt" for i in range(n)]
    for name, text in zip(names, texts):
        (folder / name).write_text(text, encoding="utf-8")
    idx = tmp_path_factory.mktemp("idx")
    candidates = simdoc.find_pairs(folder, idx, threshold=threshold, all_candidates=True, jobs=1)
    pairs = simdoc.find_pairs(folder, idx, threshold=threshold, jobs=1)
    index = LSHIndex(threshold)
    index.update(zip(names, texts))

    def of_index(all_candidates: bool) -> dict:
        found = {}
        for name, text in zip(names, texts):
            for m in index.matches(text, all_candidates=all_candidates):
                if m.key != name and (name, m.key) not in found and (m.key, name) not in found:
                    found[min(name, m.key), max(name, m.key)] = (m.estimated, m.jaccard)
        return found

    def of_pipeline(result) -> dict:
        return {(p.doc_a, p.doc_b): (p.estimated, p.jaccard) for p in result}

    for mine, theirs in ((of_index(True), of_pipeline(candidates)), (of_index(False), of_pipeline(pairs))):
        assert set(mine) == set(theirs)
        for pair, (est, jac) in theirs.items():
            assert mine[pair][0] == pytest.approx(est, abs=1e-12), pair
            assert mine[pair][1] == pytest.approx(jac, abs=1e-12), pair
    # A document finds itself (no shingles: nothing), as datasketch's MinHashLSH does.
    for name, text in zip(names, texts):
        assert (name in index.query(text)) == bool(text.strip())


def test_memory_per_document_is_its_signature_bands_and_shingles():
    index = LSHIndex(threshold=0.8)
    index.insert("a", FOX)
    doc = index._docs["a"]
    assert doc.signature.dtype == np.uint32 and doc.signature.shape == (128,) and doc.is_text
    assert doc.bands.shape == (index.bands,)
    assert doc.shingles.dtype == np.uint64 and len(doc.shingles) == len(set(doc.shingles.tolist()))

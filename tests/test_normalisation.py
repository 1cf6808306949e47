"""Unicode normalisation and a minimum length, shingle parameters of the index (issue 30 item 9)."""

from __future__ import annotations

import gzip
import json
import unicodedata

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.streaming as streaming
from simdoc import jit, kernels
from simdoc.cli import cli
from conftest import printed_jaccard as jaccard_of, tsv_pairs as pairs
from simdoc.shingling import ShingleSpec, normalise, shingle_texts
from simdoc.store.directory import IndexStore
from simdoc.store.manifest import dump

FRENCH = (
    "Le cœur de l'été à Québec : où êtes-vous, élève déçu ? La fête s'achève près du théâtre, "
    "et les crêpes brûlées côtoient les pâtés. Noël approche ; Hélène préfère le thé à la crème. "
)




def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    return r




def test_the_same_text_in_nfc_and_nfd_is_one_text_by_default(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    nfc, nfd = unicodedata.normalize("NFC", FRENCH), unicodedata.normalize("NFD", FRENCH)
    assert nfc != nfd
    (corpus / "nfc.txt").write_text(nfc, encoding="utf-8")
    (corpus / "nfd.txt").write_text(nfd, encoding="utf-8")
    (corpus / "d.jsonl.gz").write_bytes(gzip.compress(json.dumps({"text": nfd}).encode() + b"\n"))
    got, _ = pairs(corpus, tmp_path / "i")
    assert got == {("d.jsonl.gz/#1", "nfc.txt"): "1.0000", ("d.jsonl.gz/#1", "nfd.txt"): "1.0000", ("nfc.txt", "nfd.txt"): "1.0000"}
    # Without normalisation, the code points differ: the Jaccard of the texts as they are.
    none = ShingleSpec(unicode="none")
    got, _ = pairs(corpus, tmp_path / "none", "--unicode", "none", "--threshold", "0.1")
    assert got[("nfc.txt", "nfd.txt")] == jaccard_of(nfc, nfd, none) != "1.0000"
    # NFKC folds compatibility forms too: a ligature and full-width letters.
    (corpus / "nfkc.txt").write_text(nfc.replace("fête", "ﬁte").replace("Noël", "Ｎoël"), encoding="utf-8")
    (corpus / "plain.txt").write_text(nfc.replace("fête", "fite"), encoding="utf-8")
    got, _ = pairs(corpus, tmp_path / "nfkc", "--unicode", "NFKC")
    want = jaccard_of(nfc.replace("fête", "fite").replace("Noël", "Noël"), nfc.replace("fête", "fite"))
    assert got[("nfkc.txt", "plain.txt")] == want


def test_a_changed_normalisation_needs_rebuild_and_an_old_index_keeps_its_own(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    nfc, nfd = unicodedata.normalize("NFC", FRENCH), unicodedata.normalize("NFD", FRENCH)
    (corpus / "nfc.txt").write_text(nfc, encoding="utf-8")
    (corpus / "nfd.txt").write_text(nfd, encoding="utf-8")
    pairs(corpus, tmp_path / "i")
    r = run("pairs", corpus, "--index", tmp_path / "i", "--unicode", "NFKC")
    assert r.exit_code == 4 and "--unicode NFKC" in r.stderr and "--rebuild" in r.stderr
    # An index written before these parameters existed: no key, the old behaviour (no normalisation).
    pairs(corpus, tmp_path / "old", "--unicode", "none", "--threshold", "0.1")
    store = IndexStore(tmp_path / "old")
    manifest = store.read_manifest()
    params = manifest["stages"]["shingle"]["params"]
    for key in ("unicode", "min_length", "main_content", "all_responses"):
        del params[key]
    (tmp_path / "old" / "manifest.json").write_bytes(dump(manifest))
    assert run("check", "--index", tmp_path / "old").exit_code == 0
    got, err = pairs(corpus, tmp_path / "old", "--threshold", "0.1", "-v")
    assert got[("nfc.txt", "nfd.txt")] == jaccard_of(nfc, nfd, ShingleSpec(unicode="none"))
    assert "shingle: up to date" in err  # neither read again nor refused
    r = run("pairs", corpus, "--index", tmp_path / "old", "--unicode", "NFC")
    assert r.exit_code == 4 and "--unicode none" in r.stderr and "--rebuild" in r.stderr


def test_documents_shorter_than_the_minimum_are_left_out_and_listed(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("abc", encoding="utf-8")
    (corpus / "b.txt").write_text("ABC\n", encoding="utf-8")
    long_a = "a longer note about the tide tables of the harbour"
    (corpus / "c.txt").write_text(long_a, encoding="utf-8")
    (corpus / "d.txt").write_text(long_a + " and cranes", encoding="utf-8")
    (corpus / "e.txt.gz").write_bytes(gzip.compress(b"  x y  "))  # read in chunks (compressed)
    rows = [{"text": "abc"}, {"text": "   a  b  \n c   "}, {"text": long_a + " and ropes"}]
    (corpus / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got, _ = pairs(corpus, tmp_path / "all")  # default: every document is paired
    assert got[("a.txt", "b.txt")] == "1.0000"
    got, err = pairs(corpus, tmp_path / "min", "--min-length", "6")
    assert got == {
        ("c.txt", "d.txt"): jaccard_of(long_a, long_a + " and cranes"),
        ("c.txt", "m.jsonl/#3"): jaccard_of(long_a, long_a + " and ropes"),
        ("d.txt", "m.jsonl/#3"): jaccard_of(long_a + " and cranes", long_a + " and ropes"),
    }
    assert "simdoc: 3 documents (3 files skipped)" in err
    listed = run("stats", "--index", tmp_path / "min", "--skipped", "--format", "json")
    reasons = {json.loads(line)["id"]: json.loads(line)["reason"] for line in listed.stdout.splitlines()}
    assert set(reasons) == {"a.txt", "b.txt", "e.txt.gz", "m.jsonl/#1", "m.jsonl/#2"}  # "a b c" is 5 characters
    assert reasons["m.jsonl/#2"] == "shorter than --min-length 6 (characters), left out"
    # Words, for word shingles.
    got, _ = pairs(corpus, tmp_path / "words", "--unit", "word", "--min-length", "10", "--threshold", "0.3")
    assert {d for p in got for d in p} == {"c.txt", "d.txt", "m.jsonl/#3"}
    got, _ = pairs(corpus, tmp_path / "three", "--min-length", "3")  # "x y" is 3 characters: kept
    assert ("a.txt", "b.txt") in got and "e.txt.gz" not in {d["id"] for d in map(json.loads, run(
        "stats", "--index", tmp_path / "three", "--skipped", "--format", "json").stdout.splitlines())}


# ---------------------------------------------------------------- every path normalises alike

TEXT = st.text(
    alphabet=st.sampled_from(list("aeiouAEIOU cnCN\n\t") + ["\u0301", "\u0300", "\u0308", "\u0327", "é", "É", "ﬁ", "Ａ", "\u00a0", "ß", "ǅ"]),
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), unicode=st.sampled_from(["none", "NFC", "NFKC"]), unit=st.sampled_from(["char", "word"]))
def test_the_kernels_and_the_reference_path_normalise_alike(texts, unicode, unit):
    spec = ShingleSpec(unit, 2, True, unicode)
    fast = shingle_texts(texts, spec)
    slow = shingle_texts([normalise(t, True, unicode) for t in texts], spec, normalised=True)
    assert np.array_equal(fast.indptr, slow.indptr) and np.array_equal(fast.data, slow.data)
    if jit.ENABLED:
        jit.ENABLED = False  # the switch wanted() asks; kernels.ENABLED is a copy
        try:
            plain = shingle_texts(texts, spec)
        finally:
            jit.ENABLED = True
        assert np.array_equal(fast.data, plain.data) and np.array_equal(fast.counts, plain.counts)


@settings(max_examples=60, deadline=None)
@given(text=TEXT, piece=st.integers(1, 9), unicode=st.sampled_from(["NFC", "NFKC"]))
def test_a_text_read_in_pieces_normalises_as_a_whole(text, piece, unicode):
    spec = ShingleSpec("char", 3, True, unicode)
    whole = shingle_texts([text], spec, form="sets64")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(streaming, "PIECE_CHARS", piece)
        pieces = streaming._sets64_in_pieces(text, spec)
    assert np.array_equal(pieces.data, whole.data) and np.array_equal(pieces.counts, whole.counts)

"""Another simdoc index inside the corpus is not read as documents (QA pass of 2026-11-26).

The index a run uses is left out of its walk; an index of another run (an
old one, or one named with another --index) was walked like any folder:
its manifest, lock files and .npy arrays became documents or skipped
binary files. A folder that holds simdoc's manifest is now passed over,
said once on stderr, and listed by `stats --skipped`.
"""

from __future__ import annotations

import json

from conftest import TEXT_A, TEXT_C, summary, write

from simdoc.corpus import folders
from simdoc.store import directory
from simdoc.store.loaded import open_index

NOTE = "warning: old.idx: a simdoc index (it holds simdoc's manifest.json): its files are not documents"


def _corpus_with_an_old_index(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    old = run("pairs", corpus, "--index", corpus / "old.idx", "-q")  # an index inside the corpus, as a user may leave one
    assert old.exit_code == 0, old.stderr
    assert (corpus / "old.idx" / "manifest.json").is_file()
    return corpus


def test_an_index_inside_the_corpus_is_passed_over_with_a_note_once(run, tmp_path):
    corpus = _corpus_with_an_old_index(run, tmp_path)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx)
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(first)["docs"] == "3" and summary(first)["skipped"] == "1"
    assert [line for line in first.stderr.splitlines() if line.startswith("warning:")] == [NOTE]
    assert open_index(idx).doc_ids() == ["a.txt", "b.txt", "c.txt"]
    again = run("pairs", corpus, "--index", idx)  # said once, counted every time
    assert again.exit_code == 0, again.stderr
    assert "warning:" not in again.stderr and summary(again)["skipped"] == "1"
    listed = run("stats", "--index", idx, "--skipped")
    assert listed.exit_code == 0, listed.stderr
    assert listed.stdout == "old.idx\ta simdoc index (it holds simdoc's manifest.json): its files are not documents\n"


def test_the_index_in_use_inside_the_corpus_is_still_left_out_silently(run, tmp_path):
    corpus = _corpus_with_an_old_index(run, tmp_path)
    r = run("pairs", corpus, "--index", corpus / "old.idx")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] is None and "warning:" not in r.stderr


def test_a_folder_with_a_manifest_json_of_its_own_is_walked(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "app" / "manifest.json", json.dumps({"name": "an app", "format": "not simdoc's"}))
    write(corpus / "app" / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "app/a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] is None


def test_the_walk_knows_an_index_as_the_store_names_it():
    assert folders.INDEX_MANIFEST == directory.MANIFEST
    assert folders.INDEX_FORMAT == directory.FORMAT

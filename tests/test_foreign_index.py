"""Another simdoc index inside the corpus is not read as documents (QA pass of 2026-11-26).

The index a run uses is left out of its walk; an index of another run (an
old one, or one named with another --index) was walked like any folder:
its manifest, lock files and .npy arrays became documents or skipped
binary files. A folder that holds simdoc's manifest is now passed over,
said once on stderr, and listed by `stats --skipped`. So is (QA pass of
2026-11-27) an index whose first build did not finish (simdoc's lock file and
nothing simdoc would not write), and a name of a --files-from list inside
either; a bucket prefix: tests/test_object_storage_indexes.py.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import TEXT_A, TEXT_C, summary, write

from simdoc import indexmarks
from simdoc.corpus import indexes
from simdoc.store import directory, locks, names
from simdoc.store.loaded import open_index
from tests.test_crash_safety import simdoc

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
    # One set of names for both layers (simdoc.indexmarks): the store's are those the corpus checks.
    assert directory.MANIFEST is indexmarks.MANIFEST and directory.FORMAT is indexmarks.FORMAT
    assert locks.LOCK is indexmarks.LOCK and names.OWN is indexmarks.OWN


# -- an index whose first build did not finish (QA pass of 2026-11-27) --------------------------
#
# A first build killed before its manifest leaves simdoc's lock file (its first file, which says
# "pid N since TIME"), maybe `readers`, and the arrays it published: those were read as documents.

UNFINISHED = (
    "an unfinished simdoc index (simdoc's lock file and files, no manifest.json yet): its files are not documents"
)
PID_NOTE = "pid 4242 since 2026-11-27 06:00:00\n"  # what simdoc's writer puts in its lock file


def _corpus_with_an_unfinished_index(tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    died = simdoc("pairs", corpus, "--index", corpus / "old.idx", "-q", env_extra={"SIMDOC_FAULT": "manifest:before"})
    assert died.returncode == 75, died.stderr
    left = {p.name for p in (corpus / "old.idx").iterdir()}
    assert "manifest.json" not in left and "lock" in left and any(n.startswith("signatures.") for n in left), left
    return corpus


def test_an_index_whose_first_build_was_killed_is_passed_over_with_a_note_once(run, tmp_path):
    corpus = _corpus_with_an_unfinished_index(tmp_path)
    idx = tmp_path / "idx"
    first = run("pairs", corpus, "--index", idx)
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(first)["docs"] == "3" and summary(first)["skipped"] == "1"
    assert [line for line in first.stderr.splitlines() if line.startswith("warning:")] == [f"warning: old.idx: {UNFINISHED}"]
    again = run("pairs", corpus, "--index", idx)
    assert again.exit_code == 0, again.stderr
    assert "warning:" not in again.stderr and summary(again)["skipped"] == "1"
    listed = run("stats", "--index", idx, "--skipped")
    assert listed.stdout == f"old.idx\t{UNFINISHED}\n"


def _two_copies_and_a_folder(tmp_path, folder: str, files: dict):
    """A corpus of two copies and a folder holding ``files`` (name: content)."""
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    for name, content in files.items():
        write(corpus / folder / name, content)
    return corpus


@pytest.mark.parametrize(
    "left",
    [
        {"lock": PID_NOTE},  # killed right after it took its lock
        {"lock": PID_NOTE, "readers": ""},
        {"lock": "", "signatures.0123456789abcdef.npy": b"\x93NUMPY\x01\x00"},  # its note could not be written
    ],
    ids=["lock", "lock-readers", "empty-lock-arrays"],
)
def test_what_a_first_build_leaves_at_any_moment_is_passed_over(run, tmp_path, left):
    corpus = _two_copies_and_a_folder(tmp_path, "old.idx", left)
    write(corpus / "old.idx" / ".docs.key.0123456789abcdef.npy.x1y2.tmp", b"\x93NUMPY")  # a temporary
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["docs"] == "2" and summary(r)["skipped"] == "1"
    assert f"warning: old.idx: {UNFINISHED}" in r.stderr


@pytest.mark.parametrize(
    "folder",
    [
        {"lock": "do not touch while the backup runs\n"},  # a lock of the user's own
        {"lock": "", "readers": ""},  # no note and no array: nothing only simdoc writes
        {"lock": PID_NOTE, "notes.txt": TEXT_C},  # a file simdoc never writes in an index
        {"lock": PID_NOTE, "signatures.npy": TEXT_C},  # not the name of a simdoc array (no build id)
    ],
    ids=["users-lock", "empty-locks", "foreign-file", "foreign-array-name"],
)
def test_a_users_folder_with_a_file_called_lock_is_walked(run, tmp_path, folder):
    corpus = _two_copies_and_a_folder(tmp_path, "app", folder)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["docs"] == str(2 + len(folder)) and summary(r)["skipped"] is None
    assert "simdoc index" not in r.stderr


def test_the_lock_note_the_walk_knows_is_the_one_the_writer_writes(tmp_path):
    store = directory.IndexStore(tmp_path / "idx")
    with store.writing():
        note = (tmp_path / "idx" / "lock").read_bytes()
    assert indexmarks.WRITER_NOTE.match(note), note


@pytest.mark.parametrize("before", [b"", b"pid 1 since 2026-01-01 00:00:00\n", b"pid 99999999999999999999 since 2026-01-01 00:00:00\nmore\n"])
def test_the_writer_writes_its_note_over_the_last_one_and_nothing_is_left_of_that(tmp_path, before):
    # Written in place, not after a truncation: a longer note before it must not leave its tail.
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "lock").write_bytes(before)
    with directory.IndexStore(tmp_path / "idx").writing():
        note = (tmp_path / "idx" / "lock").read_bytes()
    assert indexmarks.WRITER_NOTE.fullmatch(note) and note.startswith(f"pid {os.getpid()} since ".encode()), note


# -- --files-from: the same rule as the walk, the same note ---------------------------------------


def _listed(tmp_path, corpus, *extra):
    """A list of every file under ``corpus`` (as `find corpus -type f` gives), and ``extra`` names."""
    names = [str(p) for p in sorted(corpus.rglob("*")) if p.is_file()] + [str(e) for e in extra]
    (tmp_path / "list.txt").write_text("".join(f"{n}\n" for n in names))
    return tmp_path / "list.txt"


@pytest.mark.parametrize("kind", ["finished", "unfinished"])
def test_files_from_passes_over_the_files_of_an_index_with_the_walks_note(run, tmp_path, kind):
    corpus = (_corpus_with_an_old_index(run, tmp_path) if kind == "finished" else _corpus_with_an_unfinished_index(tmp_path))
    reason = NOTE.removeprefix("warning: old.idx: ") if kind == "finished" else UNFINISHED
    idx = tmp_path / "idx"
    r = run("pairs", "--files-from", _listed(tmp_path, corpus), "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] == "1"
    assert [line for line in r.stderr.splitlines() if line.startswith("warning:")] == [f"warning: old.idx: {reason}"]
    assert run("stats", "--index", idx, "--skipped").stdout == f"old.idx\t{reason}\n"


def test_files_from_passes_over_the_files_of_the_index_in_use_with_a_note(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    idx = corpus / "sub" / "idx"  # deeper than the list's base: the folders between are checked too
    first = run("pairs", "--files-from", _listed(tmp_path, corpus), "--index", idx)
    assert first.exit_code == 0, first.stderr
    write(corpus / "sub" / "d.txt", TEXT_C)
    again = run("pairs", "--files-from", _listed(tmp_path, corpus), "--index", idx)  # now it names idx's files
    assert again.exit_code == 0, again.stderr
    assert summary(again)["docs"] == "4" and summary(again)["skipped"] == "1"
    assert [line for line in again.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: sub/idx: {NOTE.removeprefix('warning: old.idx: ')}"
    ]
    assert open_index(idx).doc_ids() == ["a.txt", "b.txt", "c.txt", "sub/d.txt"]


def test_files_from_naming_an_index_folder_passes_it_over(run, tmp_path):
    corpus = _corpus_with_an_old_index(run, tmp_path)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{corpus / n}\n" for n in ("a.txt", "b.txt", "c.txt", "old.idx")))
    r = run("pairs", "--files-from", listing, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] == "1"
    assert [line for line in r.stderr.splitlines() if line.startswith("warning:")] == [NOTE]


def test_files_from_keeps_a_users_file_called_lock(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "app" / "lock", "do not touch while the backup runs\n")
    write(corpus / "app" / "b.txt", TEXT_A)
    r = run("pairs", "--files-from", _listed(tmp_path, corpus), "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] is None


def test_a_lists_folders_are_asked_once_each_and_none_inside_an_index():
    asked = []

    def reason(folder):
        asked.append(folder)
        return "an index" if folder == "a/old.idx" else None

    ids = ["a/x.txt", "a/old.idx/lock", "a/old.idx/dask-parts/scan/1.npz", "b/c/d.txt", "a/y.txt", "top.txt"]
    found = indexes.find_indexes(indexes.folders_of(ids), reason)
    assert found == {"a/old.idx": "an index"}
    assert sorted(asked) == ["a", "a/old.idx", "b", "b/c"]  # never the base, nothing inside old.idx
    assert [indexes.holder(i, found) for i in ids] == [None, "a/old.idx", "a/old.idx", None, None, None]


_PARTS = st.lists(st.sampled_from(["a", "b", "ab", "a.b", "idx"]), min_size=1, max_size=4).map("/".join)


@given(ids=st.lists(_PARTS, max_size=12), marked=st.sets(_PARTS, max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_name_is_passed_over_by_the_shallowest_index_that_holds_it(ids, marked):
    # What find_indexes and holder give is what asking every folder of every name would give.
    ids = [i for i in ids if i not in indexes.folders_of(ids)]  # a file is no folder of another name
    found = indexes.find_indexes(indexes.folders_of(ids), lambda folder: "idx" if folder in marked else None)
    for doc_id in ids:
        parts = doc_id.split("/")
        folders = ["/".join(parts[:i]) for i in range(1, len(parts))]
        expected = next((f for f in folders if f in marked), None)
        assert indexes.holder(doc_id, found) == expected


def test_an_index_named_as_the_corpus_is_an_error_that_says_so(run, tmp_path):
    corpus = _corpus_with_an_old_index(run, tmp_path)
    r = run("pairs", corpus / "old.idx", "--index", tmp_path / "idx")
    assert r.exit_code == 3 and r.stdout == ""
    assert "is a simdoc index (it holds simdoc's manifest.json)" in r.stderr and "--index" in r.stderr
    assert not (tmp_path / "idx" / "manifest.json").exists()

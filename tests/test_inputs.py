"""Odd corpora: bad encodings, binary and unreadable files, hidden files, links, names, order, jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TEXT_A, TEXT_C, records, summary, write

import simdoc.corpus.files
import simdoc.corpus.walk
import simdoc.engines.local
import simdoc.stages.scan
import simdoc.stages.signature
from simdoc.store.doctable import ROLES as DOC_ROLES
from simdoc.store.loaded import open_index

OTHER = "An entirely different text about lighthouse keepers and their long winter logs.\n"


def _ids(result) -> set[str]:
    return {name for row in records(result) for name in row[:2]}


# ---------------------------------------------------------------- encodings, binary, unreadable


def test_invalid_utf8_is_kept_with_warning(run, tmp_path):
    corpus = tmp_path / "c"
    raw = b"Caf\xe9 au lait: coffee with hot milk, served in a bowl in the morning.\n"
    write(corpus / "latin1.txt", raw)
    write(corpus / "latin1-copy.txt", raw)
    write(corpus / "other.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "latin1-copy.txt\tlatin1.txt\t1.0000\t1.0000\n"
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert any("latin1.txt" in ln and "UTF-8" in ln for ln in warn), r.stderr
    assert any("latin1-copy.txt" in ln and "UTF-8" in ln for ln in warn), r.stderr
    m = summary(r)
    assert m["docs"] == "3" and m["skipped"] is None


def test_utf8_bom_is_dropped(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "bom.txt", b"\xef\xbb\xbf" + TEXT_A.encode())
    write(corpus / "plain.txt", TEXT_A)
    write(corpus / "other.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == "bom.txt\tplain.txt\t1.0000\t1.0000\n"
    assert "warning" not in r.stderr


def test_binary_file_is_skipped_and_counted(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + TEXT_A.encode())
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert any("image.png" in ln and "binary" in ln for ln in r.stderr.splitlines() if ln.startswith("warning:"))
    m = summary(r)
    assert m["docs"] == "2"
    assert m["skipped"] == "1"


def test_unreadable_file_warns_and_continues(run, tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    locked = write(corpus / "locked.txt", TEXT_A)
    real_open = os.open

    def fake_open(file, *args, **kwargs):
        # As root, chmod 000 does not stop reading: simulate the refusal at open time.
        if os.fspath(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(simdoc.corpus.files.os, "open", fake_open)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--jobs", "1")
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert any("locked.txt" in ln and "Permission denied" in ln for ln in warn), r.stderr
    m = summary(r)
    assert m["docs"] == "2"
    assert m["skipped"] == "1"


# ---------------------------------------------------------------- what is a document


def test_hidden_files_and_dirs_are_ignored(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    write(corpus / ".a-hidden.txt", TEXT_A)
    write(corpus / ".git" / "a.txt", TEXT_A)
    write(corpus / "sub" / ".cache" / "a.txt", TEXT_A)
    write(corpus / "sub" / "c-copy.txt", TEXT_C)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == "c.txt\tsub/c-copy.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "3"
    assert summary(r)["skipped"] is None
    assert "hidden" not in r.stderr and ".git" not in r.stderr


def test_index_inside_corpus_is_not_read(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    idx = corpus / "simdoc-index"
    first = run("pairs", corpus, "--index", idx)
    assert first.exit_code == 0
    assert idx.is_dir() and any(idx.iterdir())
    # A second run (the index now exists and holds a docs .jsonl) and a rebuild see the same 3 documents.
    for extra in ((), ("--rebuild",), ("--all-candidates", "--bands", "128", "--rows", "1")):
        r = run("pairs", corpus, "--index", idx, *extra)
        assert r.exit_code == 0, r.stderr
        assert summary(r)["docs"] == "3"
        assert not any(i.startswith("simdoc-index") for i in _ids(r))
        assert "simdoc-index" not in r.stderr.replace(str(idx), "")
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert open_index(idx).doc_ids() == ["a.txt", "b.txt", "c.txt"]


def test_index_inside_corpus_given_relative(run, tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        r = run("pairs", "c", "--index", "c/./idx")
        assert r.exit_code == 0, r.stderr
        assert summary(r)["docs"] == "2"
        assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"


def test_symlinks_not_followed_and_reported(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "c.txt", TEXT_C)
    outside = write(tmp_path / "outside" / "secret.txt", TEXT_A)
    (corpus / "link-to-a.txt").symlink_to(corpus / "a.txt")
    (corpus / "link-outside.txt").symlink_to(outside)
    (corpus / "linkdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (corpus / "loop").symlink_to(corpus, target_is_directory=True)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # no pair: the links are not documents
    assert summary(r)["docs"] == "2"
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    for name in ("link-to-a.txt", "link-outside.txt", "linkdir", "loop"):
        assert any(name in ln and "symbolic link" in ln for ln in warn), (name, r.stderr)
    assert "secret" not in r.stderr


def test_document_shorter_than_k(run, tmp_path):
    """shingling docstring: 1..k-1 tokens give one shingle of all of them."""
    corpus = tmp_path / "c"
    write(corpus / "x.txt", "ab")
    write(corpus / "y.txt", "AB\n")  # lowercased, whitespace stripped: also "ab"
    write(corpus / "z.txt", "ac")
    write(corpus / "long.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == "x.txt\ty.txt\t1.0000\t1.0000\n"


def test_document_shorter_than_k_word_unit(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "x.txt", "hello  world")
    write(corpus / "y.txt", "Hello\nWorld\n")
    write(corpus / "long.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--unit", "word")
    assert r.exit_code == 0
    assert r.stdout == "x.txt\ty.txt\t1.0000\t1.0000\n"


def test_empty_documents_are_never_candidates(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "empty1.txt", b"")
    write(corpus / "empty2.txt", b"")
    write(corpus / "blank1.txt", "   \n\t  \n")
    write(corpus / "blank2.txt", "\n\n\u00a0\n")
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_A)
    empties = {"empty1.txt", "empty2.txt", "blank1.txt", "blank2.txt"}
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "6"
    # Not even with every pair a candidate (one row per band) and every candidate printed.
    for extra in (("--all-candidates",), ("--all-candidates", "--bands", "128", "--rows", "1"), ("--no-verify",)):
        r = run("pairs", corpus, "--index", idx, *extra)
        assert r.exit_code == 0, r.stderr
        assert not (_ids(r) & empties), r.stdout
        assert r.stdout == "a.txt\tb.txt\t1.0000\t" + ("" if "--no-verify" in extra else "1.0000") + "\n"


def test_only_empty_documents(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "empty1.txt", b"")
    write(corpus / "empty2.txt", b"")
    write(corpus / "blank.txt", " \n")
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--all-candidates")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert summary(r)["docs"] == "3"
    assert summary(r)["cand"] == "0"


# ---------------------------------------------------------------- names


def test_names_with_space_tab_newline_backslash_in_tsv(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "with space.txt", TEXT_A)
    write(corpus / "with\ttab.txt", TEXT_A)
    write(corpus / "other.txt", OTHER)
    write(corpus / "new\nline.txt", TEXT_C)
    write(corpus / "back\\slash.txt", TEXT_C)
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        "back\\\\slash.txt\tnew\\nline.txt\t1.0000\t1.0000\n"
        "with\\ttab.txt\twith space.txt\t1.0000\t1.0000\n"  # "\t" sorts before " "
    )
    for line in r.stdout.splitlines():
        assert line.count("\t") == 3
    # jsonl carries the names unescaped
    j = run("pairs", "--index", idx, "-f", "jsonl")
    names = {(d["doc_a"], d["doc_b"]) for d in map(json.loads, j.stdout.splitlines())}
    assert names == {("back\\slash.txt", "new\nline.txt"), ("with\ttab.txt", "with space.txt")}


def test_unicode_names(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "café.txt", TEXT_A)
    write(corpus / "日本" / "文書.txt", TEXT_A)
    write(corpus / "other.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "café.txt\t日本/文書.txt\t1.0000\t1.0000\n"


# ---------------------------------------------------------------- determinism


CORPUS_FILES = {
    "a.txt": TEXT_A,
    "zz/a-copy.txt": TEXT_A,
    "m/near.txt": TEXT_A.replace("lazy", "sleepy"),
    "c.txt": TEXT_C,
    "b/c-copy.txt": TEXT_C,
    "b/other.txt": OTHER,
    "k.txt": OTHER.replace("winter", "summer"),
}


def _make(root: Path, names: list[str]) -> Path:
    for name in names:
        write(root / name, CORPUS_FILES[name])
    return root


def test_same_results_whatever_creation_order(run, tmp_path):
    names = list(CORPUS_FILES)
    c1 = _make(tmp_path / "one" / "corpus", names)
    c2 = _make(tmp_path / "two" / "corpus", names[::-1])
    for extra in ((), ("--all-candidates", "--bands", "128", "--rows", "1"), ("-f", "jsonl")):
        r1 = run("pairs", c1, "--index", tmp_path / "i1", *extra)
        r2 = run("pairs", c2, "--index", tmp_path / "i2", *extra)
        assert r1.exit_code == r2.exit_code == 0
        assert r1.stdout
        assert r1.stdout == r2.stdout
    sigs1 = next((tmp_path / "i1").glob("signatures.*.npy")).read_bytes()
    sigs2 = next((tmp_path / "i2").glob("signatures.*.npy")).read_bytes()
    assert sigs1 == sigs2


def _npy_bytes(idx: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(idx.glob("*.npy")):
        role = p.name.rsplit(".", 2)[0]  # name without build id
        out[role] = p.read_bytes()
    return out


def test_jobs_1_and_2_identical(run, tmp_path, monkeypatch):
    # Small batches and signature tasks so that two workers really share the work.
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    monkeypatch.setattr(simdoc.stages.signature, "SIGNATURE_TASK_DOCS", 3)
    calls = []
    real_map = simdoc.engines.local.LocalEngine.map

    def spy(self, func, tasks, **kw):
        record = [func.__name__, 0, self.jobs]  # tasks are counted as the pool draws them
        calls.append(record)

        def counted():
            for task in tasks:
                record[1] += 1
                yield task

        return real_map(self, func, counted(), **kw)

    monkeypatch.setattr(simdoc.engines.local.LocalEngine, "map", spy)
    corpus = _make(tmp_path / "corpus", list(CORPUS_FILES))
    for i in range(12):
        write(corpus / "extra" / f"doc{i:02d}.txt", f"Document number {i} says {OTHER * (i % 3 + 1)}")
    r1 = run("pairs", corpus, "--index", tmp_path / "i1", "--jobs", "1", "--all-candidates")
    r2 = run("pairs", corpus, "--index", tmp_path / "i2", "--jobs", "2", "--all-candidates")
    assert r1.exit_code == 0, (r1.stderr, r1.exception)
    assert r2.exit_code == 0, (r2.stderr, r2.exception)
    assert r1.stdout and r1.stdout == r2.stdout
    # Shingling ran several tasks on two workers (computing the signatures too).
    parallel = {name for name, n_tasks, jobs in calls if jobs == 2 and n_tasks > 1}
    assert parallel == {"scan_staged"}, calls  # scan_batch, a range's rows staged (simdoc.stages.staged_rows)
    # Stage by stage, the signature stage computes them itself, also on two workers.
    for i, jobs in ((3, "1"), (4, "2")):
        for args in (("shingle", corpus), ("signature",), ("index",)):
            r = run(*args, "--index", tmp_path / f"i{i}", "--jobs", jobs, "-q") if args[0] != "index" else run(
                *args, "--index", tmp_path / f"i{i}", "-q"
            )
            assert r.exit_code == 0, r.stderr
    assert ("sign_rows", 2) in {(name, jobs) for name, n_tasks, jobs in calls if n_tasks > 1}, calls
    assert _npy_bytes(tmp_path / "i3") == _npy_bytes(tmp_path / "i4")
    # Signatures computed while reading (pairs) are the signature stage's, byte for byte; only
    # the stage-by-stage build keeps shingle sets, and only pairs keeps verified pairs.
    staged = {r: b for r, b in _npy_bytes(tmp_path / "i3").items() if not r.startswith("shingles.")}
    fused = {r: b for r, b in _npy_bytes(tmp_path / "i1").items() if not r.startswith("verified.")}
    assert fused == staged
    n1, n2 = _npy_bytes(tmp_path / "i1"), _npy_bytes(tmp_path / "i2")
    assert set(n1) == set(DOC_ROLES) | {
        "minhash.family", "signatures", "bands", "buckets", "groups", "verified.keys", "verified.jaccard"
    }
    assert set(n1) == set(n2)
    for role in n1:
        assert n1[role] == n2[role], role
    # The file names (build ids) agree as well.
    assert sorted(p.name for p in (tmp_path / "i1").glob("*.npy")) == sorted(
        p.name for p in (tmp_path / "i2").glob("*.npy")
    )


def test_jobs_2_default_batches(run, tmp_path):
    corpus = _make(tmp_path / "corpus", list(CORPUS_FILES))
    r1 = run("pairs", corpus, "--index", tmp_path / "i1", "--jobs", "1")
    r2 = run("pairs", corpus, "--index", tmp_path / "i2", "--jobs", "2")
    assert r1.exit_code == r2.exit_code == 0
    assert r1.stdout == r2.stdout
    assert _npy_bytes(tmp_path / "i1") == _npy_bytes(tmp_path / "i2")


def test_modified_document_is_picked_up(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "b.txt", TEXT_C)
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0 and r.stdout == ""
    write(corpus / "b.txt", TEXT_A + "\n")  # size changes, so the scan differs
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    (corpus / "b.txt").unlink()
    write(corpus / "new.txt", TEXT_A)
    r = run("pairs", corpus, "--index", idx)
    assert r.exit_code == 0
    assert r.stdout == "a.txt\tnew.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "2"


@pytest.mark.parametrize("content", ["x", "abcd", "abcde"])
def test_tiny_documents_copy_pairs(run, tmp_path, content):
    corpus = tmp_path / "c"
    write(corpus / "p.txt", content)
    write(corpus / "q.txt", content)
    write(corpus / "long.txt", OTHER)
    r = run("pairs", corpus, "--index", tmp_path / "idx")
    assert r.exit_code == 0
    assert r.stdout == "p.txt\tq.txt\t1.0000\t1.0000\n"

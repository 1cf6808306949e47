"""The index location is visible and manageable (issue 17, item 13).

-v says where the index is; the commands that read an index take a CORPUS
for its default index; `simdoc cache list|clean` lists and removes the
indexes of the cache directory, and nothing else; `show A B` compares two
files without any index.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLE_CORPUS, assert_clean_error, write

from simdoc.cli import cli
from simdoc.stages.common import default_index_path
from simdoc.store.cache import (
    cache_dir,
    cached_index_path,
    cached_indexes,
    remove_index,
)

T1 = "The harbour festival opens at dawn with boats, lanterns and a brass band on the long pier.\n"
T2 = "Completely unrelated prose about tide tables, cranes, ropes and the price of coal in winter.\n"


def invoke(*args, data=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=data)


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    write(root / "a.txt", T1)
    write(root / "b.txt", T1)
    write(root / "c.txt", T2)
    return root


@pytest.fixture
def built(corpus) -> tuple[Path, Path]:
    """A corpus and its index in the default place (the test's own cache directory)."""
    r = invoke("pairs", corpus)
    assert r.exit_code == 0, r.stderr
    idx = default_index_path(corpus)
    assert idx.parent == cache_dir() and (idx / "manifest.json").is_file()
    return corpus, idx


def index_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("index directory: ")]
    assert len(lines) == 1, stderr
    return lines[0].removeprefix("index directory: ")


# ---------------------------------------------------------------- -v


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "{corpus}"),
        ("pairs", "--index", "{idx}"),
        ("shingle", "{corpus}"),
        ("signature", "{corpus}"),
        ("index", "{corpus}"),
        ("clusters", "{corpus}"),
        ("dedup", "{corpus}"),
        ("show", "{corpus}", "a.txt", "c.txt"),
        ("stats", "{corpus}"),
        ("check", "{corpus}"),
        ("check", "--index", "{idx}"),
        ("query", "{corpus}/a.txt", "--corpus", "{corpus}"),
    ],
)
def test_verbose_says_where_the_index_is(built, args):
    corpus, idx = built
    r = invoke(*[a.format(corpus=corpus, idx=idx) for a in args], "-v")
    assert r.exit_code == 0, r.stderr
    assert index_line(r.stderr) == str(idx)
    assert "index directory" not in invoke(*[a.format(corpus=corpus, idx=idx) for a in args]).stderr


def test_verbose_index_path_is_absolute(corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke("pairs", corpus, "--index", "rel.idx", "-v")
    assert r.exit_code == 0, r.stderr
    assert index_line(r.stderr) == str(tmp_path / "rel.idx")


# ---------------------------------------------------------------- readers take a CORPUS


@pytest.mark.parametrize(
    "command",
    [("stats",), ("stats", "--format", "json"), ("check",), ("signature",), ("index",)],
)
def test_readers_take_a_corpus_for_its_default_index(built, command):
    corpus, idx = built
    by_corpus = invoke(*command, corpus)
    by_index = invoke(*command, "--index", idx)
    assert by_corpus.exit_code == by_index.exit_code == 0, by_corpus.stderr
    assert by_corpus.stdout == by_index.stdout
    assert re.sub(r"[\d.]+ s\b", "", by_corpus.stderr) == re.sub(r"[\d.]+ s\b", "", by_index.stderr)


def test_query_takes_a_corpus_for_its_default_index(built):
    corpus, idx = built
    r = invoke("query", corpus / "a.txt", "--corpus", corpus)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == invoke("query", corpus / "a.txt", "--index", idx).stdout != ""


@pytest.mark.parametrize("command", ["stats", "check", "signature", "index"])
def test_a_corpus_without_an_index_is_an_index_error(command, corpus):
    r = invoke(command, corpus)
    assert_clean_error(r, 4, "no simdoc index of", str(default_index_path(corpus)), "simdoc pairs")
    assert not default_index_path(corpus).exists()


def test_readers_without_corpus_or_index_are_a_usage_error():
    for command in ("stats", "check"):
        r = invoke(command)
        assert r.exit_code == 2 and "CORPUS or --index" in r.stderr


# ---------------------------------------------------------------- cache list


def test_cache_list(built, tmp_path):
    corpus, idx = built
    other = tmp_path / "other"
    write(other / "x.txt", T2)
    assert invoke("pairs", other, "-q").exit_code == 0
    elsewhere = tmp_path / "named.idx"
    assert invoke("pairs", corpus, "--index", elsewhere, "-q").exit_code == 0  # not in the cache: not listed
    (cache_dir() / "numba").mkdir()  # a cache of something else
    write(cache_dir() / "numba" / "kernel.nbi", "x")
    os.symlink(idx, cache_dir() / "link-to-an-index")
    r = invoke("cache", "list")
    assert r.exit_code == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert [row[0] for row in rows] == sorted([str(idx), str(cached_index_path(other))])
    mine = next(row for row in rows if row[0] == str(idx))
    assert mine[1] == str(corpus.resolve())
    assert int(mine[2]) == sum(p.stat().st_size for p in idx.iterdir())
    newest = max(p.stat().st_mtime for p in idx.iterdir())
    assert mine[3] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(newest))
    assert "2 indexes" in r.stderr


def test_cache_list_without_a_cache_directory():
    r = invoke("cache", "list")
    assert r.exit_code == 0 and r.stdout == ""


# ---------------------------------------------------------------- cache clean


def test_cache_clean_corpus_removes_only_its_index(built, tmp_path):
    corpus, idx = built
    other = tmp_path / "other"
    write(other / "x.txt", T2)
    assert invoke("pairs", other, "-q").exit_code == 0
    r = invoke("cache", "clean", corpus)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{idx}\n"
    assert not idx.exists() and cached_index_path(other).is_dir()
    assert "removed 1 index" in r.stderr
    # A path that `cache list` printed names the index too.
    r = invoke("cache", "clean", cached_index_path(other))
    assert r.exit_code == 0 and not cached_index_path(other).exists()
    # Nothing left to clean: a warning, no failure.
    r = invoke("cache", "clean", corpus)
    assert r.exit_code == 0 and r.stdout == "" and "no index of it" in r.stderr


def test_cache_clean_older_than_and_dry_run(built, tmp_path):
    corpus, idx = built
    other = tmp_path / "other"
    write(other / "x.txt", T2)
    assert invoke("pairs", other, "-q").exit_code == 0
    old = time.time() - 40 * 86400
    for p in idx.iterdir():
        os.utime(p, (old, old))
    dry = invoke("cache", "clean", "--older-than", "30", "--dry-run")
    assert dry.exit_code == 0 and dry.stdout == f"{idx}\n" and idx.is_dir()
    r = invoke("cache", "clean", "--older-than", "30")
    assert r.exit_code == 0 and r.stdout == f"{idx}\n"
    assert not idx.exists() and cached_index_path(other).is_dir()


def test_cache_clean_everything_leaves_what_is_not_an_index(built, tmp_path):
    corpus, idx = built
    (cache_dir() / "numba").mkdir()
    write(cache_dir() / "numba" / "kernel.nbi", "x")
    half = cache_dir() / "half-built"  # no manifest: not (yet) an index
    write(half / "lock", "")
    fake = cache_dir() / "fake"  # a manifest that is not simdoc's
    write(fake / "manifest.json", json.dumps({"format": "other"}))
    outside = tmp_path / "outside.idx"
    shutil.copytree(idx, outside)
    os.symlink(outside, cache_dir() / "link")
    r = invoke("cache", "clean")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"{idx}\n"
    assert sorted(p.name for p in cache_dir().iterdir()) == ["fake", "half-built", "link", "numba"]
    assert (outside / "manifest.json").is_file()


def test_cache_clean_keeps_files_simdoc_did_not_write(built):
    corpus, idx = built
    write(idx / "notes.txt", "mine")
    size = sum(p.stat().st_size for p in idx.iterdir())
    r = invoke("cache", "clean", corpus)
    assert r.exit_code == 0
    assert sorted(p.name for p in idx.iterdir()) == ["notes.txt"]
    assert "notes.txt" in r.stderr
    assert cached_indexes() == []
    # Issue 28 item 9: the summary counts the directory left, and only the bytes removed.
    summary = [line for line in r.stderr.splitlines() if line.startswith("simdoc: removed")]
    assert summary == [f"simdoc: removed 1 index ({size - 4:,} bytes); 1 directory left, holding files simdoc did not write"]


@pytest.mark.parametrize("lock_name, how", [("lock", fcntl.LOCK_EX), ("readers", fcntl.LOCK_SH)])
def test_cache_clean_never_removes_an_index_in_use(built, lock_name, how):
    """A writer holds `lock`, a reader `readers`: the index stays whole and the exit status is 5."""
    corpus, idx = built
    before = sorted(p.name for p in idx.iterdir())
    fd = os.open(idx / lock_name, os.O_RDWR)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        r = invoke("cache", "clean")
    finally:
        os.close(fd)
    assert r.exit_code == 5, r.stderr
    assert r.stdout == "" and "in use" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in idx.iterdir()) == before
    assert invoke("check", corpus).exit_code == 0
    assert invoke("cache", "clean").exit_code == 0 and not idx.exists()


def test_cache_clean_never_follows_a_readers_link(built, tmp_path):
    """Issue 18.6 in `cache clean`: it opened `readers` with O_CREAT and no O_NOFOLLOW, so a
    dangling link there made it create the link's target."""
    corpus, idx = built
    target = tmp_path / "made-by-simdoc"
    (idx / "readers").unlink()
    (idx / "readers").symlink_to(target)
    r = invoke("cache", "clean", corpus)
    assert r.exit_code == 4 and "symbolic link" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not target.exists() and (idx / "manifest.json").is_file()


def test_cache_clean_ignores_simdoc_index(built, tmp_path, monkeypatch):
    """$SIMDOC_INDEX names an index outside the cache: `cache clean CORPUS` still means the cached one."""
    corpus, idx = built
    named = tmp_path / "named.idx"
    monkeypatch.setenv("SIMDOC_INDEX", str(named))
    assert invoke("pairs", corpus, "-q").exit_code == 0 and named.is_dir()
    r = invoke("cache", "clean", corpus)
    assert r.exit_code == 0 and r.stdout == f"{idx}\n"
    assert named.is_dir()


def test_remove_index_touches_nothing_that_is_not_a_cached_index(built, tmp_path):
    corpus, idx = built
    outside = shutil.copytree(idx, tmp_path / "outside.idx")
    assert remove_index(outside) is None and (outside / "manifest.json").is_file()
    assert remove_index(idx) == [] and not idx.exists()
    assert remove_index(idx) is None and not idx.exists()  # a second cleaner finds nothing, makes nothing


# ---------------------------------------------------------------- show A B without an index


def test_show_two_files_without_an_index(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = SAMPLE_CORPUS / "policies" / "remote-work-policy-2023.txt"
    b = SAMPLE_CORPUS / "policies" / "remote-work-policy-2024.txt"
    r = invoke("show", a, b, "--format", "json")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    # The same numbers as the indexed pair (`simdoc pairs sample_corpus`: 0.8594, 0.8905).
    assert (got["doc_a"], got["doc_b"]) == (str(a), str(b))
    assert round(got["set_jaccard"], 4) == 0.8905 and round(got["estimated"], 4) == 0.8594
    assert got["passages"]
    assert list(tmp_path.iterdir()) == [] and not cache_dir().exists()  # no index anywhere
    text = invoke("show", a, b)
    assert text.exit_code == 0 and text.stdout.startswith(f"A  {a}  (389 words")
    word = json.loads(invoke("show", a, b, "--unit", "word", "--k", "3", "-f", "json").stdout)
    assert word["set_jaccard"] != got["set_jaccard"]


def test_show_two_files_errors(tmp_path):
    a = write(tmp_path / "a.txt", T1)
    r = invoke("show", a, tmp_path / "missing.txt")
    assert r.exit_code == 2 and "missing.txt is not a file" in r.stderr
    rows = write(tmp_path / "d.jsonl", json.dumps({"text": T1}) + "\n" + json.dumps({"text": T2}) + "\n")
    r = invoke("show", rows, a)
    assert r.exit_code == 2 and "holds 2 documents" in r.stderr
    binary = write(tmp_path / "b.bin", b"\0\1\2")
    r = invoke("show", a, binary)
    assert_clean_error(r, 3, "b.bin", "binary")


# ---------------------------------------------------------------- property: clean removes indexes, nothing else

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KINDS = ("index", "index-with-foreign-file", "no-manifest", "foreign-manifest", "file", "symlink-to-index", "empty-dir")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=st.lists(st.sampled_from(KINDS), max_size=6), older=st.sampled_from([None, "0"]))
def test_property_cache_clean_removes_only_simdoc_files_of_indexes(built, tmp_path, layout, older):
    corpus, template = built
    pristine = tmp_path / "pristine.idx"  # outside the cache; survives every example
    if not pristine.exists():
        shutil.copytree(template, pristine)
    cache = cache_dir()
    shutil.rmtree(cache)
    cache.mkdir()
    for n, kind in enumerate(layout):
        path = cache / f"{n}-{kind}"
        if kind.startswith("index"):
            shutil.copytree(pristine, path)
            if kind == "index-with-foreign-file":
                write(path / "notes.txt", "mine")
        elif kind == "no-manifest":
            write(path / "signatures.0123456789abcdef.npy", "x")
        elif kind == "foreign-manifest":
            write(path / "manifest.json", json.dumps({"format": "not-simdoc"}))
        elif kind == "file":
            write(path, "a file")
        elif kind == "symlink-to-index":
            os.symlink(pristine, path)
        else:
            path.mkdir()
    before = {p.name: sorted(q.name for q in p.iterdir()) if p.is_dir() and not p.is_symlink() else None for p in cache.iterdir()}
    r = invoke("cache", "clean", *(["--older-than", older] if older else []))
    assert r.exit_code == 0, r.stderr
    after = {p.name for p in cache.iterdir()}
    for name, entries in before.items():
        kind = name.split("-", 1)[1]
        if kind == "index":
            assert name not in after
        elif kind == "index-with-foreign-file":
            assert sorted(q.name for q in (cache / name).iterdir()) == ["notes.txt"]
        else:
            assert name in after
            if entries is not None:
                assert sorted(q.name for q in (cache / name).iterdir()) == entries
    assert (pristine / "manifest.json").is_file()


def test_an_index_given_where_a_corpus_goes_is_named_as_such(built):
    corpus, idx = built
    r = invoke("stats", idx)
    assert_clean_error(r, 4, "no simdoc index of", f"is an index itself: name it with --index {idx}")

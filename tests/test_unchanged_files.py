"""An edit that keeps a file's size and modification time is seen (issue 28.1), and "racily clean"
is decided from the file system's own times, not this host's clock (issue 28.2)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_lean_names import as_format_4

import simdoc
import simdoc.corpus.plain_batch
import simdoc.corpus.read
import simdoc.stages.plan
import simdoc.stages.scan
from simdoc.cli import cli
from simdoc.corpus.walk import FileEntry
from simdoc.stages.racy import RACY_NS, newest_ctimes, racy
from simdoc.stages.reread import DocumentReader
from simdoc.store.directory import FORMAT_VERSION, IndexStore
from simdoc.store.loaded import open_index
from simdoc.store.manifest import dump

HOUR = 3600 * 10**9
# A licence's opening, about 1 KB: what `cp copyright c/a.txt` put there in the trial.
TEXT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software "
    "and associated documentation files (the Software), to deal in the Software without restriction, "
    "including without limitation the rights to use, copy, modify, merge, publish, distribute, "
    "sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is "
    "furnished to do so, subject to the following conditions: The above copyright notice and this "
    "permission notice shall be included in all copies or substantial portions of the Software. THE "
    "SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT "
    "LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. "
    "IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER "
    "LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN "
    "CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.\n"
)


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def make_corpus(c: Path) -> None:
    """cp copyright c/a.txt; cp c/a.txt c/b.txt; echo extra >> c/b.txt; touch -d '1 hour ago' c/*.txt"""
    c.mkdir()
    (c / "a.txt").write_text(TEXT)
    (c / "b.txt").write_text(TEXT + "extra\n")
    hour_ago = time.time_ns() - HOUR
    for name in ("a.txt", "b.txt"):
        os.utime(c / name, ns=(hour_ago, hour_ago))


def rewrite_keeping_size_and_mtime(path: Path) -> None:
    """Other bytes of the same length, then the modification time set back (as rsync, tar, restores do)."""
    st = path.stat()
    other = "".join(reversed(TEXT))
    assert len(other) == st.st_size and other != path.read_text()
    path.write_text(other)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


# ---------------------------------------------------------------- 28.1


def test_the_trials_edit_that_keeps_size_and_mtime_is_seen(tmp_path):
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    first = run("pairs", c, "--index", i)
    assert first.exit_code == 0 and first.stdout.startswith("a.txt\tb.txt\t") and first.stdout.count("\n") == 1
    rewrite_keeping_size_and_mtime(c / "a.txt")
    again = run("pairs", c, "--index", i)
    fresh = run("pairs", c, "--index", tmp_path / "fresh")
    assert again.exit_code == fresh.exit_code == 0
    assert again.stdout == fresh.stdout == ""
    d = run("dedup", c, "--index", i, "--absolute")
    assert d.exit_code == 0 and d.stdout == "", d.output  # b.txt is the last copy of its text now
    assert run("check", "--index", i).exit_code == 0


def test_a_change_time_or_inode_alone_makes_a_file_read_again(tmp_path, monkeypatch):
    """Not as a racily clean file: every file is proven clean by time here (a file system clock
    far ahead), so only the stat recorded can tell the edit."""
    real = simdoc.stages.plan.newest_ctimes
    monkeypatch.setattr(simdoc.stages.plan, "newest_ctimes", lambda e, clock=None: {d: 2**62 for d in real(e, clock)})
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    assert run("pairs", c, "--index", i).stdout.count("\n") == 1
    rewrite_keeping_size_and_mtime(c / "a.txt")  # a new change time
    r = run("pairs", c, "--index", i, "-v")
    assert r.exit_code == 0 and r.stdout == "" and "read 1 file, 1 new or changed" in r.stderr, r.stderr
    # Replaced by another file (another inode) of the same size and times: read again too.
    (c / "a.txt").write_text(TEXT)
    assert run("pairs", c, "--index", i).stdout.count("\n") == 1
    st = (c / "a.txt").stat()
    (c / "new").write_text("".join(reversed(TEXT)))
    os.utime(c / "new", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(c / "new", c / "a.txt")
    r = run("pairs", c, "--index", i, "-v")
    assert r.exit_code == 0 and r.stdout == "" and "read 1 file, 1 new or changed" in r.stderr, r.stderr


def test_dedup_reads_again_what_it_names_and_keeps(tmp_path, monkeypatch):
    """A stat cannot prove an edit absent (one in the same tick of the file system's clock keeps
    it): dedup digests the files it names and the ones it keeps, and leaves a changed one out."""
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    (c / "z.txt").write_text(TEXT + "another extra line\n")
    assert run("dedup", c, "--index", i).stdout == "b.txt\nz.txt\n"
    # The stat as recorded (DocumentReader.unchanged asks unchanged_docs too).
    monkeypatch.setattr(DocumentReader, "unchanged_docs", lambda self, docs: np.ones(len(docs), dtype=bool))
    (c / "z.txt").write_text(TEXT.upper() + "another extra line\n")  # same size, other bytes
    r = run("dedup", "--index", i)
    assert r.exit_code == 0 and r.stdout == "b.txt\n", r.output
    assert "z.txt: changed or gone since it was indexed: left out" in r.stderr
    rewrite_keeping_size_and_mtime(c / "a.txt")  # the one kept: its cluster is left out whole
    r = run("dedup", "--index", i)
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert "a.txt: changed or gone since it was indexed, and it is the one to keep" in r.stderr


def test_a_stored_pair_is_verified_again_when_a_files_stat_moved_and_the_corpus_is_not_given(tmp_path):
    """`pairs --index` alone scans nothing: a pair from the verified-pairs table is taken only
    while both files still have the stat recorded; else the documents decide (their digest)."""
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    first = run("pairs", c, "--index", i)
    assert first.stdout.count("\n") == 1
    rewrite_keeping_size_and_mtime(c / "a.txt")
    r = run("pairs", "--index", i)
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert "a.txt: changed since it was indexed; its pairs are left out" in r.stderr
    (c / "a.txt").write_text(TEXT)  # the bytes indexed again, with another stat: verified, printed
    r = run("pairs", "--index", i)
    assert r.exit_code == 0 and r.stdout == first.stdout and "changed" not in r.stderr, r.output


def test_dedup_reads_each_file_of_many_documents_once(tmp_path, monkeypatch):
    c = tmp_path / "c"
    c.mkdir()
    lines = [{"text": TEXT}, {"text": TEXT + " one"}, {"text": TEXT + " two"}]
    (c / "d.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    seen = []
    import simdoc.stages.reread as reread

    real = reread.indexed_file_digest
    monkeypatch.setattr(reread, "indexed_file_digest", lambda path, *a, **k: seen.append(path) or real(path, *a, **k))
    r = run("dedup", c, "--index", tmp_path / "i")
    assert r.exit_code == 0 and r.stdout == "d.jsonl/#2\nd.jsonl/#3\n", r.output
    assert seen == [str(c / "d.jsonl")]


# ---------------------------------------------------------------- 28.2


def _entry(ctime_ns: int, dev: int = 7) -> FileEntry:
    return FileEntry("x", "/x", 10, ctime_ns - HOUR, ctime_ns, 1, dev)


def test_racy_is_decided_from_the_file_systems_times_not_this_hosts():
    now = time.time_ns()
    for offset in (-HOUR, 0, HOUR):  # the file system's clock an hour behind this host's, with it, ahead
        fs_now = now + offset
        listing = [_entry(fs_now - 10 * 10**9), _entry(fs_now)]
        newest = newest_ctimes(listing)
        assert newest == {7: fs_now}
        assert racy(listing[1], newest) and not racy(listing[0], newest)
        assert racy(_entry(fs_now - RACY_NS + 1), newest) and not racy(_entry(fs_now - RACY_NS), newest)
        assert racy(_entry(fs_now - 10 * 10**9, dev=8), newest)  # a device the listing did not see
    # The index's own file system: a time read there before the listing counts for that device only.
    assert newest_ctimes([_entry(now - 10 * 10**9)], clock=(7, now)) == {7: now}
    assert newest_ctimes([_entry(now - 10 * 10**9)], clock=(9, now)) == {7: now - 10 * 10**9, 9: now}


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-(2**40), 2**40)), min_size=1, max_size=30))
def test_racy_is_a_window_below_the_newest_change_time_of_each_device(times):
    listing = [_entry(ns, dev) for dev, ns in times]
    newest = newest_ctimes(listing)
    assert newest == {dev: max(ns for d, ns in times if d == dev) for dev, _ in times}
    for e in listing:
        assert racy(e, newest) == (e.ctime_ns > newest[e.dev] - RACY_NS)
        assert racy(e, {})  # a device with no time known: never proven clean
    for dev, ns in newest.items():
        assert racy(_entry(ns, dev), newest)  # the newest file itself is always racy


_DISCOVER = simdoc.stages.plan.discover_sources


def _behind(monkeypatch, pins: dict[str, int]) -> None:
    """The corpus as a file system whose clock is an hour behind this host's lists it (another
    device than the index's): every time an hour back, and the files of ``pins`` at the time
    given, as an edit in the same tick of that clock leaves them."""
    real = _DISCOVER

    def listing(*args, **kwargs):
        base, entries, skipped = real(*args, **kwargs)
        out = []
        for e in entries:
            times = {f: getattr(e, f) - HOUR for f in ("mtime_ns", "ctime_ns") if hasattr(e, f)}
            if e.id in pins:
                times = dict.fromkeys(times, pins[e.id])
            if hasattr(e, "dev"):
                times["dev"] = e.dev + 1
            out.append(dataclasses.replace(e, **times))
        return base, out, skipped

    monkeypatch.setattr(simdoc.stages.plan, "discover_sources", listing)


def test_an_edit_in_the_same_tick_of_a_clock_an_hour_behind_is_seen(tmp_path, monkeypatch):
    c, i = tmp_path / "c", tmp_path / "i"
    c.mkdir()
    (c / "a.txt").write_text(TEXT)
    (c / "b.txt").write_text(TEXT + "extra\n")
    # a.txt: the newest file of its file system, 10 s after b.txt
    _behind(monkeypatch, {"a.txt": time.time_ns() - HOUR + 10 * 10**9})
    first = run("pairs", c, "--index", i)
    assert first.exit_code == 0 and first.stdout.startswith("a.txt\tb.txt\t"), first.output
    (c / "a.txt").write_text("".join(reversed(TEXT)))  # same size; its listed stat stays the same
    again = run("pairs", c, "--index", i)
    assert again.exit_code == 0 and again.stdout == "", again.output  # what a fresh index prints
    assert run("dedup", c, "--index", i).stdout == ""


def test_a_racily_clean_file_is_read_again_until_a_later_change_proves_it_clean(tmp_path, monkeypatch):
    c, i = tmp_path / "c", tmp_path / "i"
    c.mkdir()
    (c / "a.txt").write_text(TEXT)
    (c / "b.txt").write_text(TEXT + "extra\n")
    pinned = time.time_ns() - HOUR + 10 * 10**9
    _behind(monkeypatch, {"a.txt": pinned})  # b.txt 10 s older than a.txt: proven clean
    simdoc.find_pairs(c, i, jobs=1)
    stage = open_index(i).stage("shingle")
    assert [dev for dev, _ in stage["newest_ctime"]] == sorted({(c / "a.txt").stat().st_dev + 1, i.stat().st_dev})
    again = simdoc.find_pairs(c, i, jobs=1)
    assert again.stages[0].detail == "up to date (1 racily clean files re-read)"
    # A file changed 3 s later on that file system: a.txt is read once more (the time recorded
    # is the last published scan's), and then proven clean.
    (c / "c.txt").write_text("something else entirely")
    _behind(monkeypatch, {"a.txt": pinned, "c.txt": pinned + 3 * 10**9})
    third = simdoc.find_pairs(c, i, jobs=1)
    assert third.stages[0].detail.startswith("3 documents; read 2 files, 1 new or changed"), third.stages[0].detail
    reads: list[str] = []
    real = simdoc.corpus.read.read_document
    monkeypatch.setattr(simdoc.corpus.read, "read_document", lambda path, **kw: reads.append(Path(path).name) or real(path, **kw))
    real_plain = simdoc.stages.scan.read_plain  # the scan's way for a plain file
    monkeypatch.setattr(simdoc.stages.scan, "read_plain", lambda path, *a: reads.append(Path(path).name) or real_plain(path, *a))
    together = simdoc.corpus.plain_batch.PlainBatch.__init__  # a task's small files in one compiled loop
    monkeypatch.setattr(simdoc.corpus.plain_batch.PlainBatch, "__init__", lambda self, paths, *a: reads.extend(Path(p).name for p in paths) or together(self, paths, *a))
    fourth = simdoc.find_pairs(c, i, jobs=1)
    assert fourth.stages[0].detail == "up to date (1 racily clean files re-read)"
    assert reads == ["c.txt"]  # now the newest: a.txt is proven clean


# ---------------------------------------------------------------- the index format


def test_a_format_3_index_is_read_and_upgraded_by_the_next_update(tmp_path):
    """Format 3 had no change time, inode or device: such an index is read (those unknown), its
    next update reads every file once (kept if its digest is the one indexed) and records them."""
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    assert run("pairs", c, "--index", i).stdout.count("\n") == 1
    as_format_4(i)  # format 3 stored the ids as format 4 did
    manifest = json.loads((i / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    for role in ("docs.ctime_ns", "docs.ino", "docs.dev"):
        shingle["files"].pop(shingle["roles"].pop(role))
    del shingle["newest_ctime"]
    manifest["format_version"] = 3
    (i / "manifest.json").write_bytes(dump(manifest))
    assert run("check", "--index", i).exit_code == 0
    assert run("dedup", "--index", i).stdout == "b.txt\n"
    r = run("pairs", c, "--index", i, "-v")  # nothing changed: read, kept, and written as the current format
    assert r.exit_code == 0 and r.stdout.startswith("a.txt\tb.txt") and "read 2 files, 0 new or changed" in r.stderr
    assert IndexStore(i).read_manifest()["format_version"] == FORMAT_VERSION
    rewrite_keeping_size_and_mtime(c / "a.txt")
    r = run("pairs", c, "--index", i)
    assert r.exit_code == 0 and r.stdout == "", r.output
    docs = open_index(i).docs()
    assert np.array_equal(docs.columns["ino"], [(c / n).stat().st_ino for n in ("a.txt", "b.txt")])


@pytest.mark.parametrize("readable", [(3, 4), (3, 4, 5), (3, 4, 5, 6)])  # the simdocs before formats 5, 6 and 7
def test_an_older_simdoc_refuses_a_newer_index_by_its_version(tmp_path, monkeypatch, readable):
    import simdoc.store.directory as directory

    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    run("pairs", c, "--index", i)
    monkeypatch.setattr(directory, "READABLE_VERSIONS", readable)
    r = run("pairs", "--index", i)
    listed = ", ".join(map(str, readable))
    assert r.exit_code == 4 and f"has format version {FORMAT_VERSION}, this simdoc reads versions {listed}" in r.stderr


@pytest.mark.parametrize("value", [[[1]], [[1, "2"]], "x", [[1, 2, 3]]])
def test_a_damaged_newest_ctime_is_refused(tmp_path, value):
    c, i = tmp_path / "c", tmp_path / "i"
    make_corpus(c)
    run("pairs", c, "--index", i)
    manifest = json.loads((i / "manifest.json").read_text())
    manifest["stages"]["shingle"]["newest_ctime"] = value
    (i / "manifest.json").write_bytes(dump(manifest))
    r = run("pairs", "--index", i)
    assert r.exit_code == 4 and "'newest_ctime' has a value of the wrong kind" in r.stderr, r.stderr
    shutil.rmtree(i)

"""A scan of the listing the current build was made from reads only its racily clean files, builds no
table for them, and records its times, so that the next run reads them no more (simdoc.stages.recheck)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import simdoc
import simdoc.stages.plan
import simdoc.stages.racy
import simdoc.stages.scan
import simdoc.stages.collector
from simdoc.stages.racy import RACY_NS

TEXT = "the quick brown fox jumps over the lazy dog and runs far away into the woods " * 8


def _corpus(c: Path) -> None:
    c.mkdir()
    (c / "a.txt").write_text(TEXT)
    (c / "b.txt").write_text(TEXT + "and a few more words at the end of it\n")
    (c / "c.txt").write_text("something else entirely, with nothing in common " * 4)


def _clock(monkeypatch, ahead_ns: int | None) -> None:
    """The index's clock as the scan reads it: none (the files listed are then the newest times
    known, and all racily clean), or ``ahead_ns`` later than now (as a run that long after)."""
    real = simdoc.stages.racy.index_clock

    def clock(index):
        got = real(index)
        return None if ahead_ns is None or got is None else (got[0], got[1] + ahead_ns)

    monkeypatch.setattr(simdoc.stages.plan, "index_clock", clock)


def _reads(monkeypatch) -> list[str]:
    """The files the scan tasks read (run in this process: jobs=1)."""
    seen: list[str] = []
    real = simdoc.stages.scan._scan
    monkeypatch.setattr(simdoc.stages.scan, "_scan", lambda task: seen.extend(Path(f[1]).name for f in task.files) or real(task))
    return seen


def test_racily_clean_files_read_once_then_proven_clean(tmp_path, monkeypatch):
    c, i = tmp_path / "c", tmp_path / "i"
    _corpus(c)
    _clock(monkeypatch, None)
    first = simdoc.find_pairs(c, i, jobs=1)
    # Now a run long enough after: every file is read once, and none has changed.
    _clock(monkeypatch, 3 * RACY_NS)
    reads = _reads(monkeypatch)
    again = simdoc.find_pairs(c, i, jobs=1)
    assert again.stages[0].detail == "up to date (3 racily clean files re-read)"
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]
    assert [(p.doc_a, p.doc_b) for p in again] == [(p.doc_a, p.doc_b) for p in first]
    # They were read after that clock's time: proven clean, never read again.
    reads.clear()
    third = simdoc.find_pairs(c, i, jobs=1)
    assert third.stages[0].detail == "up to date"
    assert reads == []


def test_racily_clean_files_read_again_build_no_table(tmp_path, monkeypatch):
    c, i = tmp_path / "c", tmp_path / "i"
    _corpus(c)
    _clock(monkeypatch, None)
    simdoc.find_pairs(c, i, jobs=1)
    generation = simdoc.find_pairs(c, i, jobs=1).generation

    def no_table(*args, **kwargs):
        raise AssertionError("a next docs table was begun")

    monkeypatch.setattr(simdoc.stages.collector, "TableBuilder", no_table)
    _clock(monkeypatch, 3 * RACY_NS)
    again = simdoc.find_pairs(c, i, jobs=1)
    assert again.stages[0].detail == "up to date (3 racily clean files re-read)"
    assert again.generation == generation  # nothing new: no update


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_racily_clean_file_edited_in_the_same_tick_is_still_seen(tmp_path, monkeypatch, jobs):
    """Its stat the one listed (size, times set back, and the change time too, as a file system
    with a coarse tick would give): only its bytes tell, and they are read."""
    c, i = tmp_path / "c", tmp_path / "i"
    _corpus(c)
    _clock(monkeypatch, None)
    simdoc.find_pairs(c, i, jobs=jobs)
    st = (c / "a.txt").stat()
    listed = simdoc.stages.plan.discover_sources

    def same_stat(*args, **kwargs):  # a.txt's change time as first listed
        base, entries, skipped = listed(*args, **kwargs)
        entries.stat[entries.ids.index("a.txt"), 2] = st.st_ctime_ns
        return base, entries, skipped

    monkeypatch.setattr(simdoc.stages.plan, "discover_sources", same_stat)
    (c / "a.txt").write_text(TEXT.replace("fox", "cat"))
    os.utime(c / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    _clock(monkeypatch, 3 * RACY_NS)
    again = simdoc.find_pairs(c, i, jobs=jobs)
    assert again.stages[0].detail.startswith("3 documents; read 3 files, 1 new or changed"), again.stages[0].detail
    fresh = simdoc.find_pairs(c, tmp_path / "fresh", jobs=jobs)
    assert [(p.doc_a, p.doc_b, p.jaccard) for p in again] == [(p.doc_a, p.doc_b, p.jaccard) for p in fresh]

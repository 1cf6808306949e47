"""Folders listed ahead of the walk on threads (simdoc.corpus.listing_ahead): the walk finds the
same documents, with the same stat, and passes over the same paths with the same reasons, on any
number of threads, on random trees (links, loops, FIFOs, hidden and undecodable names), with
threads made to wait at every listing, and an error in a thread is raised in the walk."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc.corpus.folders as folders
import simdoc.corpus.listing_ahead as listing_ahead
from simdoc.corpus.listing_ahead import ListingAhead
from simdoc.corpus.walk import discover
from tests.test_walk_columns import _KINDS, _NAMES, _make, path  # noqa: F401 - path: both ways of stat-ing


def _walked(root: str, follow: bool, threads: int):
    entries, skipped = discover(root, follow_symlinks=follow, columns=True, threads=threads)
    return list(entries.ids), entries.stat.tolist(), [(s.id, s.reason, s.size, s.mtime_ns) for s in skipped]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.lists(st.tuples(st.lists(_NAMES, min_size=1, max_size=4), _KINDS), min_size=1, max_size=30),
    follow=st.booleans(),
    threads=st.integers(2, 4),
    ahead=st.integers(1, 3),
)
def test_a_walk_on_threads_finds_what_one_thread_finds(path, spec, follow, threads, ahead, monkeypatch):  # noqa: F811
    monkeypatch.setattr(listing_ahead, "AHEAD", ahead)  # threads wait for the walk at almost every folder
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "c")
        os.mkdir(root)
        _make(os.fsencode(root), spec)
        assert _walked(root, follow, threads) == _walked(root, follow, 1)


def test_an_error_in_a_listing_thread_is_raised_in_the_walk(tmp_path, monkeypatch):
    for d in "abc":
        (tmp_path / d).mkdir()
        (tmp_path / d / "f.txt").write_text(d)
    real = folders.list_folder

    def failing(directory, rel, *args):
        if rel == "b":
            raise MemoryError("listing b")
        return real(directory, rel, *args)

    monkeypatch.setattr("simdoc.corpus.walk.list_folder", failing)
    with pytest.raises(MemoryError, match="listing b"):
        discover(tmp_path, columns=True, threads=2)


def test_a_folder_taken_before_a_thread_begins_it_is_listed_by_the_walk_and_threads_stop_on_exit():
    listed = []

    def list_folder(name, skipped):
        listed.append(name)
        skipped.append(f"passed over in {name}")
        return [name]

    with ListingAhead(list_folder, threads=1) as lister:  # no thread: the walk lists each folder itself
        job = lister.ahead((0,), "a")
        assert listed == []
        assert lister.take(job) == (["a"], ["passed over in a"])
    with ListingAhead(list_folder, threads=3) as lister:
        jobs = [lister.ahead((i,), name) for i, name in enumerate("xyz")]
        assert [lister.take(j)[0] for j in jobs] == [["x"], ["y"], ["z"]]
        threads = list(lister._threads)
    assert len(threads) == 2 and not any(t.is_alive() for t in threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_folder_listed_ahead_but_not_entered_reports_nothing(tmp_path, threads):
    (tmp_path / "a.txt").write_text("a")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path, tmp_path / "d" / "loop")  # followed: the corpus again, already walked
    entries, skipped = discover(tmp_path, follow_symlinks=True, columns=True, threads=threads)
    assert list(entries.ids) == ["a.txt"]
    assert [(s.id, s.reason) for s in skipped] == [
        ("d/loop", "directory already walked (symbolic link loop or second link to it)"),
        ("pipe", "not a regular file (device, FIFO or socket)"),
    ]

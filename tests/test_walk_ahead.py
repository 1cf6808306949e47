"""A first build on a pool reads the files as the walk lists them (simdoc.stages.ahead, issue 32),
and builds exactly what the walk-first build does."""

import json
import os
import threading

import numpy as np
import pytest

import simdoc.stages.ahead
import simdoc.stages.scan
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.ahead import ReadAhead, walk_ahead
from simdoc.stages.plan import scan_corpus
from simdoc.stages.scan import scan_batch
from simdoc.stages.shingle import build_shingles
from simdoc.store.directory import IndexStore

SIGNER = SignatureParams(16).resolved()


def _corpus(root):
    for d in range(3):
        for i in range(4):
            p = root / f"d{d}" / f"f{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"document {d} {i} " + "alpha beta gamma delta " * (i + 1), encoding="utf-8")
    (root / "d1" / "skip.md").write_text("not included", encoding="utf-8")
    (root / "d1" / "bin.txt").write_bytes(b"\x00\x01binary\x00" * 10)
    (root / "d2" / "empty.txt").write_text("", encoding="utf-8")
    (root / ".hidden.txt").write_text("hidden", encoding="utf-8")
    os.symlink(root / "d0" / "f0.txt", root / "d0" / "link.txt")


class _Engine:
    """An engine that runs the tasks here, one at a time, and notes when it took the first."""

    def __init__(self, first: threading.Event | None = None, fail: bool = False) -> None:
        self.first, self.fail, self.closed = first, fail, False

    def map(self, func, tasks):
        try:
            for task in tasks:
                if self.fail:
                    raise KeyboardInterrupt
                if self.first is not None:
                    self.first.set()
                yield func(task)
        finally:
            self.closed = True


def _gated(monkeypatch, gate: threading.Event, opened: list):
    """The walk stops after its first run of files until ``gate`` is set (``opened``: whether it was)."""
    real = simdoc.stages.ahead.discover_runs

    def runs(*args):
        for n, run in enumerate(real(*args)):
            if n == 1:
                opened.append(gate.wait(10))
            yield run

    monkeypatch.setattr(simdoc.stages.ahead, "discover_runs", runs)


def _store(tmp_path):
    store = IndexStore(tmp_path / "idx")
    store.ensure_dir()
    (tmp_path / "idx" / "lock").touch()
    return store


def test_the_first_task_is_made_while_the_walk_still_lists(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    monkeypatch.setattr(simdoc.stages.ahead, "_TELL_FILES", 2)  # files told a folder at a time here
    first, opened = threading.Event(), []
    _gated(monkeypatch, first, opened)
    store = _store(tmp_path)
    engine = _Engine(first)
    with ReadAhead(str(tmp_path / "c"), store, engine, ShingleParams().resolved(), SIGNER) as ahead:
        scan = ahead.scan(store, {"stages": {}}, tmp_path / "c", None, False)
        results = list(ahead.results())
    assert opened == [True]  # the walk waited for a task made of what it had listed, and got one
    walked = scan_corpus(store, {"stages": {}}, tmp_path / "c", store.path, ShingleParams().resolved(), None, False)
    assert scan.listing.ids == walked.listing.ids and np.array_equal(scan.listing.stat, walked.listing.stat)
    assert scan.scan_id == walked.scan_id and scan.skipped == walked.skipped
    assert sum(len(r.files) for r in results) == len(walked.entries)


def test_an_interrupt_stops_the_walk_and_the_engine(tmp_path):
    _corpus(tmp_path / "c")
    store = _store(tmp_path)
    engine = _Engine(fail=True)
    with pytest.raises(KeyboardInterrupt):
        with ReadAhead(str(tmp_path / "c"), store, engine, ShingleParams().resolved(), SIGNER) as ahead:
            ahead.scan(store, {"stages": {}}, tmp_path / "c", None, False)
    assert not ahead.thread.is_alive() and engine.closed


def test_a_walk_that_fails_raises_in_the_main_thread(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    real = simdoc.stages.ahead.discover_runs

    def runs(*args):
        for n, run in enumerate(real(*args)):
            if n == 2:
                raise OSError("the disk went away")
            yield run

    monkeypatch.setattr(simdoc.stages.ahead, "discover_runs", runs)
    store = _store(tmp_path)
    with pytest.raises(OSError, match="went away"):
        with ReadAhead(str(tmp_path / "c"), store, _Engine(), ShingleParams().resolved(), SIGNER) as ahead:
            ahead.scan(store, {"stages": {}}, tmp_path / "c", None, False)
    assert not ahead.thread.is_alive()


def test_only_a_first_build_of_one_folder_on_a_pool_reads_ahead(tmp_path):
    _corpus(tmp_path / "c")
    c, shingle = tmp_path / "c", ShingleParams().resolved()
    idx = _store(tmp_path)
    assert walk_ahead(c, idx, LocalEngine(1), shingle, SIGNER, False) is None  # one process: nothing to overlap
    assert walk_ahead(c, idx, LocalEngine(2), shingle, SIGNER, True) is None  # rows kept: the plan needs the listing
    assert walk_ahead(c, idx, LocalEngine(2), shingle, None, False) is None  # `simdoc shingle`: sets kept by file
    assert walk_ahead([c / "d0", c / "d1"], idx, LocalEngine(2), shingle, SIGNER, False) is None
    with walk_ahead(c, idx, LocalEngine(2), shingle, SIGNER, False) as ahead:
        assert isinstance(ahead, ReadAhead)


@pytest.mark.parametrize("globs", [{}, {"include": ("*.txt",), "exclude": ("d2/*",)}])
def test_a_build_read_ahead_is_the_build_walked_first(tmp_path, monkeypatch, globs):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 3)
    out = {}
    for jobs in (1, 2):
        idx = tmp_path / f"i{jobs}"
        res = build_shingles(tmp_path / "c", idx, ShingleParams(**globs), signature=SIGNER, engine=LocalEngine(jobs))
        stage = json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]
        arrays = {p.name: p.read_bytes() for p in sorted(idx.glob("*.npy"))}
        out[jobs] = (res.warnings, stage["scan_id"], stage["skipped"], stage["n_docs"], arrays)
    assert out[1] == out[2]
    assert any("link.txt" in s["id"] for s in out[2][2])  # the walk's skipped paths are there

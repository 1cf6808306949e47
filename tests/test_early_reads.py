"""A first build on a pool hands its first files to reading tasks while the walk goes on
(simdoc.stages.early, issue 32), and builds exactly what the walk-first build does."""

import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc.stages.early
import simdoc.stages.scan
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.shingle import build_shingles
from simdoc.store.loaded import open_index

SIGNER = SignatureParams(16).resolved()


def _corpus(root, folders=3, files=4):
    for d in range(folders):
        for i in range(files):
            p = root / f"d{d}" / f"f{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"document {d} {i} " + "alpha beta gamma delta " * (i + 1), encoding="utf-8")
    (root / "d1" / "skip.md").write_text("not included", encoding="utf-8")
    (root / "d1" / "bin.txt").write_bytes(b"\x00\x01binary\x00" * 10)
    (root / "d2" / "empty.txt").write_text("", encoding="utf-8")
    (root / ".hidden.txt").write_text("hidden", encoding="utf-8")
    (root / "d1" / "sub").mkdir()
    (root / "d1" / "sub" / "deep.txt").write_text("alpha beta gamma delta deep", encoding="utf-8")
    (root / "top.txt").write_text("alpha beta gamma delta " * 3, encoding="utf-8")
    os.symlink(root / "d0" / "f0.txt", root / "d0" / "link.txt")


class _Engine(LocalEngine):
    """Two jobs; a pool started early runs each task here as it is handed over (the rest as their
    results are asked for), and notes for each whether the walk had ended then (``walk_over``)."""

    def __init__(self, walk_over, busy: int = 0) -> None:
        super().__init__(2)
        self.walk_over, self.taken, self.mapped, self.closed = walk_over, [], 0, False
        self.busy = busy  # tasks its pool says are running

    def map(self, func, tasks, **kw):
        self.mapped += 1
        return super().map(func, tasks, **kw)

    def started(self, func):
        engine = self

        class Results:
            """Each task run when it is handed over; the rest as they are asked for."""

            def __init__(self):
                self.done, self.rest = [], iter(())

            def submit(self, task):
                engine.taken.append(engine.walk_over())
                self.done.append(func(task))

            def running(self):
                return engine.busy

            def then(self, tasks):
                def run():
                    for task in tasks:
                        engine.taken.append(engine.walk_over())
                        yield func(task)

                self.rest = run()

            def __iter__(self):
                return self

            def __next__(self):
                return self.done.pop(0) if self.done else next(self.rest)

            def close(self):
                engine.closed = True

        return Results()


def _watched_walk(monkeypatch, fail_after=None, gate=None):
    """The walk's end noted (``over()``); ``fail_after``: the walk raises after that many runs;
    ``gate``: the walk waits for it before its second run (noted in ``over.opened``)."""
    real = simdoc.stages.early.walk_runs
    ended, opened = [], []

    def runs(*args):
        for n, run in enumerate(real(*args)):
            if fail_after is not None and n == fail_after:
                raise OSError("the disk went away")
            if gate is not None and n == 1:
                opened.append(gate.wait(10))
            yield run
        ended.append(True)

    monkeypatch.setattr(simdoc.stages.early, "walk_runs", runs)

    def over():
        if gate is not None:
            gate.set()
        return bool(ended)

    over.opened = opened
    return over


def _built(index):
    """Everything a build wrote that does not name it: the docs table's columns, the signatures,
    the stage's counts, skipped files and scan id."""
    loaded = open_index(index)
    docs = loaded.docs()
    table = {name: np.asarray(column).tolist() for name, column in docs.columns.items()}
    table["ids"], table["sources"] = list(docs.ids), list(docs.sources)
    shingle = loaded.stage("shingle")
    return table, np.asarray(loaded.signatures()).copy(), shingle["n_docs"], shingle["skipped"], shingle["scan_id"]


def _build(corpus, index, engine, params=ShingleParams(include=["*.txt"])):
    return build_shingles(corpus, index, params, signature=SIGNER, engine=engine)


def test_tasks_are_taken_while_the_walk_still_lists_and_the_build_is_the_walk_first_one(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    over = _watched_walk(monkeypatch, gate=threading.Event())
    engine = _Engine(over)
    _build(tmp_path / "c", tmp_path / "early", engine)
    assert over.opened == [True]  # the first task was taken while the walk waited to go on
    assert engine.taken[0] is False
    assert engine.mapped == 0 and engine.closed
    _build(tmp_path / "c", tmp_path / "walked", LocalEngine(1))
    early, walked = _built(tmp_path / "early"), _built(tmp_path / "walked")
    assert early[0] == walked[0]
    assert np.array_equal(early[1], walked[1])
    assert early[2:] == walked[2:]


def test_the_files_past_the_early_ones_are_tasks_made_after_the_walk(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    monkeypatch.setattr(simdoc.stages.early, "EARLY_FILES", 3)
    over = _watched_walk(monkeypatch, gate=threading.Event())
    engine = _Engine(over)
    _build(tmp_path / "c", tmp_path / "early", engine)
    assert over.opened == [True] and engine.taken[0] is False
    assert engine.taken[-1] is True and len(engine.taken) == 8  # 16 files: 4 early (two tasks), the rest made after the walk
    _build(tmp_path / "c", tmp_path / "walked", LocalEngine(1))
    early, walked = _built(tmp_path / "early"), _built(tmp_path / "walked")
    assert early[0] == walked[0] and np.array_equal(early[1], walked[1]) and early[2:] == walked[2:]


def test_while_the_walk_goes_on_one_task_fewer_than_processes_runs(tmp_path, monkeypatch):
    """The walking process is one of the jobs: with one task running (of two jobs), the next waits."""
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    engine = _Engine(_watched_walk(monkeypatch), busy=1)
    _build(tmp_path / "c", tmp_path / "idx", engine)
    assert engine.taken == [True] * 8  # every task handed over once the walk had ended


def test_a_walk_of_fewer_tasks_than_processes_starts_no_early_pool(tmp_path, monkeypatch):
    _corpus(tmp_path / "c", folders=3, files=1)
    engine = _Engine(_watched_walk(monkeypatch))
    _build(tmp_path / "c", tmp_path / "idx", engine)  # 6 files: one task
    assert engine.taken == [] and engine.mapped == 1


def test_no_early_files_walks_first(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 2)
    monkeypatch.setattr(simdoc.stages.early, "EARLY_FILES", 0)
    engine = _Engine(_watched_walk(monkeypatch))
    _build(tmp_path / "c", tmp_path / "idx", engine)
    assert engine.taken == [] and engine.mapped == 1


def test_a_walk_that_fails_after_the_pool_started_raises_and_stops_it(tmp_path, monkeypatch):
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 1)
    engine = _Engine(_watched_walk(monkeypatch, fail_after=3))
    with pytest.raises(OSError, match="the disk went away"):
        _build(tmp_path / "c", tmp_path / "idx", engine)
    assert engine.taken and engine.closed


def test_a_real_pool_stops_when_the_walk_fails_after_it_started(tmp_path, monkeypatch):
    """The pool's thread waits for tasks this process has not made yet: it is let go, not joined forever."""
    _corpus(tmp_path / "c")
    monkeypatch.setattr(simdoc.stages.scan, "BATCH_DOCS", 1)
    _watched_walk(monkeypatch, fail_after=3)
    done = []
    thread = threading.Thread(target=lambda: done.append(_raises(tmp_path)), daemon=True)
    thread.start()
    thread.join(60)
    assert done == ["the disk went away"]


def _raises(tmp_path):
    try:
        _build(tmp_path / "c", tmp_path / "idx", LocalEngine(2))
    except OSError as exc:
        return str(exc)
    return None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    batch=st.integers(1, 4),
    early=st.integers(1, 6),
)
def test_any_cut_and_any_number_of_early_files_build_the_same(tmp_path_factory, sizes, batch, early):
    root = tmp_path_factory.mktemp("c")
    for d, n in enumerate(sizes):
        for i in range(n):
            p = root / f"d{d}" / f"f{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"doc {d} {i} " + "w%d " % (i % 2) * (i + 2), encoding="utf-8")
    (root / "x.txt").write_text("one more document here", encoding="utf-8")
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(simdoc.stages.scan, "BATCH_DOCS", batch)
        mp.setattr(simdoc.stages.early, "EARLY_FILES", early)
        over = _watched_walk(mp)
        out = tmp_path_factory.mktemp("i")
        _build(root, out / "early", _Engine(over), ShingleParams())
        mp.setattr(simdoc.stages.scan, "BATCH_DOCS", 2000)
        _build(root, out / "walked", LocalEngine(1), ShingleParams())
    finally:
        mp.undo()
    a, b = _built(out / "early"), _built(out / "walked")
    assert a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]

"""The shingle stage's main process holds a walk of many small files as columns (issue 29).

A folder of 10^6 small files peaked at 1,237 MB in the main process, and the
reading workers forked from it at ~1,075 MB: the walk held each file's
``os.stat_result`` (~0.5 KB) until it ended, the scan id was hashed from one
string of every file's stat (~0.8 GB at 10^6), and the files to read were
held as FileEntry objects (with a dict of their digests) while they were
read. The memory traced (tracemalloc) now grows by about the listing's own
columns a file: its id and its stat (its path is the root's and its id).
"""

from __future__ import annotations

import os
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.walk import Entries, FileEntry, PrefixedPaths, Skipped, discover
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import plan, scan
from simdoc.stages.common import build_id
from simdoc.stages.plan import Listing, scan_id_of
from simdoc.stages.shingle import build_shingles
from simdoc.store import doccolumns
from simdoc.store.loaded import open_index


def _corpus(folder, n_files: int, per_folder: int = 500) -> None:
    for f in range(n_files):
        sub = folder / f"d{f // per_folder:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"doc{f:07d}.txt").write_text(f"file {f} of a tide in the harbour at dawn")


def _traced_peak(run) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_walk_as_columns_holds_no_stat_result_a_file(tmp_path):
    # Folders of 100 files: the walk stats a folder's entries in one C loop, so a folder's stat
    # results are held while it is listed (bounded by the folder, not the corpus).
    _corpus(tmp_path / "few", 200, per_folder=100)
    _corpus(tmp_path / "many", 3200, per_folder=100)
    discover(tmp_path / "few", columns=True)  # imports and caches, once
    few = _traced_peak(lambda: discover(tmp_path / "few", columns=True))
    many = _traced_peak(lambda: discover(tmp_path / "many", columns=True))
    # An id and 40 bytes of stat a file (~210 bytes traced here: a path is the root's and the id, made
    # when asked for); with each stat_result and path held, ~935.
    assert (many - few) / 3000 < 300, (few, many)


def test_the_shingle_stage_holds_no_entry_a_file_it_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BATCH_DOCS", 50)  # a task: 50 files (run here: LocalEngine(1))
    monkeypatch.setattr(doccolumns, "TABLE_CHUNK_ROWS", 512)  # the table written in chunks (test_bounded_table)
    monkeypatch.setattr(plan, "ID_BLOCK", 256)  # the scan id hashed 256 files at a time
    signature = SignatureParams(16).resolved()

    def build(name: str, n: int) -> int:
        _corpus(tmp_path / name, n)
        peak = _traced_peak(lambda: build_shingles(tmp_path / name, tmp_path / f"{name}.idx", ShingleParams(), signature=signature, engine=LocalEngine(1)))
        assert len(open_index(tmp_path / f"{name}.idx").docs()) == n
        return peak

    build("warm", 20)  # the first build in a process compiles and imports
    few, many = build("few", 200), build("many", 3200)
    # ~420 bytes a file here (the listing's columns, the table's chunk); with a FileEntry, its tuple
    # and a dict entry held for each file to read, and the scan id hashed from one string, ~900.
    assert (many - few) / 3000 < 600, (few, many)


@settings(max_examples=60, deadline=None)
@given(
    files=st.lists(st.tuples(st.text(max_size=6), st.lists(st.integers(-(2**63), 2**63 - 1), min_size=5, max_size=5)), max_size=9),
    skipped=st.lists(st.tuples(st.text(max_size=4), st.text(max_size=4), st.integers(-1, 2**40), st.integers(-1, 2**62)), max_size=3),
    block=st.integers(1, 4),
)
def test_the_scan_id_hashed_a_block_at_a_time_is_the_one_of_the_whole_text(files, skipped, block):
    entries = [FileEntry(name, "/c/" + name, *stat) for name, stat in files]
    passed = [Skipped(*s) for s in skipped]
    expected = build_id([[e.id, *e.stat()] for e in entries] + [[s.id, s.reason, s.size, s.mtime_ns] for s in passed])
    was = plan.ID_BLOCK
    plan.ID_BLOCK = block
    try:
        assert scan_id_of(Listing.of(entries), passed) == expected
    finally:
        plan.ID_BLOCK = was


@given(st.lists(st.sampled_from(["/r/", "/r", "/s/", ""]), min_size=1, max_size=6))
def test_a_walks_paths_are_held_only_when_one_is_not_its_roots_and_its_id(prefixes):
    stat = os.stat(__file__)
    found = [(f"d/f{k}", prefix + f"d/f{k}", stat) for k, prefix in enumerate(prefixes)]
    # The walk gives runs of consecutive files (a folder's ids, paths, stats): here two files a run.
    runs = [tuple(list(column) for column in zip(*found[a : a + 2])) for a in range(0, len(found), 2)]
    entries = Entries.of_walk(iter(runs))
    assert list(entries) == [FileEntry.of_stat(*f) for f in found]
    assert list(entries.paths) == [path for _, path, _ in found] == entries.paths[:]
    assert isinstance(entries.paths, PrefixedPaths) == (len(set(prefixes)) == 1)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 130), min_size=1, max_size=4))
def test_a_walks_stat_rows_are_its_files_stat_in_runs_of_any_length(lengths):
    # A run of a few files is taken as tuples in one numpy call, a longer one a column at a time.
    here = os.path.dirname(__file__)
    stats = [os.stat(os.path.join(here, name)) for name in sorted(os.listdir(here))]
    found, k = [], 0
    runs = []
    for n in lengths:
        run = [(f"d/f{k + i:04d}", f"/r/d/f{k + i:04d}", stats[(k + i) % len(stats)]) for i in range(n)]
        k += n
        found += run
        runs.append(tuple(list(column) for column in zip(*run)) if run else ([], [], []))
    entries = Entries.of_walk(iter(runs))
    assert list(entries) == [FileEntry.of_stat(*f) for f in found]
    assert entries.stat.dtype == "int64" and entries.stat.shape == (len(found), 5)

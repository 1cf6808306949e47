"""The shingle stage's main process holds one chunk of the docs table, not the table (issue 29).

The docs table's columns are appended to their files a chunk at a time
(:class:`simdoc.store.doccolumns.TableBuilder` with a
:class:`~simdoc.store.doccolumns.TableFiles` sink): the memory the main
process allocates (numpy's arrays included: numpy reports them to
tracemalloc) does not grow with the number of documents. It held the whole
table until the end, then gathered it again (~700 bytes a document at 10^6).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import scan
from simdoc.stages.shingle import build_shingles
from simdoc.store import doccolumns, doctable
from simdoc.store.loaded import open_index


def _corpus(folder, n_files: int, per_file: int) -> None:
    folder.mkdir()
    for f in range(n_files):
        lines = (f'{{"text": "w{f} r{i} tide harbour"}}\n' for i in range(per_file))
        (folder / f"s{f:03d}.jsonl").write_text("".join(lines))


def _peak_of_build(tmp_path, name: str, n_files: int, per_file: int) -> tuple[int, int]:
    corpus = tmp_path / name
    _corpus(corpus, n_files, per_file)
    tracemalloc.start()
    try:
        build_shingles(corpus, tmp_path / f"{name}.idx", ShingleParams(), signature=SignatureParams(16).resolved(), engine=LocalEngine(1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, len(open_index(tmp_path / f"{name}.idx").docs())


def test_the_main_process_memory_does_not_grow_with_the_documents(tmp_path, monkeypatch):
    monkeypatch.setattr(doccolumns, "TABLE_CHUNK_ROWS", 512)
    monkeypatch.setattr(scan, "BATCH_BYTES", 32 << 10)  # a task: a few hundred records
    _peak_of_build(tmp_path, "warm", 1, 10)  # the first build in a process compiles and imports (~28 MB)
    few, n_few = _peak_of_build(tmp_path, "few", 4, 1000)
    many, n_many = _peak_of_build(tmp_path, "many", 40, 1000)
    assert (n_few, n_many) == (4000, 40000)
    # 36,000 documents more: held whole, the table took ~440 bytes each (16 MB more); now ~0.
    assert many - few < 20 * (n_many - n_few), (few, many)


def test_a_table_written_in_chunks_is_the_table_written_whole(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    _corpus(corpus, 3, 700)
    whole = tmp_path / "whole"
    build_shingles(corpus, whole, ShingleParams(), signature=SignatureParams(16).resolved(), engine=LocalEngine(1))
    monkeypatch.setattr(doccolumns, "TABLE_CHUNK_ROWS", 100)
    chunked = tmp_path / "chunked"
    build_shingles(corpus, chunked, ShingleParams(), signature=SignatureParams(16).resolved(), engine=LocalEngine(1))
    a, b = open_index(whole), open_index(chunked)
    ra, rb = a.manifest["stages"]["shingle"]["roles"], b.manifest["stages"]["shingle"]["roles"]
    assert ra.keys() == rb.keys()
    for role in ra:
        assert (whole / ra[role]).read_bytes() == (chunked / rb[role]).read_bytes(), role
    assert np.array_equal(a.signatures(), b.signatures())


def test_an_opened_docs_table_holds_no_string_a_row(tmp_path, monkeypatch):
    monkeypatch.setattr(doctable, "_CHECK_ROWS", 1024)
    corpus = tmp_path / "c"
    _corpus(corpus, 4, 10000)
    build_shingles(corpus, tmp_path / "idx", ShingleParams(), signature=SignatureParams(16).resolved(), engine=LocalEngine(1))
    tracemalloc.start()
    try:
        docs = open_index(tmp_path / "idx").docs()  # checked as paths, and each id as SOURCE/#KEY
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(docs) == 40000 and docs.ids[1] == "s000.jsonl/#10" and docs.sources[3] == "s000.jsonl"
    # The ids and sources as lists of strings were ~135 bytes a row (1.4 GB at 10^7).
    assert peak < 20 * len(docs), peak / len(docs)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.text(st.sampled_from(list("ab/#é\udcc3")), max_size=4), st.text(st.sampled_from(list("ab/#é\udcc3")), max_size=6)), max_size=8), step=st.integers(1, 4))
def test_the_member_check_by_arrays_is_the_check_by_strings(rows, step):
    """A member's id is SOURCE/#KEY of its source: the first row that is not, found by bytes."""
    sources = [s for s, _ in rows]
    ids = [s + k if k.startswith("/#") or not s else (s + "/#" + k if len(k) % 2 else k) for s, k in rows]
    want = next((i for i, (d, s) in enumerate(zip(ids, sources)) if s and not (d.startswith(s) and d.startswith("/#", len(s)))), None)
    old, doctable._CHECK_ROWS = doctable._CHECK_ROWS, step << 4
    try:
        assert doctable._not_source_keys(*doctable._blob(ids), *doctable._blob(sources)) == want
    finally:
        doctable._CHECK_ROWS = old


def test_the_table_files_are_fsynced_at_once_and_each_before_its_rename(tmp_path, monkeypatch):
    import os
    import threading

    from simdoc.store import npyfiles

    corpus = tmp_path / "c"
    _corpus(corpus, 2, 50)
    # Two fsyncs of the table's files must be under way at the same time (one after the other,
    # the barrier would break); and a file is renamed to its name only after its own fsync.
    barrier, synced, real_fsync, real_replace = threading.Barrier(2, timeout=20), set(), os.fsync, os.replace
    overlapped, lock = [], threading.Lock()

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        with lock:
            first_two = "/.docs." in name and len(overlapped) < 2
            if first_two:
                overlapped.append(name)
        if first_two:
            barrier.wait()
        real_fsync(fd)
        synced.add(name)

    def replace(src, dst):
        if os.path.basename(str(dst)).startswith("docs."):
            assert os.path.abspath(str(src)) in synced, src
        return real_replace(src, dst)

    monkeypatch.setattr(npyfiles.os, "fsync", fsync)
    monkeypatch.setattr(npyfiles.os, "replace", replace)
    build_shingles(corpus, tmp_path / "i", ShingleParams(), signature=SignatureParams(16).resolved(), engine=LocalEngine(1))
    assert len(overlapped) == 2
    assert len(open_index(tmp_path / "i").docs()) == 100

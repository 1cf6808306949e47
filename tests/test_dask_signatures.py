"""Signature rows on a Dask cluster are written by the workers, and the index is the local engine's.

simdoc.stages.dask_signatures: the reading tasks leave their signature
rows in their parts and send back only where the parts are (the client reads
the docs-table columns from them); copying tasks fill
the new matrix from the parts and the current matrix. The tasks go through
a client that runs them at once in this process, each task and result
pickled as Dask would send them (see test_dask_partitions).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dask_partitions import InProcessClient
from test_dask_resume import files_of
from test_pipeline import make_corpus

from simdoc.engines import DaskEngine
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import dask_signatures, scan
from simdoc.stages.dask_signatures import PlacedRows, PlaceTask
from simdoc.stages.shingle import build_shingles
from simdoc.store.directory import IndexStore
from simdoc.store.names import PARTS

SIGNER = SignatureParams().resolved()
HOUR_NS = 3600 * 10**9


class RecordingClient(InProcessClient):
    """Keeps every task's result, as the client process would receive it."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list = []

    def submit(self, *args, **kwargs):
        done = super().submit(*args, **kwargs)
        self.results.append(done.result())
        return done


def build(c: Path, index: Path, engine) -> None:
    build_shingles(c, index, ShingleParams(), signature=SIGNER, engine=engine)


def age(root: Path, ns: int = HOUR_NS) -> None:
    then = time.time_ns() - ns
    for p in root.rglob("*.txt"):
        os.utime(p, ns=(then, then))


@pytest.fixture
def small_tasks(monkeypatch):
    """Five files a reading task and 7 rows a copying task, so that a small corpus makes many of both."""
    monkeypatch.setattr(scan, "BATCH_DOCS", 5)
    monkeypatch.setattr(dask_signatures, "PLACE_TASK_BYTES", 7 * 4 * SIGNER.num_perm)


def test_no_signature_row_comes_back_to_the_client_and_the_index_is_the_local_one(tmp_path, small_tasks):
    c = tmp_path / "c"
    make_corpus(c, seed=71, n_base=12)
    age(c)
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    assert not any(isinstance(r, scan.BatchResult) for r in client.results)
    reads = [r for r in client.results if isinstance(r, scan.PartWritten)]
    copies = [r for r in client.results if not isinstance(r, scan.PartWritten)]
    assert len(reads) >= 4 and all(r.part for r in reads)
    n_docs = sum(r.n_docs for r in reads)
    # Pieces of at most 7 rows, three integers each, cover the matrix.
    assert sum(n for _, n, _ in copies) == n_docs * SIGNER.num_perm and len(copies) >= n_docs // 7
    assert not (tmp_path / "dask" / PARTS).exists()  # the parts go once the stage is published


def test_an_update_on_the_cluster_copies_kept_rows_on_the_workers(tmp_path, small_tasks):
    """Rows of unchanged files come from the current matrix, copied by the workers: the local engine's update."""
    c = tmp_path / "c"
    docs = make_corpus(c, seed=72, n_base=12)
    age(c)
    build(c, tmp_path / "dask", DaskEngine(InProcessClient(), 1))
    build(c, tmp_path / "local", LocalEngine(1))
    (c / "base/doc03.txt").write_text(docs["base/doc03.txt"] + " and then some more", encoding="utf-8")
    (c / "base/doc07.txt").unlink()
    make_corpus(c / "later", seed=73, n_base=3)
    age(c, HOUR_NS // 2)
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    tasks = [t for t in client.submitted if isinstance(t, PlaceTask)]
    old = [s for t in tasks for s in t.sources if s[0].endswith(".npy")]
    assert old and sum(n for _, _, n in old) > 20  # most rows were kept, and copied from the current matrix
    assert not any(isinstance(r, scan.BatchResult) for r in client.results)


def test_rows_a_worker_could_not_leave_in_a_part_come_back_and_are_written_by_the_client(tmp_path, small_tasks, monkeypatch):
    c = tmp_path / "c"
    make_corpus(c, seed=74, n_base=10)
    age(c)
    write_part = scan.write_part
    calls = []

    def full_every_other(path, result, reusable=True, token=""):
        calls.append(path)
        if len(calls) % 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_part(path, result, reusable, token)

    monkeypatch.setattr(scan, "write_part", full_every_other)
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    sent_whole = [r for r in client.results if isinstance(r, scan.BatchResult)]
    assert sent_whole and all(r.signatures is not None for r in sent_whole)
    assert any(isinstance(r, scan.PartWritten) for r in client.results)


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.tuples(st.sampled_from(["old", "p1", "p2", "held"]), st.integers(0, 30)), max_size=25),
    per_task=st.integers(1, 40),
)
def test_copying_tasks_cover_the_matrix_in_contiguous_blocks(runs, per_task):
    """Every row not held by the client is in exactly one task, at its place; no task has more than per_task rows."""
    placed = PlacedRows(IndexStore("/nonexistent"), 4, "/idx/signatures.x.npy")
    want = []  # (source, row in source) of each row of the new matrix
    at_part = {"p1": 0, "p2": 0}
    for kind, n in runs:
        if kind == "old":
            first = len(want) * 3  # any rows of the current matrix
            for j in range(n):
                placed.keep(first + j)
            want += [("/idx/signatures.x.npy", first + j) for j in range(n)]
        elif kind == "held":
            placed.add(np.zeros((n, 4), np.uint32))
            want += [None] * n
        else:
            path = f"/idx/dask-parts/scan/{kind}.npz"
            placed.add_part(path, at_part[kind], n)
            want += [(path, at_part[kind] + j) for j in range(n)]
            at_part[kind] += n
    old = dask_signatures.PLACE_TASK_BYTES
    dask_signatures.PLACE_TASK_BYTES = per_task * 4 * 4
    try:
        tasks = placed.tasks("/idx/.signatures.tmp")
    finally:
        dask_signatures.PLACE_TASK_BYTES = old
    got: list = [None] * len(want)
    for t in tasks:
        rows = [(path, first + j) for path, first, n in t.sources for j in range(n)]
        assert 0 < len(rows) <= per_task
        for i, row in enumerate(rows):
            assert got[t.start + i] is None
            got[t.start + i] = row
    assert got == want
    assert placed.rows == len(want)


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_an_update_refuses_a_damaged_current_matrix_on_either_engine(tmp_path, engine):
    """The kept rows are copied from the current matrix: it is checked first, as the local engine checks it."""
    from simdoc.errors import CorruptIndex
    from simdoc.store.loaded import open_index

    c = tmp_path / "c"
    docs = make_corpus(c, seed=75, n_base=8)
    age(c)
    make = (lambda: DaskEngine(InProcessClient(), 1)) if engine == "dask" else (lambda: LocalEngine(1))
    build(c, tmp_path / "idx", make())
    sigs = tmp_path / "idx" / open_index(tmp_path / "idx").stage("signature")["roles"]["signatures"]
    raw = bytearray(sigs.read_bytes())
    raw[-1] ^= 0xFF
    sigs.write_bytes(bytes(raw))
    (c / "base/doc02.txt").write_text(docs["base/doc02.txt"] + " changed", encoding="utf-8")
    with pytest.raises(CorruptIndex, match="checksum"):
        build(c, tmp_path / "idx", make())

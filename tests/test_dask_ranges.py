"""A big file is cut into ranges on a Dask cluster too, one task each (issue 29): each range's task
writes its part, the client joins the ranges' docs-table rows, the workers copy the signature rows
from the parts; the index is byte for byte the local engine's, and a killed client's finished ranges
are taken from their parts.

The tasks go through a client that runs them at once in this process, each task and result pickled
as Dask would send them (see test_dask_partitions); test_dask_ranges_cluster runs real clusters.
"""

from __future__ import annotations

import dataclasses

import gzip
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dask_partitions import ClientKilled, DyingClient, InProcessClient
from test_dask_resume import files_of
from test_warc_crawls import record

from simdoc.corpus import jsonl_ranges, parquet, warc_spans
from simdoc.engines import DaskEngine
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import dask_signatures, scan
from simdoc.stages.dask_signatures import PlaceTask
from simdoc.stages.resume import SCAN_PARTS
from simdoc.stages.scan_results import BatchResult, read_part
from simdoc.stages.shingle import build_shingles
from simdoc.store.names import PARTS

SIGNER = SignatureParams().resolved()
HOUR_NS = 3600 * 10**9
WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()
ONE_TASK = 1 << 40


class RecordingClient(InProcessClient):
    """Keeps every task's result, as the client process would receive it."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list = []

    def submit(self, *args, **kwargs):
        done = super().submit(*args, **kwargs)
        self.results.append(done.result())
        return done


def text(i: int) -> str:
    """A text of its own for ``i``; ``i`` and ``i + 1000`` are near-duplicates."""
    j = i % 1000
    return " ".join(WORDS[(j * 7 + k * (j % 5 + 1)) % len(WORDS)] for k in range(12)) + f" n{j}" + (" x" if i >= 1000 else "")


def make(c: Path, n_lines: int = 60, id_field: bool = False) -> Path:
    """A corpus of a JSON Lines file, a Parquet file of several row groups, a WARC file and a
    text file, last changed an hour ago."""
    c.mkdir(parents=True)
    lines = []
    for i in range(n_lines):
        rec = {"text": text(i if i % 3 else i + 1000)}
        if id_field:
            rec["id"] = f"k{i % 7}"
        lines.append(json.dumps(rec))
    lines[5] = "not json"
    (c / "big.jsonl").write_text("\n".join(lines) + "\n")
    (c / "small.txt").write_text(text(3) + "\n")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pass
    else:
        texts = [text(i + (1000 if i % 4 == 0 else 0)) for i in range(24)]
        pq.write_table(pa.table({"text": texts, "id": [f"r{i % 5}" for i in range(24)]}), c / "rows.parquet", row_group_size=3)
    raw = [record(f"http://a/{i % 9}", text(i + 2000 * (i % 2)), i) for i in range(30)]
    (c / "crawl.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in raw))
    then = time.time_ns() - HOUR_NS
    for p in c.iterdir():
        os.utime(p, ns=(then, then))
    return c


@pytest.fixture
def small_spans(monkeypatch):
    """Ranges of a few hundred bytes, and copying tasks of 7 rows, so that small files make many tasks."""
    set_budget(monkeypatch, 300)
    monkeypatch.setattr(dask_signatures, "PLACE_TASK_BYTES", 7 * 4 * SIGNER.num_perm)


def set_budget(monkeypatch, n: int) -> None:
    monkeypatch.setattr(jsonl_ranges, "RANGE_BYTES", n)
    monkeypatch.setattr(warc_spans, "SPAN_BYTES", n)
    monkeypatch.setattr(parquet, "TASK_BYTES", n)
    monkeypatch.setattr(parquet, "CUT_BYTES", 0)


def build(c: Path, index: Path, engine, **kw) -> None:
    build_shingles(c, index, ShingleParams(**kw), signature=SIGNER, engine=engine)


def ranges(client) -> dict[str, int]:
    """How many range tasks the client ran, by file."""
    out: dict[str, int] = {}
    for t in client.submitted:
        if isinstance(t, scan.ScanTask) and t.span is not None:
            out[t.files[0][0]] = out.get(t.files[0][0], 0) + 1
    return out


def test_ranges_on_a_cluster_give_the_index_of_the_local_engine_and_of_one_task(tmp_path, small_spans, monkeypatch, settled):
    c = make(tmp_path / "c")
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    got = ranges(client)
    # The cluster cut each big file into several tasks (before this change: one task a file).
    assert got["big.jsonl"] >= 4 and got["crawl.warc.gz"] >= 3, got
    if (c / "rows.parquet").exists():
        assert got["rows.parquet"] >= 3, got
    # No signature row, no docs-table row came back to the client: where each part is, only.
    assert not any(isinstance(r, BatchResult) for r in client.results)
    gathered = [s for t in client.submitted if isinstance(t, PlaceTask) for s in t.sources if isinstance(s, dask_signatures.Gathered)]
    assert gathered  # the workers copied the ranges' rows from their parts
    assert not (tmp_path / "dask" / PARTS).exists()
    set_budget(monkeypatch, ONE_TASK)
    build(c, tmp_path / "whole", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local") == files_of(tmp_path / "whole")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(budget=st.integers(40, 900), place_rows=st.integers(1, 40), id_field=st.booleans(), min_length=st.sampled_from([None, 60]))
def test_any_cut_on_a_cluster_gives_the_index_of_one_task(tmp_path_factory, budget, place_rows, id_field, min_length):
    base = tmp_path_factory.mktemp("cut")
    c = make(base / "c", n_lines=40, id_field=id_field)
    kw = {"id_field": "id" if id_field else None, "min_length": min_length}
    with pytest.MonkeyPatch.context() as m:
        m.setattr("simdoc.stages.racy.RACY_NS", 0)
        build(c, base / "whole", LocalEngine(1), **kw)
        set_budget(m, budget)
        m.setattr(dask_signatures, "PLACE_TASK_BYTES", place_rows * 4 * SIGNER.num_perm)
        build(c, base / "dask", DaskEngine(InProcessClient(), 1), **kw)
    assert files_of(base / "dask") == files_of(base / "whole")


def test_a_killed_clients_finished_ranges_are_taken_from_their_parts(tmp_path, small_spans, settled):
    c = make(tmp_path / "c")
    build(c, tmp_path / "local", LocalEngine(1))
    first = InProcessClient()
    build(c, tmp_path / "first", DaskEngine(first, 1))
    total = sum(ranges(first).values())
    lives = ranges(first)["big.jsonl"] + 2  # killed among the ranges of the next file
    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=lives), 1))
    parts = sorted((index / PARTS / SCAN_PARTS).glob("*.npz"))
    assert len(parts) == lives
    assert all(read_part(str(p), rows=False).piece is not None for p in parts)  # each holds its range's piece
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert sum(ranges(again).values()) == total - lives  # the finished ranges were not read again
    assert files_of(index) == files_of(tmp_path / "local")
    assert not (index / PARTS).exists()


def test_a_range_whose_part_could_not_be_written_sends_its_rows(tmp_path, small_spans, monkeypatch, settled):
    """No room for some parts: those ranges' rows come back, and the others' are read by the client."""
    c = make(tmp_path / "c")
    build(c, tmp_path / "local", LocalEngine(1))
    real = scan.write_part
    calls: dict[str, int] = {}
    fail = {"big.jsonl": (2,), "crawl.warc.gz": (1, 3)}  # a range after a part; the first, then another

    def some_fail(path, result, reusable=True, token=""):
        source = result.piece.source if result.piece is not None else ""
        calls[source] = calls.get(source, 0) + 1
        if calls[source] in fail.get(source, ()):
            raise OSError(28, "No space left on device")
        return real(path, result, reusable=reusable, token=token)

    monkeypatch.setattr(scan, "write_part", some_fail)
    client = RecordingClient()
    by_file: dict[str, list[bool]] = {}  # each range's task, in order: did its rows come back?
    real_submit = client.submit

    def submit(func, task, pure=True):
        done = real_submit(func, task, pure)
        if getattr(task, "span", None):
            by_file.setdefault(task.files[0][0], []).append(isinstance(done.result(), BatchResult))
        return done

    client.submit = submit
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    # Ranges of one file came back both ways: a first range with its rows, and one with a part first.
    assert any(h[0] and not all(h) for h in by_file.values()) and any(not h[0] and any(h) for h in by_file.values()), by_file


def test_gathered_rows_are_taken_from_the_mapped_parts(tmp_path):
    rows = [np.arange(i * 10, i * 10 + n * 4, dtype=np.uint32).reshape(n, 4) for i, n in enumerate([3, 0, 5])]
    parts = []
    for i, r in enumerate(rows):
        np.savez(tmp_path / f"p{i}.npz", signatures=r, meta=np.zeros(3, np.uint8))
        parts.append((str(tmp_path / f"p{i}.npz"), len(r)))
        assert np.array_equal(dask_signatures.part_rows(parts[-1][0]), r)
        assert isinstance(dask_signatures.part_rows(parts[-1][0]), np.memmap)
    every = np.concatenate(rows)
    order = np.array([7, 0, 2, 3, 6, 1, 5, 4], dtype=np.int64)
    got = dask_signatures._gathered(dask_signatures.Gathered(tuple(parts), order), 4, lambda p, last: dask_signatures.part_rows(p))
    assert np.array_equal(got, every[order])
    with pytest.raises(ValueError):
        dask_signatures._gathered(dask_signatures.Gathered(tuple(parts), np.array([8])), 4, lambda p, last: dask_signatures.part_rows(p))


def test_each_kind_of_piece_comes_back_from_its_part_as_it_was(tmp_path, small_spans, settled):
    c = make(tmp_path / "c", id_field=True)
    shingle = ShingleParams(id_field="id").resolved()
    seen = set()
    for name in ("big.jsonl", "rows.parquet", "crawl.warc.gz"):
        path = c / name
        if not path.exists():
            continue
        spans = scan.spans_of(str(path), path.stat().st_size, "text", False)
        assert spans and len(spans) >= 3, (name, spans)
        for i, s in enumerate(spans):
            part = str(tmp_path / f"{name}.{i}.npz")
            task = scan.ScanTask([(name, str(path), path.stat().st_size, None)], shingle, SIGNER, span=s, part=part, reusable=True)
            written = scan.scan_batch(task)
            back = read_part(part, rows=False, token=written.token)
            sent = scan.scan_batch(dataclasses.replace(task, part=None))
            sent.piece.task = None
            assert back.piece == sent.piece and back.docs == sent.docs and back.files == sent.files
            seen.add(type(back.piece).__name__)
    assert {"Piece", "Span"} <= seen


def test_an_update_on_a_cluster_is_the_local_engines(tmp_path, small_spans, settled):
    """A big file appended to is read again by ranges; one touched (same bytes) keeps its rows."""
    c = make(tmp_path / "c")
    dask, local = tmp_path / "dask", tmp_path / "local"
    build(c, dask, DaskEngine(InProcessClient(), 1))
    build(c, local, LocalEngine(1))
    with open(c / "big.jsonl", "a") as f:
        f.write(json.dumps({"text": text(7)}) + "\n")
    then = time.time_ns() - HOUR_NS // 2
    for p in c.iterdir():
        os.utime(p, ns=(then, then))  # every file's time changed: each is read again, its bytes digested
    again = InProcessClient()
    build(c, dask, DaskEngine(again, 1))
    build(c, local, LocalEngine(1))
    assert ranges(again)["big.jsonl"] >= 4
    assert files_of(dask) == files_of(local)


def test_warc_ranges_that_do_not_fit_are_read_whole_on_a_cluster_too(tmp_path, small_spans, monkeypatch, settled):
    """Spans of a WARC file that no longer fit together (it changed since planned) are read again
    as one task; its rows then come back to the client, which writes them itself."""
    c = make(tmp_path / "c")
    build(c, tmp_path / "local", LocalEngine(1))
    monkeypatch.setattr(warc_spans, "joined_ids", lambda spans, source: None)
    client = InProcessClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    assert ranges(client)["crawl.warc.gz"] >= 3
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")

"""A reading task's documents travel and are tabled as columns (issue 29): DocColumns, the
docs-table builder that appends column chunks, and the Dask part that stores them as arrays."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import scan, scan_results
from simdoc.store import doccolumns
from simdoc.store.doccolumns import FILE_COLUMNS, DocColumns, TableBuilder
from simdoc.store.doctable import HOW, STAT_COLUMNS, STATUSES, DocRow, DocsTable

# ids with what a file name or a key may hold: non-ASCII, surrogate-escaped bytes, the separator
name = st.text(st.sampled_from(list("ab/#é\udcff0129")), min_size=1, max_size=6)
doc = st.tuples(
    name, st.sampled_from(["", "s.jsonl"]), st.integers(-1, 9), st.integers(-1, 9), st.integers(0, 99),
    st.integers(0, 50), st.sampled_from(HOW), st.sampled_from(STATUSES), st.binary(min_size=16, max_size=16),
).map(lambda d: (d[1] + "/#" + d[0] if d[1] else d[0], *d[1:]))  # a member's id is SOURCE/#KEY


def columns(docs) -> DocColumns:
    ids, sources, offset, length, size, n, how, status, digest = (list(c) for c in zip(*docs)) if docs else [[]] * 9
    return DocColumns.build(ids, sources, offset, length, size, n, how, status, digest, [d[::-1] for d in digest])


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(doc, max_size=12), data=st.data())
def test_slices_orders_and_joins_are_those_of_the_lists(docs, data):
    cols = columns(docs)
    assert list(cols.ids()) == [d[0] for d in docs] and list(cols.sources()) == [d[1] for d in docs]
    a = data.draw(st.integers(0, len(docs)))
    b = data.draw(st.integers(a, len(docs)))
    assert cols.slice(a, b) == columns(docs[a:b])
    order = data.draw(st.permutations(range(len(docs))))
    assert cols.take(np.asarray(order, dtype=np.int64)) == columns([docs[i] for i in order])
    assert DocColumns.concatenate([cols.slice(0, a), cols.slice(a, b), cols.slice(b, len(docs))]) == cols
    assert DocColumns.from_arrays(cols.arrays("p_"), "p_") == cols


def row(d, stat, file_digest, added) -> DocRow:
    return DocRow(d[0], d[1], d[2], d[3], d[4], *stat, d[8], file_digest, d[6], d[7], d[5], added, d[8][::-1])


@settings(max_examples=60, deadline=None)
@given(
    old_docs=st.lists(doc, max_size=10), steps=st.lists(st.tuples(st.booleans(), st.lists(doc, max_size=4), st.booleans()), max_size=6),
    chunk=st.sampled_from([1, 2, 3, 1 << 16]), data=st.data(),
)
def test_a_table_built_from_chunks_is_the_table_built_row_by_row(old_docs, steps, chunk, data):
    """Kept rows (by index, some with a new stat) and new documents, in any mix, written a few rows
    at a time: the stored arrays are byte for byte those of the same rows made one by one (a run
    of rows of one file, index format 5, does not depend on where the chunks end)."""
    stat0 = (10, 20, 30, 40, 50)
    old_rows = [row(d, stat0, b"f" * 16, 1) for d in old_docs]
    old = DocsTable.from_rows(old_rows)
    doccolumns.TABLE_CHUNK_ROWS, was = chunk, doccolumns.TABLE_CHUNK_ROWS
    try:
        _build_and_compare(old, old_rows, steps, stat0, data)
    finally:
        doccolumns.TABLE_CHUNK_ROWS = was


def _build_and_compare(old, old_rows, steps, stat0, data) -> None:
    builder, expected = TableBuilder(old), []
    for k, (keep, new, restat) in enumerate(steps):
        if keep and old_rows:
            rows = data.draw(st.lists(st.integers(0, len(old_rows) - 1), max_size=4))
            stat = (k, k + 1, k + 2, k + 3, k + 4) if restat else None
            builder.add_old(rows, stat)
            for j in rows:
                r = old_rows[j]
                expected.append(DocRow(**{**{f: getattr(r, f) for f in r.__slots__}, **dict(zip(STAT_COLUMNS, stat or stat0))}))
        else:
            stat, fd = (k, 2, 3, 4, 5), bytes([k]) * 16
            added = np.arange(len(new), dtype=np.int64) + 7
            builder.add_new(columns(new), {**dict(zip(STAT_COLUMNS, stat)), "file_digest": fd, "added": added})
            expected += [row(d, stat, fd, 7 + i) for i, d in enumerate(new)]
    table = builder.finish()
    assert len(builder) == len(table) == len(expected)
    want = DocsTable.from_rows(expected).arrays()
    got = table.arrays()
    assert want.keys() == got.keys()
    for role in want:
        assert want[role].dtype == got[role].dtype and want[role].tobytes() == got[role].tobytes(), role
    assert list(table.ids) == [r.id for r in expected]
    assert set(FILE_COLUMNS) == {*STAT_COLUMNS, "file_digest", "added"}


def test_a_part_holds_the_documents_as_arrays_and_a_damaged_column_runs_the_task_again(tmp_path):
    files = []
    for i in range(3):
        p = tmp_path / f"d{i}.txt"
        p.write_text(f"harbour tide table mountain goats {i} climb steep paths")
        files.append((p.name, str(p), p.stat().st_size, None))
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps({"text": f"record {i} harbour tide"}) for i in range(12)))
    files.append(("m.jsonl", str(tmp_path / "m.jsonl"), (tmp_path / "m.jsonl").stat().st_size, None))
    task = scan.ScanTask(files, ShingleParams().resolved(), SignatureParams(16).resolved())
    r = scan.scan_batch(task)
    assert isinstance(r.docs, DocColumns) and len(r.docs) == 15
    assert list(r.docs.ids())[3:6] == ["m.jsonl/#1", "m.jsonl/#10", "m.jsonl/#11"]
    path = tmp_path / f"{scan.part_key(task, [[0, 0, 0, 0]] * len(files))}.npz"
    scan_results.write_part(str(path), r)
    with np.load(path, allow_pickle=False) as z:
        assert "docs" not in json.loads(z["meta"].tobytes()) and z["doc_offset"].dtype == np.int64
        arrays = dict(z)
    assert scan_results.read_part(str(path)).docs == r.docs
    arrays["doc_id_offsets"] = arrays["doc_id_offsets"][::-1].copy()  # offsets that do not cut the blob
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    assert scan_results.read_part(str(path)) is None

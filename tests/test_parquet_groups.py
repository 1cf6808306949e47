"""A Parquet file of several row groups is read by several tasks, a span of row groups each (issues 29
and 30): the index, the warnings and the pairs are byte for byte those of one task reading the whole
file, wherever the cuts fall, on one job or two, after an update, and when the row groups change."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.cli import cli
from simdoc.corpus import parquet
from conftest import numbered_page as page, printed_jaccard

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()
ONE_TASK = 1 << 40  # a task budget no file reaches


def write(path: Path, texts: list, ids: list | None = None, row_group_size: int = 2) -> None:
    ids = ids if ids is not None else [f"r{i}" for i in range(len(texts))]
    table = pa.table({"text": pa.array(texts, pa.string()), "id": pa.array(ids, pa.string())})
    pq.write_table(table, path, row_group_size=row_group_size)


def index_bytes(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}


def same_as_rebuilt(updated, rebuilt) -> bool:
    """An update's pairs, warnings and arrays are a rebuild's, but for the names of the arrays
    (build ids) and when each document was added."""
    def arrays(got):
        named = {re.sub(r"\.[0-9a-f]{16}\.npy$", "", k): v for k, v in got[1].items()}
        return {k: v for k, v in named.items() if k != "docs.added"}

    return (updated[0], updated[2:]) == (rebuilt[0], rebuilt[2:]) and arrays(updated) == arrays(rebuilt)


def build(corpus: Path, index: Path, task_bytes: int, jobs: int = 1, **kw):
    """Pairs, index arrays, skipped files and warnings of a build whose Parquet tasks hold
    ``task_bytes`` of text; and the spans the big files were cut into."""
    spans = []

    def spans_of(*a):
        got = real(*a)
        spans.append(got)
        return got

    from simdoc.stages import scan

    real = scan.spans_of
    with mock.patch.object(parquet, "TASK_BYTES", task_bytes), mock.patch.object(parquet, "CUT_BYTES", 0), \
            mock.patch.object(scan, "spans_of", spans_of):
        result = simdoc.find_pairs(corpus, index, jobs=jobs, threshold=0.5, **kw)
    manifest = json.loads((index / "manifest.json").read_text())
    warnings = [w for s in result.stages for w in s.warnings]
    return (list(result), index_bytes(index), manifest["stages"]["shingle"].get("skipped"), warnings), spans


text = st.one_of(
    st.builds(lambda ws, extra: " ".join(WORDS[i % len(WORDS)] for i in ws) + " x" * extra,
              st.lists(st.integers(0, 30), max_size=12), st.integers(0, 40)),
    st.none(),  # a null text: skipped, told by row
    st.just(""),
    st.just("harbour tide table mountain goats climb steep paths"),  # repeats: pairs, across row groups too
    st.just("caf\u00e9 na\u00efve \u00fcber harbour tide table"),
)
key = st.sampled_from(["k", "k@3", "k@3@3", "1", "3", "a\u0000b", None, "headline"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(text, key), max_size=14),
    row_group_size=st.integers(1, 4),
    task_bytes=st.integers(1, 400),
    min_length=st.sampled_from([None, 12]),
    max_bytes=st.sampled_from([None, 40]),
    id_field=st.sampled_from([None, "id"]),
)
def test_any_cut_gives_the_arrays_warnings_and_pairs_of_one_task(
    tmp_path_factory, rows, row_group_size, task_bytes, min_length, max_bytes, id_field
):
    base = tmp_path_factory.mktemp("groups")
    (base / "c").mkdir()
    write(base / "c" / "big.parquet", [t for t, _ in rows], [k for _, k in rows], row_group_size)
    (base / "c" / "small.txt").write_text("harbour tide table mountain goats climb steep paths\n")
    kw = {"min_length": min_length, "max_bytes": max_bytes, "id_field": id_field}
    whole, _ = build(base / "c", base / "i1", ONE_TASK, **kw)
    cut, _ = build(base / "c", base / "i2", task_bytes, **kw)
    assert cut == whole


def test_several_row_groups_are_several_tasks_and_one_or_two_jobs_print_the_exact_jaccards(tmp_path):
    texts = [page(i // 2, i % 2) for i in range(16)]  # rows 2i+1 and 2i+2 near-duplicates
    texts = texts[1:] + texts[:1]  # and so each pair across two row groups
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet", texts, row_group_size=2)
    whole, spans = build(tmp_path / "c", tmp_path / "i0", ONE_TASK)
    assert spans == [None]
    meta = pq.read_metadata(tmp_path / "c" / "data.parquet")
    budget = max(meta.row_group(g).column(0).total_uncompressed_size for g in range(8)) + 1  # two row groups a task
    one, spans = build(tmp_path / "c", tmp_path / "i1", budget)
    assert spans == [[(0, 2), (2, 4), (4, 6), (6, 1 << 62)]]
    two, spans2 = build(tmp_path / "c", tmp_path / "i2", budget, jobs=2)
    assert spans2 == spans and one == whole and two == whole
    row = {t: i + 1 for i, t in enumerate(texts)}
    want = {}
    for i in range(1, 8):
        a, b = sorted([row[page(i, 0)], row[page(i, 1)]])
        want[(f"data.parquet/#{a}", f"data.parquet/#{b}")] = printed_jaccard(page(i, 0), page(i, 1))
    a, b = row[page(0, 0)], row[page(0, 1)]
    want[tuple(sorted([f"data.parquet/#{a}", f"data.parquet/#{b}"]))] = printed_jaccard(page(0, 0), page(0, 1))
    got = {(p.doc_a, p.doc_b): f"{p.jaccard:.4f}" for p in two[0]}
    assert got == want
    # Verified again from the index alone: each row read at its row group and row.
    r = CliRunner().invoke(cli, ["pairs", "--index", str(tmp_path / "i2"), "--all-candidates", "--format", "tsv", "-j", "2"])
    assert r.exit_code == 0 and "changed since" not in r.stderr and "no longer" not in r.stderr, r.stderr
    assert len(r.stdout.splitlines()) == len(want)


def test_an_update_after_a_row_edit_is_a_rebuild(tmp_path):
    texts = [page(i // 2, i % 2) for i in range(12)]
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "data.parquet"
    write(f, texts, row_group_size=3)
    first, spans = build(tmp_path / "c", tmp_path / "i1", 500)
    assert len(spans[0]) >= 3, spans
    assert build(tmp_path / "c", tmp_path / "i2", ONE_TASK)[0] == first
    texts[7] = page(9)  # an edit in the third row group: its pair is gone
    texts[10] = page(0, 3)  # and a new near-duplicate of row 1
    write(f, texts, row_group_size=3)
    updated, _ = build(tmp_path / "c", tmp_path / "i1", 500)
    assert updated == build(tmp_path / "c", tmp_path / "i2", ONE_TASK)[0]  # the same history read by one task
    rebuilt, _ = build(tmp_path / "c", tmp_path / "i3", ONE_TASK)
    assert same_as_rebuilt(updated, rebuilt) and updated[0] != first[0]
    pairs = {(p.doc_a, p.doc_b) for p in updated[0]}
    assert ("data.parquet/#1", "data.parquet/#11") in pairs and ("data.parquet/#7", "data.parquet/#8") not in pairs
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched: the same bytes
    touched = build(tmp_path / "c", tmp_path / "i1", 500)[0]
    assert touched == build(tmp_path / "c", tmp_path / "i2", ONE_TASK)[0] and touched[0] == rebuilt[0]


@pytest.mark.parametrize("new_size", [1, 5])
def test_a_file_whose_row_groups_changed_is_read_as_it_is_now(tmp_path, new_size):
    texts = [page(i // 2, i % 2) for i in range(10)]
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "data.parquet"
    write(f, texts, row_group_size=2)
    build(tmp_path / "c", tmp_path / "i1", 400)
    texts += [page(0, 4), page(20)]
    write(f, texts, row_group_size=new_size)  # more row groups (12 of 1 row) or fewer (3 of up to 5 rows), rows added
    updated, spans = build(tmp_path / "c", tmp_path / "i1", 400)
    assert len(spans[0]) >= 3, spans
    rebuilt, _ = build(tmp_path / "c", tmp_path / "i2", ONE_TASK)
    assert same_as_rebuilt(updated, rebuilt)
    assert ("data.parquet/#1", "data.parquet/#11") in {(p.doc_a, p.doc_b) for p in updated[0]}


@pytest.mark.parametrize("new_size", [1, 6])
def test_row_groups_that_changed_after_the_plan_are_each_read_once(tmp_path, new_size):
    """The tasks were planned on the file's footer; the file then got more row groups, or fewer:
    the last span reaches past the end, spans past the end read nothing, every row is read once."""
    texts = [page(i // 2, i % 2) for i in range(12)]
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "data.parquet"
    write(f, texts, row_group_size=2)
    with mock.patch.object(parquet, "TASK_BYTES", 400), mock.patch.object(parquet, "CUT_BYTES", 0):
        planned = parquet.cut(str(f), f.stat().st_size)
    assert planned is not None and len(planned) >= 3
    write(f, texts, row_group_size=new_size)
    from simdoc.stages import scan

    with mock.patch.object(scan, "spans_of", lambda *a: planned):
        stale = simdoc.find_pairs(tmp_path / "c", tmp_path / "i1", jobs=1, threshold=0.5)
    whole, _ = build(tmp_path / "c", tmp_path / "i2", ONE_TASK)
    assert (list(stale), index_bytes(tmp_path / "i1")) == (whole[0], whole[1])
    assert len(whole[0]) == 6


def test_a_damaged_row_group_a_missing_and_a_wrong_column_are_told_as_by_one_task(tmp_path):
    texts = [page(i // 2, i % 2) for i in range(12)]
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "a.parquet", texts, row_group_size=2)
    pq.write_table(pa.table({"body": pa.array(texts)}), tmp_path / "c" / "b.parquet", row_group_size=2)
    pq.write_table(pa.table({"text": pa.array(range(12))}), tmp_path / "c" / "d.parquet", row_group_size=2)
    data = bytearray((tmp_path / "c" / "a.parquet").read_bytes())
    meta = pq.read_metadata(tmp_path / "c" / "a.parquet")
    column = meta.row_group(4).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    data[start + 4: start + 40] = b"\xff" * 36  # the fifth row group's text column chunk
    (tmp_path / "c" / "e.parquet").write_bytes(bytes(data))
    whole, _ = build(tmp_path / "c", tmp_path / "i1", ONE_TASK)
    cut, spans = build(tmp_path / "c", tmp_path / "i2", 300)
    assert all(s is not None and len(s) >= 2 for s in spans), spans
    assert cut == whole
    said = " ".join(whole[3])
    assert "e.parquet" in json.dumps(whole[2]) and "no column 'text'" in said and "of type int64" in said, whole[2:]


def test_verification_reads_only_the_row_groups_of_its_rows(tmp_path, monkeypatch):
    texts = [page(i) for i in range(10)]
    texts[1], texts[8] = page(50), page(50, 1)  # the one pair: row groups 0 and 4
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet", texts, row_group_size=2)
    build(tmp_path / "c", tmp_path / "i", 300)
    read = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, *a, **k: read.append(i) or real(self, i, *a, **k))
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    loaded = open_index(tmp_path / "i")
    docs = loaded.docs()
    wanted = [d for d in range(len(docs.ids)) if docs.ids[d] in ("data.parquet/#2", "data.parquet/#9")]
    sets = reader_of(loaded).read_sets(wanted)
    assert len(sets) == 2 and all(s is not None for s in sets.values())
    assert sorted(read) == [0, 4]


def test_an_id_column_named_like_a_line_is_not_renamed_in_warnings(tmp_path):
    (tmp_path / "c").mkdir()
    table = pa.table({"text": pa.array([page(1), page(2), page(3)]), "headline": pa.array(["a", None, "a"])})
    pq.write_table(table, tmp_path / "c" / "data.parquet", row_group_size=1)
    whole, _ = build(tmp_path / "c", tmp_path / "i1", ONE_TASK, id_field="headline")
    said = " ".join(whole[3])
    assert "null or NUL-holding 'headline'" in said and "id 'a' is taken (by row 1)" in said, said
    assert build(tmp_path / "c", tmp_path / "i2", 1, id_field="headline")[0] == whole


def test_the_warnings_of_a_file_read_whole_or_by_spans_name_rows_in_the_order_one_task_finds_them(tmp_path):
    from simdoc.corpus.jsonl_ranges import renumber

    t = pa.table({"text": pa.array(["alpha beta", "gamma", None, "delta", "eps", None, "zeta"]),
                  "id": pa.array(["k", "k", "x", None, "k", "y", "line"])})
    pq.write_table(t, tmp_path / "w.parquet", row_group_size=2)
    path = str(tmp_path / "w.parquet")
    whole = parquet.read_parquet(path, "w.parquet", "text", "id", max_bytes=3)
    assert whole.result.status == "partial"
    assert whole.result.warning == (
        "texts longer than --max-bytes 3 are cut to their first 3 bytes; 2 rows (2, 5): an id that repeats gets @ROW "
        "appended; 2 rows (3, 6): null text, skipped; row 4: null or NUL-holding 'id', its id is the row number"
    )
    assert whole.docs == [("w.parquet/#4", "del", 1, 1), ("w.parquet/#k", "alp", 0, 0), ("w.parquet/#k@2", "gam", 0, 1),
                          ("w.parquet/#k@5", "eps", 2, 0), ("w.parquet/#line", "zet", 3, 0)]
    for spans in ([(0, 1), (1, 3), (3, 1 << 62)], [(0, 2), (2, 1 << 62)], [(0, 1), (1, 2), (2, 3), (3, 9), (9, 1 << 62)]):
        pieces = [parquet.read_groups(path, "w.parquet", a, b, "text", "id", max_bytes=3) for a, b in spans]
        res, ids = parquet.joined_read(pieces)
        befores = [sum(p.n_lines for p in pieces[:i]) for i in range(len(pieces))]
        docs = sorted((renumber(i, "w.parquet", n, by), t, g, r) for p, n, by in zip(pieces, befores, ids) for i, t, g, r in p.docs)
        assert (res.status, res.warning, res.digest, docs) == ("partial", whole.result.warning, whole.result.digest, whole.docs)


def test_spans_that_saw_different_files_are_told_as_a_file_changed_while_read(tmp_path):
    path = str(tmp_path / "w.parquet")
    write(tmp_path / "w.parquet", [page(i) for i in range(6)], row_group_size=2)
    first = parquet.read_groups(path, "w.parquet", 0, 2)
    write(tmp_path / "w.parquet", [page(i) for i in range(7)], row_group_size=2)  # rewritten between two tasks
    os.utime(path, ns=(0, 10**9))
    rest = parquet.read_groups(path, "w.parquet", 2, 1 << 62)
    res, _ = parquet.joined_read([first, rest])
    assert res.warning == "changed while being read; indexed as read (run again to pick up the final version)"
    assert parquet.joined_read([first])[0].warning is None

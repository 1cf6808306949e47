"""Parquet files as input (issue 30 item 7): one document per row, read by row group and row."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from simdoc.cli import cli
from conftest import numbered_page as page, printed_jaccard as jaccard_of, tsv_pairs as pairs

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")








# Rows over three row groups of 2: 0~1 in one group, 2~4 across groups, a null text, an unrelated row.
TEXTS = [page(0), page(0, 2), page(2), None, page(2, 1), "opening hours of the town museum"]
IDS = ["a", "b", "c", "d", "e", "f"]


def write(path, texts=TEXTS, ids=IDS, row_group_size=2, **more) -> None:
    columns = {"text": pa.array(texts, pa.string()), "doc": pa.array(ids), **more}
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def test_rows_are_documents_named_by_row_number_and_verified_across_row_groups(tmp_path):
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet")
    assert pq.ParquetFile(tmp_path / "c" / "data.parquet").num_row_groups == 3
    got, err = pairs(tmp_path / "c", tmp_path / "i")
    # Rows numbered from 1 over the whole file, as JSON Lines numbers lines; the null text (row 4) skipped.
    assert got == {
        ("data.parquet/#1", "data.parquet/#2"): jaccard_of(TEXTS[0], TEXTS[1]),
        ("data.parquet/#3", "data.parquet/#5"): jaccard_of(TEXTS[2], TEXTS[4]),
    }
    assert "simdoc: 5 documents" in err and "row 4: null text, skipped" in err, err
    # Verified again from the index alone, each row read at its row group and row.
    r = CliRunner().invoke(cli, ["pairs", "--index", str(tmp_path / "i"), "--all-candidates", "--format", "tsv"])
    assert r.exit_code == 0 and "changed since" not in r.stderr and "no longer" not in r.stderr, r.stderr
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    loaded = open_index(tmp_path / "i")
    docs = loaded.docs()
    at = {docs.ids[d]: (int(docs.offset[d]), int(docs.length[d])) for d in range(len(docs.ids))}
    assert at == {"data.parquet/#1": (0, 0), "data.parquet/#2": (0, 1), "data.parquet/#3": (1, 0),
                  "data.parquet/#5": (2, 0), "data.parquet/#6": (2, 1)}
    sets = reader_of(loaded).read_sets(list(range(len(docs.ids))))
    assert all(s is not None for s in sets.values())


def test_the_id_column_names_the_members_and_show_reads_a_row(tmp_path):
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet")
    got, _ = pairs(tmp_path / "c", tmp_path / "i", "--id-field", "doc")
    assert got == {
        ("data.parquet/#a", "data.parquet/#b"): jaccard_of(TEXTS[0], TEXTS[1]),
        ("data.parquet/#c", "data.parquet/#e"): jaccard_of(TEXTS[2], TEXTS[4]),
    }
    r = CliRunner().invoke(
        cli, ["show", str(tmp_path / "c"), "data.parquet/#c", "data.parquet/#e", "--index", str(tmp_path / "i"), "--id-field", "doc"]
    )
    assert r.exit_code == 0, r.stderr
    assert "changed since" not in r.stderr and "no longer" not in r.stderr and "no passages" not in r.stderr, r.stderr
    assert jaccard_of(TEXTS[2], TEXTS[4]) in r.stdout and "edit0" in r.stdout, r.stdout


def test_a_changed_row_is_not_taken_for_the_one_indexed(tmp_path):
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet")
    pairs(tmp_path / "c", tmp_path / "i")
    changed = list(TEXTS)
    changed[4] = page(7)
    write(tmp_path / "c" / "data.parquet", changed)
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    loaded = open_index(tmp_path / "i")
    docs = loaded.docs()
    sets = reader_of(loaded).read_sets(list(range(len(docs.ids))))
    assert [docs.ids[d] for d, s in sets.items() if s is None] == ["data.parquet/#5"]


def test_a_text_column_that_is_not_text_skips_the_rows_with_a_warning(tmp_path):
    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet", number=pa.array(range(6)))
    (tmp_path / "c" / "a.txt").write_text(page(0))
    (tmp_path / "c" / "b.txt").write_text(page(0, 3))
    got, err = pairs(tmp_path / "c", tmp_path / "i", "--text-field", "number")
    assert got == {("a.txt", "b.txt"): jaccard_of(page(0), page(0, 3))}
    assert "column 'number' is of type int64, not text" in err, err


def test_query_reads_parquet_files(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.txt").write_text(TEXTS[0])
    (tmp_path / "c" / "y.txt").write_text(page(9))
    pairs(tmp_path / "c", tmp_path / "i")
    write(tmp_path / "q.parquet")
    r = CliRunner().invoke(cli, ["query", str(tmp_path / "q.parquet"), "--index", str(tmp_path / "i"), "--format", "jsonl"])
    assert r.exit_code == 0, r.stderr
    got = {(o["query"], o["doc"]): o["jaccard"] for o in map(json.loads, r.stdout.splitlines())}
    q = str(tmp_path / "q.parquet")
    assert got == {(f"{q}/#1", "x.txt"): 1.0, (f"{q}/#2", "x.txt"): float(jaccard_of(TEXTS[1], TEXTS[0]))}, r.stdout


def test_without_pyarrow_one_error_line_names_the_extra(tmp_path, monkeypatch):
    import sys

    (tmp_path / "c").mkdir()
    write(tmp_path / "c" / "data.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "-j", "1"])
    assert r.exit_code == 3, (r.stderr, r.exception)
    lines = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "pyarrow" in lines[0] and "'.[parquet]'" in lines[0] and "Traceback" not in r.stderr
    r = CliRunner().invoke(cli, ["query", str(tmp_path / "c" / "data.parquet"), "--index", str(tmp_path / "i")])
    assert r.exit_code != 0 and "Traceback" not in r.stderr and "pyarrow" in r.stderr, r.stderr

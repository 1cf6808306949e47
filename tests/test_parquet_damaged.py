"""A Parquet file with one damaged row group keeps its other row groups (QA 2026-11-27).

A page that does not decompress in one row group made the whole file unreadable: a
shard of 10^6 rows was skipped for a flipped byte in one group. Now the group's rows
are skipped, each listed by ``stats --skipped`` and warned about, the other groups are
indexed, and the same comes out whether the file is read by one task or by spans of
row groups. ``dedup --write`` cannot rewrite a damaged group: it writes nothing and
says which file and group.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner

import simdoc
from simdoc.cli import cli
from simdoc.corpus import parquet
from test_parquet_groups import index_bytes

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 200  # a row group


def _text(i: int) -> str:
    rng = random.Random(i)
    return " ".join(f"w{rng.randrange(10**6)}" for _ in range(40))


def damaged(path: Path, bad: int = 2) -> None:
    """Four row groups of ROWS rows; row 5 and the last row the same text (a pair across groups);
    row group ``bad`` (from 0) damaged in the middle of its column chunk."""
    texts = [_text(i) for i in range(4 * ROWS)]
    texts[-1] = texts[4]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=ROWS, compression="snappy", use_dictionary=False)
    col = pq.ParquetFile(path).metadata.row_group(bad).column(0)
    raw = bytearray(path.read_bytes())
    mid = col.data_page_offset + col.total_compressed_size // 2
    raw[mid : mid + 64] = b"\xff" * 64
    path.write_bytes(bytes(raw))
    pf = pq.ParquetFile(path)
    with pytest.raises(Exception):
        pf.read_row_group(bad)  # the damage is one pyarrow finds
    pf.read_row_group(0)


def _run(corpus: Path, index: Path, spans: bool):
    bytes_ = 1 if spans else 1 << 40
    real, cuts = parquet.cut, []

    def cut(*a):
        cuts.append(real(*a))
        return cuts[-1]

    with mock.patch.object(parquet, "TASK_BYTES", bytes_), mock.patch.object(parquet, "CUT_BYTES", 0 if spans else 1 << 40), \
            mock.patch.object(parquet, "cut", cut):
        result = simdoc.find_pairs(corpus, index, jobs=1, threshold=0.5)
    assert (len(cuts[0]) == 4) if spans else not cuts or cuts[0] is None  # a span a row group, or one task
    manifest = json.loads((index / "manifest.json").read_text())
    return list(result), index_bytes(index), manifest["stages"]["shingle"].get("skipped")


def test_the_other_row_groups_are_indexed_and_the_damaged_ones_rows_listed(tmp_path):
    (tmp_path / "c").mkdir()
    damaged(tmp_path / "c" / "d.parquet")
    r = CliRunner().invoke(cli, ["pairs", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "-j", "1", "-t", "0.5"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.split("\t")[:2] == ["d.parquet/#5", f"d.parquet/#{4 * ROWS}"]
    assert f"{ROWS} rows ({2 * ROWS + 1}, {2 * ROWS + 2}, {2 * ROWS + 3}, ...): row group 2 (numbered from 0) cannot be read" in r.stderr
    s = CliRunner().invoke(cli, ["stats", "--index", str(tmp_path / "i"), "--skipped"])
    listed = s.stdout.splitlines()
    assert len(listed) == ROWS
    assert {line.split("\t")[0] for line in listed} == {f"d.parquet/#{n}" for n in range(2 * ROWS + 1, 3 * ROWS + 1)}
    from simdoc.store.loaded import open_index

    assert len(open_index(tmp_path / "i").docs()) == 3 * ROWS


def test_one_task_and_spans_of_row_groups_give_the_same_index(tmp_path):
    (tmp_path / "c").mkdir()
    damaged(tmp_path / "c" / "d.parquet", bad=1)
    whole = _run(tmp_path / "c", tmp_path / "i1", spans=False)
    cut = _run(tmp_path / "c", tmp_path / "i2", spans=True)
    assert whole == cut
    assert len(whole[0]) == 1


def test_an_objects_row_group_that_fails_leaves_the_file_unreadable(tmp_path):
    # A request that failed is retried by the next run; a row group skipped would not be (the
    # file is unchanged): only a local file's damage skips a group.
    damaged(tmp_path / "d.parquet")
    piece = parquet.Groups([], source="d.parquet")
    with pytest.raises(Exception):
        parquet._read_rows(piece, pq.ParquetFile(tmp_path / "d.parquet"), 0, 4, "text", None, None, local=False)


def test_dedup_write_says_which_file_and_group_and_writes_nothing(tmp_path):
    (tmp_path / "c").mkdir()
    damaged(tmp_path / "c" / "d.parquet")
    r = CliRunner().invoke(cli, ["dedup", str(tmp_path / "c"), "--index", str(tmp_path / "i"), "--write", str(tmp_path / "out"), "-j", "1", "-t", "0.5"])
    assert r.exit_code == 3, (r.stderr, r.exception)
    assert "d.parquet: row group 2 (numbered from 0) cannot be read" in r.stderr and "nothing written" in r.stderr
    assert not (tmp_path / "out").exists()

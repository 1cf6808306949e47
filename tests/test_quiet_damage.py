"""``-q`` (the cron line) names the files read only in part because they are damaged or cut short.

``-q`` hides warnings and says one line: how many files were skipped. A file read in
part (a ``.jsonl.gz`` download cut short, a WARC file cut inside a record, a Parquet
file with a damaged row group) was no longer "skipped", so cron heard nothing while
the records after the damage were lost. It is now counted on that line, which
``stats --skipped`` details. Records left out by design (a crawl's error pages,
revisits) are not counted: a crawl has them every night.
"""

from __future__ import annotations

import gzip
import json
import random

import pytest
from conftest import warc_record

from simdoc.store.manifest import DAMAGE_WORDS


def _line(i: int) -> bytes:
    rng = random.Random(i)
    return json.dumps({"text": " ".join(f"w{rng.randrange(10**5)}" for _ in range(60))}).encode() + b"\n"


def _quiet_line(run, corpus, index) -> str:
    r = run("pairs", corpus, "--index", index, "-t", "0.9", "-q")
    assert r.exit_code == 0, r.stderr
    return r.stderr


def test_a_jsonl_gz_cut_short(run, tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    data = gzip.compress(b"".join(_line(i) for i in range(2000)))
    (c / "shard.jsonl.gz").write_bytes(data[: len(data) // 2])
    (c / "empty.txt").write_text("")  # no shingles: not skipped, not damaged
    said = _quiet_line(run, c, tmp_path / "idx")
    assert said == f"simdoc: 1 file damaged or cut short, read in part; `simdoc stats --skipped --index {tmp_path / 'idx'}` lists them\n"
    assert _quiet_line(run, c, tmp_path / "idx") == said  # and on every run, as skipped files are


def test_a_warc_cut_inside_a_record_and_a_file_skipped(run, tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    raw = b"".join(warc_record(f"http://x/{i}", _line(i).decode(), i) for i in range(3))
    (c / "crawl.warc").write_bytes(raw[: len(raw) - 200])
    (c / "binary.txt").write_bytes(b"\0\1\2")
    said = _quiet_line(run, c, tmp_path / "idx")
    assert said.startswith("simdoc: 1 file skipped, 1 file damaged or cut short, read in part; "), said


def test_error_pages_left_out_are_not_damage(run, tmp_path):
    c = tmp_path / "c"
    c.mkdir()
    page = warc_record("http://x/ok", _line(1).decode(), 1)
    missing = page.replace(b"HTTP/1.1 200 OK", b"HTTP/1.1 404 NF")  # the same length: Content-Length holds
    (c / "crawl.warc").write_bytes(page + missing.replace(b"00000001>", b"00000002>"))
    assert _quiet_line(run, c, tmp_path / "idx") == ""


def test_a_parquet_file_with_a_damaged_row_group(run, tmp_path):
    pytest.importorskip("pyarrow")
    from test_parquet_damaged import damaged

    c = tmp_path / "c"
    c.mkdir()
    damaged(c / "data.parquet")
    said = _quiet_line(run, c, tmp_path / "idx")
    assert said.startswith("simdoc: 1 file damaged or cut short, read in part; "), said


def test_the_words_are_the_readers_own():
    # Each reason a reader gives for a file damaged or cut short holds one of DAMAGE_WORDS.
    from simdoc.corpus import formats, parquet, rawstream, warcio  # noqa: F401  (the modules that say them)
    import inspect

    sources = "".join(inspect.getsource(m) for m in (formats, parquet, rawstream, warcio))
    assert all(word in sources for word in DAMAGE_WORDS)

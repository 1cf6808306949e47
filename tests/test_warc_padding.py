"""NUL bytes between or after WARC records (a writer's padding to a block or to the file's end) are no record.

Until 2026-11-28 the record before such padding was skipped, with a reason
that blamed its Content-Length ("does not end where a record or the file does").
"""

from __future__ import annotations

from conftest import records, warc_record, write

TEXT = "the quick brown fox jumps over the lazy dog while the farmer sleeps in the barn " * 5


def test_padding_between_and_after_records_is_passed_over(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "w.warc", warc_record("http://a/1", TEXT, 1) + b"\0" * 100 + warc_record("http://a/2", TEXT, 2) + b"\0" * 5000)
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert records(r) == [["w.warc/#http://a/1", "w.warc/#http://a/2", "1.0000", "1.0000"]]
    assert "warning" not in r.stderr


def test_what_follows_the_padding_is_still_told(run, tmp_path):
    corpus = tmp_path / "c"
    first, second = warc_record("http://a/1", TEXT, 1), warc_record("http://a/2", TEXT, 2)
    write(corpus / "w.warc", first + second + b"\0" * 64 + b"not a record")
    r = run("pairs", corpus, "--index", tmp_path / "idx", "-t", "0.5")
    assert r.exit_code == 0, r.stderr
    assert len(records(r)) == 1
    at = len(first) + len(second) + 64
    assert f"w.warc: record 3 at byte {at:,}: no WARC header where a record should start" in r.stderr

"""What is read from a bucket to read a member again (issue 31), against moto's S3 server.

A nightly update verifies its new pairs by reading both documents again; in a
crawl, a partner is a WARC record read at its offset by ranged requests. Those
requests ask for 64 KiB first, then twice as much each time: a record of a
few KB costs one request of at most 64 KiB, not the 1 MiB it cost before. In
a dataset, a partner is a Parquet row: the footer and its row group's text
column are read, not the whole object (before: the object digested whole
first, for nothing).
"""

from __future__ import annotations

import base64
import gzip
import random

import pytest

from tests.conftest import warc_record
from tests.test_object_storage import s3, server  # noqa: F401  (fixtures)


def test_a_warc_record_read_again_costs_about_its_bytes_not_a_megabyte(s3, monkeypatch):
    from simdoc.corpus import object_reads, objects
    from simdoc.corpus.read import text_digest
    from simdoc.corpus.warc import read_warc, texts_at

    fs, endpoint, bucket, _ = s3
    bodies = [base64.b64encode(random.Random(i).randbytes(3000)).decode() for i in range(800)]
    members = [gzip.compress(warc_record(f"http://example.org/{i}", b, i)) for i, b in enumerate(bodies)]
    data = b"".join(members)
    assert len(data) > 2 << 20
    fs.pipe(f"{bucket}/crawl.warc.gz", data)
    url = f"s3://{bucket}/crawl.warc.gz"
    objects.configure({"endpoint_url": endpoint.split("=", 1)[1]})
    served: list[int] = []
    read = object_reads.ObjectFile.read
    monkeypatch.setattr(object_reads.ObjectFile, "read", lambda self, n=-1: served.append(len(got := read(self, n))) or got)
    try:
        docs = {offset: text for _, text, offset, _ in read_warc(url, "crawl.warc.gz").docs}
        offset = sum(map(len, members[:500]))
        assert offset in docs
        served.clear()
        got = texts_at(url, {offset: text_digest(docs[offset])})
    finally:
        objects.configure({})
    assert got == {offset: docs[offset]} and bodies[500] in got[offset]
    # One request of 64 KiB (its gzip magic checked in it); before, 2 bytes for the magic, then 1 MiB.
    assert len(members[500]) < sum(served) <= 64 << 10 and len(served) == 1, served


def test_a_nightly_pair_with_a_row_of_a_large_parquet_object_reads_its_row_group_not_the_object(run, s3, tmp_path, monkeypatch):
    """The partner's row is read by its footer and its row group's text column (ranged requests);
    before, verification digested the whole object first (and read ahead 4 MiB at each read)."""
    import io

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import s3fs

    fs, endpoint, bucket, _ = s3
    texts = [base64.b64encode(random.Random(i).randbytes(600)).decode() for i in range(2000)]
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": texts}), buf, compression="none", row_group_size=100)
    big = buf.getvalue()
    fs.pipe(f"{bucket}/d/big.parquet", big)
    args = ("pairs", f"s3://{bucket}/d/", "--index", tmp_path / "idx", "-j", "1", "--new", "--format", "tsv", "--storage-option", endpoint)
    first = run(*args)
    assert first.exit_code == 0 and first.stdout == "", first.stderr
    near = texts[1234][:-8] + "ABCDEFGH"  # a near copy of row 1234 (row group 12), in a new object
    fs.pipe(f"{bucket}/d/new.txt", near.encode())
    served: list[int] = []
    fetch = s3fs.core.S3File._fetch_range
    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", lambda self, start, end: served.append(len(got := fetch(self, start, end))) or got)
    second = run(*args)
    assert second.exit_code == 0, second.stderr
    assert second.stdout.startswith("big.parquet/#1235\tnew.txt\t"), second.stdout
    # new.txt, then the footer and one row group's text column (~60 KB) of a 1.6 MB object.
    assert sum(served) < len(near) + 200_000 < len(big) // 4, (served, len(big))


def test_a_long_query_at_a_url_is_streamed_and_prints_what_the_same_file_on_disk_does(run, s3, tmp_path, monkeypatch):
    """A query object past LARGE_CHARS is never held: it is streamed (one GET for each reading)
    as a long local file is, and prints what that file prints (issue 28 item 7)."""
    import simdoc.corpus.long_text as long_text
    import simdoc.corpus.streaming as streaming

    fs, endpoint, bucket, _ = s3
    rng = random.Random(7)
    words = ["alpha", "Beta", "GAMMA", "ΣΑΣ", "delta", "café", "bee", "l'île"]
    base = " ".join(rng.choice(words) for _ in range(6000))
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text(base)
    (corpus / "b.txt").write_text(base.replace("bee", "BEE", 40))
    (corpus / "c.txt").write_text(" ".join(rng.choice(words) for _ in range(4000)))
    idx = tmp_path / "i"
    assert run("pairs", corpus, "--index", idx, "-q").exit_code == 0
    query = base.replace("delta", "Delta", 30)
    (tmp_path / "q.txt").write_text(query)
    (tmp_path / "q.txt.gz").write_bytes(gzip.compress(query.encode()))
    for name in ("q.txt", "q.txt.gz"):
        fs.pipe(f"{bucket}/q/{name}", (tmp_path / name).read_bytes())
    readings: list[str] = []
    shingle = long_text.LongFile.shingle
    monkeypatch.setattr(long_text.LongFile, "shingle", lambda self, *a, **kw: readings.append(self.name) or shingle(self, *a, **kw))
    monkeypatch.setattr(streaming, "LARGE_CHARS", 1 << 12)
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 4099)  # cuts words, and UTF-8 sequences
    args = ["--index", idx, "--format", "jsonl", "--threshold", "0.3"]
    here = run("query", tmp_path / "q.txt", tmp_path / "q.txt.gz", *args)
    urls = [f"s3://{bucket}/q/q.txt", f"s3://{bucket}/q/q.txt.gz"]
    there = run("query", *urls, *args, "--storage-option", endpoint)
    assert here.exit_code == 0 and there.exit_code == 0, (here.stderr, there.stderr)
    assert here.stdout.count('"doc": "b.txt"') == 2, here.stdout
    expected = here.stdout.replace(str(tmp_path / "q.txt.gz"), urls[1]).replace(str(tmp_path / "q.txt"), urls[0])
    assert there.stdout == expected
    assert set(readings) == {str(tmp_path / "q.txt"), str(tmp_path / "q.txt.gz"), *urls}, readings

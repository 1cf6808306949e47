"""What is read from a bucket to read a member again (issue 31), against moto's S3 server.

A nightly update verifies its new pairs by reading both documents again; in a
crawl, a partner is a WARC record read at its offset by ranged requests. Those
requests ask for 64 KiB first, then twice as much each time: a record of a
few KB costs one request of at most 64 KiB, not the 1 MiB it cost before.
"""

from __future__ import annotations

import base64
import gzip
import random

from tests.conftest import warc_record
from tests.test_object_storage import s3, server  # noqa: F401  (fixtures)


def test_a_warc_record_read_again_costs_about_its_bytes_not_a_megabyte(s3, monkeypatch):
    from simdoc.corpus import objects
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
    read = objects.ObjectFile.read
    monkeypatch.setattr(objects.ObjectFile, "read", lambda self, n=-1: served.append(len(got := read(self, n))) or got)
    try:
        docs = {offset: text for _, text, offset, _ in read_warc(url, "crawl.warc.gz").docs}
        offset = sum(map(len, members[:500]))
        assert offset in docs
        served.clear()
        got = texts_at(url, {offset: text_digest(docs[offset])})
    finally:
        objects.configure({})
    assert got == {offset: docs[offset]} and bodies[500] in got[offset]
    # Its gzip magic (2 bytes), then one request of 64 KiB; before, the second was of 1 MiB.
    assert len(members[500]) < sum(served) <= (64 << 10) + 2 and len(served) == 2, served

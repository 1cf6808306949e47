"""A corpus in a bucket read by a cluster of separate processes (issue 31), as a user runs one.

`dask scheduler` and two `dask worker` processes are started on their own, in a
folder that is not the client's; the workers get the credentials from their own
environment and the endpoint with the work (``--storage-option``), and read the
objects themselves. Their answer, on a first build and on a nightly ``--new``,
is the local engine's, byte for byte, and so are the index's arrays. The server is moto's, on 127.0.0.1
(tests/test_object_storage.py).
"""

from __future__ import annotations

import gzip

import pytest

from tests.conftest import numbered_page, warc_record, write
from tests.test_dask import arrays
from tests.test_object_storage import KEYS, _simdoc, mixed_corpus, s3, server, upload  # noqa: F401 (fixtures)


def test_a_bucket_read_by_separate_scheduler_and_worker_processes_gives_the_local_answer(s3, tmp_path, cluster):  # noqa: F811
    pytest.importorskip("distributed")
    fs, endpoint, bucket, requests = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    records = [warc_record(f"http://example.org/{i}", numbered_page(10 + i % 3, change=i // 3), i) for i in range(6)]
    write(corpus / "web" / "a.warc.gz", b"".join(gzip.compress(r) for r in records))
    upload(fs, corpus, bucket, "crawl")
    for _ in range(2):
        cluster.start_worker(env=KEYS)
    cluster.wait_for_workers(2)
    url = f"s3://{bucket}/crawl/"
    opts = ("--format", "tsv", "--threshold", "0.5", "--storage-option", endpoint)
    client = tmp_path / "client"
    client.mkdir()

    def both(*extra: str) -> str:
        local = _simdoc("pairs", url, "--index", "local.idx", "-j", "1", *extra, *opts, cwd=client)
        dask = _simdoc("pairs", url, "--index", "dask.idx", "--scheduler", cluster.address, *extra, *opts, cwd=client)
        assert local.returncode == 0, local.stderr
        assert dask.returncode == 0, dask.stderr + cluster.logs()
        assert dask.stdout == local.stdout
        # The index too: the docs table's columns, read by the client from the workers' parts.
        assert arrays(client / "dask.idx") == arrays(client / "local.idx")
        return dask.stdout

    first = both()
    assert "data/pages.jsonl/#" in first and "web/a.warc.gz/#http://example.org/" in first and "page.txt.gz" in first
    # A nightly change in the bucket: the cluster's --new names what the local engine's does.
    fs.pipe(f"{bucket}/crawl/misc/todo.txt", numbered_page(2, change=1).encode())
    fs.rm(f"{bucket}/crawl/data/page.txt.gz")
    night = both("--new")
    assert "misc/todo.txt" in night and "page.txt.gz" not in night

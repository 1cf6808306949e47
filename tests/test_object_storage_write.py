"""``dedup --write`` to a URL (issue 31): the deduplicated corpus put under ``s3://bucket/prefix/``.

Against moto's S3 server on this machine (see tests/test_object_storage.py):
the objects written are the files a local ``--write DIR`` gets, byte for
byte; a prefix that holds anything, one inside the corpus, an object, and
``--link`` are refused before any work (exit 2), as a non-empty folder is;
a missing bucket or an unreachable endpoint is one ``Error:`` line, exit 6.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest

from tests.conftest import SAMPLE_CORPUS, assert_clean_error, numbered_page, write
from tests.test_object_storage import mixed_corpus, s3, server, tree, upload  # noqa: F401  (fixtures)


def objects_under(fs, bucket: str, prefix: str) -> dict[str, bytes]:
    found = fs.find(f"{bucket}/{prefix}")
    return {k[len(f"{bucket}/{prefix}/") :]: fs.cat_file(k) for k in sorted(found)}


@pytest.mark.parametrize("from_bucket", [False, True], ids=["local-corpus", "bucket-corpus"])
def test_dedup_write_to_a_bucket_puts_the_files_a_local_dir_gets(run, s3, tmp_path, from_bucket):
    """Plain files, JSON Lines (plain and gzip): the same bytes under the prefix as in the folder."""
    fs, endpoint, bucket, _ = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    lines = [{"id": f"z{i}", "text": numbered_page(i % 3, change=i // 3)} for i in range(6)]
    write(corpus / "data" / "more.jsonl.gz", gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode()))
    write(corpus / "img.png", b"\x89PNG\r\n\x1a\n\0\0binary")  # skipped by the index, copied as it is
    opts = ("--threshold", "0.5", "--id-field", "id", "-j", "1", "--storage-option", endpoint)
    here = run("dedup", corpus, "--index", tmp_path / "local.idx", "--write", tmp_path / "out", *opts)
    assert here.exit_code == 0, here.stderr
    source = corpus
    if from_bucket:
        upload(fs, corpus, bucket, "corpus")
        source = f"s3://{bucket}/corpus/"
    there = run("dedup", source, "--index", tmp_path / "s3.idx", "--write", f"s3://{bucket}/out/", *opts)
    assert there.exit_code == 0, there.stderr
    assert there.stdout == here.stdout and here.stdout
    written = tree(tmp_path / "out")
    assert "data/pages.jsonl" in written and "data/more.jsonl.gz" in written
    assert written["img.png"] == (corpus / "img.png").read_bytes()
    assert written["data/pages.jsonl"] != (corpus / "data" / "pages.jsonl").read_bytes()  # lines dropped
    assert len(written) < len(tree(corpus))  # plain files dropped
    assert objects_under(fs, bucket, "out") == written
    assert f"to s3://{bucket}/out/" in there.stderr


def test_a_prefix_that_holds_anything_is_refused_before_any_work(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    fs.pipe(f"{bucket}/out/old.txt", b"x")
    fs.pipe(f"{bucket}/one.txt", b"x")
    misc = SAMPLE_CORPUS / "misc"
    r = run("dedup", misc, "--index", tmp_path / "i", "--write", f"s3://{bucket}/out", "--storage-option", endpoint)
    assert_clean_error(r, 2, f"--write s3://{bucket}/out is not empty", "new or empty prefix")
    assert not (tmp_path / "i").exists()
    r = run("dedup", misc, "--index", tmp_path / "i", "--write", f"s3://{bucket}/one.txt", "--storage-option", endpoint)
    assert_clean_error(r, 2, f"--write s3://{bucket}/one.txt is an object, not a prefix", "new or empty prefix")
    r = run("dedup", misc, "--index", tmp_path / "i", "--write", f"s3://{bucket}/new/", "--link", "--storage-option", endpoint)
    assert_clean_error(r, 2, "--link cannot link files into", "drop --link")
    assert not (tmp_path / "i").exists()
    assert sorted(fs.find(bucket)) == [f"{bucket}/one.txt", f"{bucket}/out/old.txt"]


def test_a_prefix_inside_the_corpus_is_refused(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    r = run("dedup", f"s3://{bucket}/m/", "--index", tmp_path / "i", "--write", f"s3://{bucket}/m/out/", "--storage-option", endpoint)
    # As for a folder inside a local corpus: found once the corpus is known, before anything is written.
    assert r.exit_code == 2 and f"Error: --write s3://{bucket}/m/out/ is inside the corpus" in r.stderr, r.stderr
    assert not fs.exists(f"{bucket}/m/out")


def test_a_missing_bucket_or_endpoint_is_one_error_line_exit_6(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    misc = SAMPLE_CORPUS / "misc"
    r = run("dedup", misc, "--index", tmp_path / "i", "--write", f"s3://{bucket}-none/out/", "--storage-option", endpoint)
    assert_clean_error(r, 6, f"cannot write s3://{bucket}-none/out/: no such bucket {bucket}-none", "create the bucket")
    r = run(
        "dedup", misc, "--index", tmp_path / "i", "--write", f"s3://{bucket}/out/", "--storage-option", "endpoint_url=http://127.0.0.1:9",
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}',
    )
    assert_clean_error(r, 6, f"cannot write s3://{bucket}/out/", "endpoint")
    assert not (tmp_path / "i").exists()


def test_a_file_changed_since_it_was_indexed_leaves_no_object(run, s3, tmp_path):
    """The objects put before the changed file is found are deleted again: nothing is left."""
    from simdoc.corpus.objects import configure
    from simdoc.errors import CorpusError
    from simdoc.reports.write import write_corpus
    from simdoc.stages.reread import reader_of
    from simdoc.store.loaded import open_index

    fs, endpoint, bucket, _ = s3
    corpus = tmp_path / "c"
    for i in range(3):
        write(corpus / f"p{i}.txt", numbered_page(i))
    assert run("pairs", corpus, "--index", tmp_path / "i", "-j", "1").exit_code == 0
    write(corpus / "p2.txt", numbered_page(2, change=1))  # the last one written
    reader = reader_of(open_index(tmp_path / "i"))
    configure({"endpoint_url": endpoint.split("=", 1)[1]})
    try:
        with pytest.raises(CorpusError, match="p2.txt: changed or gone since it was indexed"):
            write_corpus(reader, set(), f"s3://{bucket}/out/")
    finally:
        configure({})
    assert fs.find(bucket) == []


def test_a_key_inside_an_object_is_named_not_written_and_the_rest_is(run, s3, tmp_path):
    """A bucket may hold `x.txt` and `x.txt/y.txt`; a folder cannot. The key inside the object,
    skipped by the index, cannot be put under a local DIR: it is named, the rest written."""
    fs, endpoint, bucket, _ = s3
    fs.pipe(f"{bucket}/c/x.txt", numbered_page(1).encode())
    fs.pipe(f"{bucket}/c/x.txt/y.txt", numbered_page(2).encode())
    fs.pipe(f"{bucket}/c/z.txt", numbered_page(1, change=1).encode())
    r = run("dedup", f"s3://{bucket}/c/", "--index", tmp_path / "i", "--write", tmp_path / "out", "-t", "0.5",
            "--storage-option", endpoint)
    assert r.exit_code == 0, r.stderr
    assert tree(tmp_path / "out") == {"x.txt": numbered_page(1).encode()}
    assert "x.txt/y.txt: not written to" in r.stderr and "1 path of the corpus is not in" in r.stderr


def test_a_symbolic_link_is_named_not_written_to_a_bucket(run, s3, tmp_path):
    """A bucket holds no links: the link is named, with why, and the rest is put."""
    fs, endpoint, bucket, _ = s3
    corpus = tmp_path / "c"
    write(corpus / "a.txt", numbered_page(0))
    write(corpus / "u.txt", numbered_page(3))
    os.symlink("u.txt", corpus / "link.txt")
    opts = ("--threshold", "0.5", "-j", "1", "--storage-option", endpoint)
    r = run("dedup", corpus, "--index", tmp_path / "i", "--write", f"s3://{bucket}/out/", *opts)
    assert r.exit_code == 0, r.stderr
    assert "link.txt: not written to" in r.stderr and "a bucket holds no links" in r.stderr
    assert sorted(objects_under(fs, bucket, "out")) == ["a.txt", "u.txt"]

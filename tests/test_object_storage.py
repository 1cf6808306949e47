"""A corpus at a URL (issue 31): a bucket on a real S3 API on this machine (moto's server mode).

The same files in a folder and under a bucket prefix give the same pairs and
the same Jaccards; a second cron run over an unchanged bucket reads no
object (the server's own request log says so); an object edited (a new ETag,
the same size) is read again, one deleted drops out; a missing backend and an
unreachable endpoint are one `Error:` line each. s3fs and moto come with the
test extra; without them only the tests that need no server run.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import subprocess
import sys
import uuid

import pytest

from tests.conftest import REPO, SAMPLE_CORPUS, assert_clean_error, numbered_page, warc_record, write

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
_REQUEST = re.compile(r'"(GET|HEAD|PUT|DELETE|POST) (\S+) HTTP')


class _Requests(logging.Handler):
    """The server's request log (werkzeug's), as (method, path) pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = _REQUEST.search(re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()))  # without its colours
        if m:
            self.seen.append((m.group(1), m.group(2)))

    def object_reads(self, bucket: str) -> list[str]:
        """GETs of objects (not listings) of ``bucket``."""
        return [p for m, p in self.seen if m == "GET" and p.startswith(f"/{bucket}/") and "?" not in p]


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    requests = _Requests()
    log = logging.getLogger("werkzeug")
    log.addHandler(requests)
    log.setLevel(logging.INFO)
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    yield f"http://{host}:{port}", requests
    srv.stop()
    log.removeHandler(requests)


@pytest.fixture
def s3(server, monkeypatch):
    """(file system, endpoint option, a new bucket's name, the request log)."""
    import s3fs

    endpoint, requests = server
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True)
    bucket = f"simdoc-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    requests.seen.clear()
    return fs, f"endpoint_url={endpoint}", bucket, requests


def upload(fs, folder, bucket: str, prefix: str) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        fs.pipe(f"{bucket}/{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())


def mixed_corpus(root):
    """Plain files in folders, a JSON Lines file with near-duplicate lines, a gzip file."""
    for sub in ("essays", "news", "misc"):
        src = SAMPLE_CORPUS / sub
        for p in src.rglob("*.txt"):
            write(root / sub / p.relative_to(src), p.read_text(encoding="utf-8"))
    lines = [{"id": f"p{i}", "text": numbered_page(i % 5, change=i // 5)} for i in range(10)]
    write(root / "data" / "pages.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    write(root / "data" / "page.txt.gz", gzip.compress(numbered_page(3, change=2).encode()))
    return root


def test_pairs_on_a_bucket_equal_pairs_on_the_same_files_on_disk(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    upload(fs, corpus, bucket, "crawl/2026")
    url = f"s3://{bucket}/crawl/2026/"
    local = run("pairs", corpus, "--index", tmp_path / "local.idx", "-j", "1", "--format", "tsv", "--threshold", "0.5")
    remote = run(
        "pairs", url, "--index", tmp_path / "s3.idx", "-j", "2", "--format", "tsv", "--threshold", "0.5",
        "--storage-option", endpoint,
    )
    assert local.exit_code == 0, local.stderr
    assert remote.exit_code == 0, (remote.stderr, remote.exception)
    assert remote.stdout == local.stdout
    assert "data/pages.jsonl/#" in remote.stdout and "data/page.txt.gz" in remote.stdout
    # clusters and dedup name the same documents; --absolute gives the objects' URLs.
    for cmd in (["clusters"], ["dedup"], ["dedup", "--format", "tsv"]):
        here = run(*cmd, corpus, "--index", tmp_path / "local.idx", "-j", "1")
        there = run(*cmd, url, "--index", tmp_path / "s3.idx", "-j", "1", "--storage-option", endpoint)
        assert there.exit_code == 0, there.stderr
        assert there.stdout == here.stdout and here.stdout
    absolute = run("dedup", url, "--index", tmp_path / "s3.idx", "--absolute", "--storage-option", endpoint)
    assert absolute.exit_code == 0, absolute.stderr
    dropped = run("dedup", corpus, "--index", tmp_path / "local.idx").stdout.split()
    assert absolute.stdout.split() == [f"s3://{bucket}/crawl/2026/{d}" for d in dropped]


def test_crawls_and_datasets_on_a_bucket_give_what_they_give_on_disk(run, s3, tmp_path):
    """WARC (a gzip member a record, and one stream) and Parquet: read, and verified at their offsets."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fs, endpoint, bucket, requests = s3
    corpus = tmp_path / "corpus"
    records = [warc_record(f"http://example.org/{i}", numbered_page(i % 3, change=i // 3), i) for i in range(6)]
    write(corpus / "crawl" / "a.warc.gz", b"".join(gzip.compress(r) for r in records))
    write(corpus / "crawl" / "b.warc.gz", gzip.compress(b"".join(records[:3])))
    (corpus / "sets").mkdir()
    texts = [numbered_page(i % 4, change=i // 4) for i in range(8)]
    pq.write_table(pa.table({"text": texts, "id": [f"r{i}" for i in range(8)]}), corpus / "sets" / "t.parquet", row_group_size=3)
    upload(fs, corpus, bucket, "web")
    opts = ("-j", "1", "--format", "tsv", "--threshold", "0.5", "--id-field", "id")
    local = run("pairs", corpus, "--index", tmp_path / "local.idx", *opts)
    requests.seen.clear()
    remote = run("pairs", f"s3://{bucket}/web", "--index", tmp_path / "s3.idx", *opts, "--storage-option", endpoint)
    assert local.exit_code == 0 and remote.exit_code == 0, (local.stderr, remote.stderr)
    assert remote.stdout == local.stdout
    assert "crawl/a.warc.gz/#http://example.org/0" in remote.stdout and "sets/t.parquet/#r0" in remote.stdout


def test_a_second_cron_run_over_an_unchanged_bucket_reads_no_object(run, s3, tmp_path):
    fs, endpoint, bucket, requests = s3
    upload(fs, mixed_corpus(tmp_path / "corpus"), bucket, "c")
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", "1", "--new", "--storage-option", endpoint)
    first = run(*args)
    assert first.exit_code == 0, first.stderr
    assert first.stdout and requests.object_reads(bucket)
    requests.seen.clear()
    second = run(*args, "-v")
    assert second.exit_code == 0, second.stderr
    assert second.stdout == ""  # --new: nothing changed, nothing new
    assert "shingle: up to date" in second.stderr
    assert requests.object_reads(bucket) == []  # the listing only


def test_an_edited_object_is_read_again_and_a_deleted_one_drops_out(run, s3, tmp_path):
    fs, endpoint, bucket, requests = s3
    near = numbered_page(1, change=1)  # what p3.txt becomes: a near copy of p1.txt
    texts = {f"p{i}.txt": numbered_page(i) for i in range(3)}
    texts["p3.txt"] = ("an unrelated text of the same size " * 20)[: len(near)]
    for name, text in texts.items():
        fs.pipe(f"{bucket}/c/{name}", text.encode())
    args = ("pairs", f"s3://{bucket}/c", "--index", tmp_path / "idx", "-j", "1", "--new", "--storage-option", endpoint)
    first = run(*args)
    assert first.exit_code == 0 and first.stdout == "", first.stderr
    # p3 becomes a near copy of p1 of the very same size: only its ETag tells.
    assert len(near) == len(texts["p3.txt"])
    fs.pipe(f"{bucket}/c/p3.txt", near.encode())
    requests.seen.clear()
    second = run(*args)
    assert second.exit_code == 0, second.stderr
    assert second.stdout.startswith("p1.txt\tp3.txt\t") and second.stdout.endswith("\tb\n")
    # Read: p3.txt by the scan (verification reads the copy the run kept), p1.txt by verification;
    # p0 and p2 not at all.
    assert sorted(requests.object_reads(bucket)) == [f"/{bucket}/c/p1.txt", f"/{bucket}/c/p3.txt"]
    fs.rm(f"{bucket}/c/p1.txt")
    third = run("pairs", f"s3://{bucket}/c", "--index", tmp_path / "idx", "-j", "1", "--storage-option", endpoint)
    assert third.exit_code == 0, third.stderr
    assert third.stdout == ""
    assert "simdoc: 3 documents" in third.stderr


def test_a_url_of_one_object_names_it_as_a_file_on_the_command_line_is_named(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    lines = [{"text": numbered_page(i % 2, change=i // 2)} for i in range(4)]
    fs.pipe(f"{bucket}/sets/pages.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode())
    r = run("pairs", f"s3://{bucket}/sets/pages.jsonl", "--index", tmp_path / "idx", "-j", "1", "--storage-option", endpoint)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("pages.jsonl/#1\tpages.jsonl/#3\t")


def test_show_query_and_dedup_write_on_a_bucket(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    url, idx = f"s3://{bucket}/m/", tmp_path / "idx"
    assert run("pairs", url, "--index", idx, "-j", "1", "--storage-option", endpoint).exit_code == 0
    a, b = "red-lentil-soup.txt", "backup/red-lentil-soup-copy.txt"
    shown = run("show", url, a, b, "--index", idx, "--format", "json", "--storage-option", endpoint)
    assert shown.exit_code == 0, shown.stderr
    assert "\"set_jaccard\": 1.0" in shown.stdout
    asked = run("query", SAMPLE_CORPUS / "misc" / a, "--index", idx, "--storage-option", endpoint)
    assert asked.exit_code == 0, asked.stderr
    assert asked.stdout.split("\t")[1] == b


def test_query_and_show_a_b_take_objects_and_lists_of_urls(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    misc, idx = SAMPLE_CORPUS / "misc", tmp_path / "idx"
    assert run("pairs", misc, "--index", idx, "-j", "1").exit_code == 0
    a, b = "red-lentil-soup.txt", "backup/red-lentil-soup-copy.txt"
    url_a, url_b = f"s3://{bucket}/m/{a}", f"s3://{bucket}/m/{b}"
    here = run("query", misc / a, "--index", idx)
    there = run("query", url_a, "--index", idx, "--storage-option", endpoint)
    assert there.exit_code == 0, there.stderr
    assert there.stdout == here.stdout.replace(str(misc / a), url_a) and f"{url_a}\t{b}\t" in there.stdout
    listed = tmp_path / "list.txt"
    listed.write_text(f"{url_a}\n{url_b}\n")
    both = run("query", "--files-from", listed, "--index", idx, "--storage-option", endpoint)
    assert both.exit_code == 0, both.stderr
    (tmp_path / "local.txt").write_text(f"{misc / a}\n{misc / b}\n")
    on_disk = run("query", "--files-from", tmp_path / "local.txt", "--index", idx).stdout
    assert both.stdout == on_disk.replace(str(misc / a), url_a).replace(str(misc / b), url_b)
    assert {tuple(line.split("\t")[:2]) for line in both.stdout.splitlines()} >= {(url_a, b), (url_b, a)}
    gone = run("query", f"s3://{bucket}/m/no-such.txt", "--index", idx, "--storage-option", endpoint)
    assert gone.exit_code == 3 and f"s3://{bucket}/m/no-such.txt: cannot read" in gone.stderr
    shown = run("show", url_a, url_b, "--format", "json", "--storage-option", endpoint)
    local = run("show", misc / a, misc / b, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["set_jaccard"] == json.loads(local.stdout)["set_jaccard"] == 1.0


def tree(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_dedup_write_from_a_bucket_writes_what_it_writes_from_the_files_on_disk(run, s3, tmp_path):
    """Plain, JSON Lines (plain and gzip), WARC (a gzip member a record, and one stream) and Parquet."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fs, endpoint, bucket, _ = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    lines = [{"id": f"z{i}", "text": numbered_page(i % 3, change=i // 3)} for i in range(6)]
    write(corpus / "data" / "more.jsonl.gz", gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode()))
    records = [warc_record(f"http://example.org/{i}", numbered_page(10 + i % 3, change=i // 3), i) for i in range(6)]
    write(corpus / "crawl" / "a.warc.gz", b"".join(gzip.compress(r) for r in records))
    write(corpus / "crawl" / "b.warc.gz", gzip.compress(b"".join(records[:4])))
    texts = [numbered_page(20 + i % 4, change=i // 4) for i in range(8)]
    pq.write_table(pa.table({"text": texts, "id": [f"r{i}" for i in range(8)]}), corpus / "crawl" / "t.parquet", row_group_size=3)
    upload(fs, corpus, bucket, "c")
    opts = ("--threshold", "0.5", "--id-field", "id", "-j", "1")
    here = run("dedup", corpus, "--index", tmp_path / "local.idx", "--write", tmp_path / "from-disk", *opts)
    there = run(
        "dedup", f"s3://{bucket}/c/", "--index", tmp_path / "s3.idx", "--write", tmp_path / "from-bucket", *opts,
        "--storage-option", endpoint,
    )
    assert here.exit_code == 0, here.stderr
    assert there.exit_code == 0, there.stderr
    assert there.stdout == here.stdout and here.stdout
    written = tree(tmp_path / "from-disk")
    assert tree(tmp_path / "from-bucket") == written
    assert len(written) < len(tree(corpus)) and "crawl/t.parquet" in written and "crawl/a.warc.gz" in written
    assert written["crawl/a.warc.gz"] != (corpus / "crawl" / "a.warc.gz").read_bytes()  # records dropped


def test_the_default_index_of_a_bucket_is_listed_and_cleaned_by_its_url(run, s3):
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    url = f"s3://{bucket}/m/"
    assert run("pairs", url, "-j", "1", "--storage-option", endpoint).exit_code == 0
    listed = run("cache", "list")
    assert listed.exit_code == 0 and f"\ts3://{bucket}/m\t" in listed.stdout
    assert run("stats", url.rstrip("/")).exit_code == 0  # the same index, with or without the slash
    checked = run("check", url)  # check finds a bucket's default index by its URL as well
    assert checked.exit_code == 0 and checked.stdout == "", (checked.stdout, checked.stderr)
    cleaned = run("cache", "clean", url)
    assert cleaned.exit_code == 0 and cleaned.stdout == listed.stdout.split("\t")[0] + "\n"
    assert run("cache", "list").stdout == ""


def test_the_endpoint_may_come_from_the_environment(run, s3, monkeypatch, tmp_path):
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint.split("=", 1)[1])
    r = run("pairs", f"s3://{bucket}/m/", "--index", tmp_path / "idx", "-j", "1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("backup/red-lentil-soup-copy.txt\tred-lentil-soup.txt\t1.0000\t1.0000")


def test_the_endpoint_may_come_from_fsspecs_config_folder(s3, tmp_path):
    """fsspec's own configuration (FSSPEC_CONFIG_DIR/*.json, read when fsspec is imported), in a
    process of its own: no --storage-option and no AWS_ENDPOINT_URL."""
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    conf = tmp_path / "fsspec-conf"
    conf.mkdir()
    (conf / "s3.json").write_text(json.dumps({"s3": {"endpoint_url": endpoint.split("=", 1)[1]}}))
    env = {k: v for k, v in os.environ.items() if k not in ("SIMDOC_INDEX", "SIMDOC_SCHEDULER", "AWS_ENDPOINT_URL")}
    env.update(KEYS, PYTHONPATH=str(REPO), SIMDOC_NO_NUMBA="1", FSSPEC_CONFIG_DIR=str(conf))
    argv = [sys.executable, "-m", "simdoc", "pairs", f"s3://{bucket}/m/", "--index", str(tmp_path / "idx"), "-j", "1"]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("backup/red-lentil-soup-copy.txt\tred-lentil-soup.txt\t1.0000\t1.0000")


def test_an_object_that_vanishes_after_the_listing_is_a_warning(run, s3, monkeypatch, tmp_path):
    from simdoc.corpus import objects

    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    listed = objects.list_prefix

    def then_deleted(url):
        got = listed(url)
        fs.rm(f"{bucket}/m/todo.txt")
        return got

    monkeypatch.setattr(objects, "list_prefix", then_deleted)
    r = run("pairs", f"s3://{bucket}/m/", "--index", tmp_path / "idx", "-j", "1", "--storage-option", endpoint)
    assert r.exit_code == 0, r.stderr
    # Opened from the listing's details, the read itself finds the key gone (a HEAD first: "vanished").
    assert re.search(r"^warning: todo\.txt: (vanished before it could be read|cannot read: .*does not exist)", r.stderr, re.M), r.stderr
    assert "(1 file skipped)" in r.stderr and "Traceback" not in r.stderr


def test_storage_option_values_are_json_where_they_parse():
    from simdoc.corpus.objects import parse_option

    assert parse_option("anon=true") == ("anon", True)
    assert parse_option("endpoint_url=http://h:9000") == ("endpoint_url", "http://h:9000")
    assert parse_option('client_kwargs={"region_name": "eu-west-1"}') == ("client_kwargs", {"region_name": "eu-west-1"})
    assert parse_option("key=a=b") == ("key", "a=b")


def test_members_are_read_again_by_ranged_requests(s3, tmp_path):
    from simdoc.corpus.jsonl_at import texts_at
    from simdoc.corpus.objects import configure

    fs, endpoint, bucket, _ = s3
    body = "".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(1000)).encode()
    fs.pipe(f"{bucket}/big.jsonl", body)
    start = body.index(b'{"text": "line 500"}')
    configure({"endpoint_url": endpoint.split("=", 1)[1]})
    try:
        got = texts_at(f"s3://{bucket}/big.jsonl", {"a": (start, len(b'{"text": "line 500"}'))})
    finally:
        configure({})
    assert got == {"a": "line 500"}


def test_an_unreachable_endpoint_is_one_error_line(run, monkeypatch, tmp_path):
    pytest.importorskip("s3fs")
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    r = run(
        "pairs", "s3://no-such-bucket/prefix/", "--index", tmp_path / "idx", "--storage-option", "endpoint_url=http://127.0.0.1:9",
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}',
    )
    assert_clean_error(r, 3, "cannot list s3://no-such-bucket/prefix", "check the endpoint and the network (--storage-option endpoint_url=...)")
    assert not (tmp_path / "idx").exists()


def test_a_missing_backend_names_the_extra_to_install(run, monkeypatch, tmp_path):
    fsspec = pytest.importorskip("fsspec")

    def no_backend(protocol):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec, "get_filesystem_class", no_backend)
    r = run("pairs", "s3://bucket/prefix/", "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "s3:// needs a backend that is not installed", "pip install 'simdoc[s3]'")


def test_a_missing_backend_without_an_extra_names_its_package(run, monkeypatch, tmp_path):
    """gs:// has no simdoc extra: the hint is the package fsspec's registry names for it
    (before, the hint was a truncated "install the package named")."""
    fsspec = pytest.importorskip("fsspec")

    def no_backend(protocol):
        raise ImportError("Please install gcsfs to access Google Storage")

    monkeypatch.setattr(fsspec, "get_filesystem_class", no_backend)
    r = run("pairs", "gs://bucket/prefix/", "--index", tmp_path / "idx")
    assert_clean_error(r, 3, "gs:// needs a backend that is not installed", "pip install gcsfs")


def test_a_storage_option_without_a_value_is_a_usage_error(run, tmp_path):
    r = run("pairs", "s3://bucket/prefix/", "--index", tmp_path / "idx", "--storage-option", "anon")
    assert r.exit_code == 2
    assert "KEY=VALUE" in r.stderr


def _simdoc(*args, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SIMDOC_INDEX", "SIMDOC_SCHEDULER")}
    env.update(KEYS, PYTHONPATH=str(REPO), SIMDOC_NO_NUMBA="1")
    return subprocess.run([sys.executable, "-m", "simdoc", *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=240)


def test_spawned_workers_are_given_the_storage_options_with_the_work(s3, monkeypatch):
    """Not a process global that only forked workers inherit: a spawned pool worker reads the object too."""
    import multiprocessing

    from simdoc.corpus import objects
    from simdoc.engines import local

    fs, endpoint, bucket, _ = s3
    for i in range(3):
        fs.pipe(f"{bucket}/o/{i}.txt", b"x" * (i + 1))
    monkeypatch.setattr(local, "pool_context", lambda share: multiprocessing.get_context("spawn"))
    objects.configure({"endpoint_url": endpoint.split("=", 1)[1]})
    try:
        got = list(local.LocalEngine(2).map(objects.object_stat, [f"s3://{bucket}/o/{i}.txt" for i in range(3)]))
    finally:
        objects.configure({})
    assert [st.st_size if st else None for st in got] == [1, 2, 3]


def test_a_url_corpus_on_a_dask_cluster_is_read_by_the_workers_and_gives_the_local_answer(s3, tmp_path):
    pytest.importorskip("distributed")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fs, endpoint, bucket, _ = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    records = [warc_record(f"http://example.org/{i}", numbered_page(10 + i % 3, change=i // 3), i) for i in range(6)]
    write(corpus / "web" / "a.warc.gz", b"".join(gzip.compress(r) for r in records))
    texts = [numbered_page(20 + i % 4, change=i // 4) for i in range(8)]
    pq.write_table(pa.table({"text": texts, "id": [f"r{i}" for i in range(8)]}), corpus / "web" / "t.parquet", row_group_size=3)
    upload(fs, corpus, bucket, "crawl")
    url = f"s3://{bucket}/crawl/"
    opts = ("--format", "tsv", "--threshold", "0.5", "--id-field", "id", "--storage-option", endpoint)
    local = _simdoc("pairs", url, "--index", tmp_path / "local.idx", "-j", "1", *opts, cwd=tmp_path)
    dask = _simdoc("pairs", url, "--index", tmp_path / "dask.idx", "--scheduler", "local[2]", *opts, cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and "data/pages.jsonl/#" in dask.stdout
    assert "web/a.warc.gz/#http://example.org/" in dask.stdout and "web/t.parquet/#r" in dask.stdout
    # A nightly change: --new on the cluster reports what it reports locally.
    fs.pipe(f"{bucket}/crawl/misc/todo.txt", numbered_page(2, change=1).encode())
    local = _simdoc("pairs", url, "--index", tmp_path / "local.idx", "-j", "1", "--new", *opts, cwd=tmp_path)
    dask = _simdoc("pairs", url, "--index", tmp_path / "dask.idx", "--scheduler", "local[2]", "--new", *opts, cwd=tmp_path)
    assert local.returncode == 0 and dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and "misc/todo.txt" in dask.stdout
    # The options are never written to the index.
    assert not any(endpoint.split("=", 1)[1].encode() in p.read_bytes() for p in (tmp_path / "dask.idx").rglob("*") if p.is_file())


def test_a_worker_that_cannot_reach_the_endpoint_is_one_error_line(s3, tmp_path, monkeypatch):
    """Checked on each worker before the client lists or reads anything: exit 7, never a hang."""
    pytest.importorskip("distributed")
    fs, endpoint, bucket, _ = s3
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    index = tmp_path / "idx"
    r = _simdoc(
        "pairs", f"s3://{bucket}/m/", "--index", index, "--scheduler", "local[1]", "--storage-option", "endpoint_url=http://127.0.0.1:9",
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}', cwd=tmp_path,
    )
    assert r.returncode == 7, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert re.search(rf"^Error: Dask worker .* cannot read the corpus at s3://{bucket}/m/: cannot list", r.stderr, re.M), r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("Error:")]) == 1
    assert not (index / "manifest.json").exists()

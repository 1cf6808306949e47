"""A corpus given by ``--files-from`` listing URLs (issue 31), against moto's S3 server on this machine.

The objects a list names are read as the same files listed on disk are: the
same ids (relative to their deepest common "folder"), the same pairs; a
name that is gone is a warning and a file skipped; a second cron run over
unchanged objects reads none of them; a list that mixes URLs and paths, or
buckets, is one ``Error:`` line (exit 3).
"""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean_error, numbered_page
from tests.test_object_storage import mixed_corpus, s3, server, upload  # noqa: F401  (fixtures)


def test_a_list_of_urls_gives_the_pairs_of_the_same_files_listed_on_disk(run, s3, tmp_path):
    fs, endpoint, bucket, requests = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    upload(fs, corpus, bucket, "crawl/2026")
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file() and "essays" not in p.parts)
    (tmp_path / "local.txt").write_text("".join(f"{corpus / n}\n" for n in names))
    urls = [f"s3://{bucket}/crawl/2026/{n}" for n in names]
    (tmp_path / "urls.txt").write_text("".join(f"{u}\n" for u in urls + [f"s3://{bucket}/crawl/2026/news/gone.txt"]))
    opts = ("-j", "1", "--format", "tsv", "--threshold", "0.5", "--new")
    local = run("pairs", "--files-from", tmp_path / "local.txt", "--index", tmp_path / "local.idx", *opts)
    remote = run("pairs", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "s3.idx", *opts, "--storage-option", endpoint)
    assert local.exit_code == 0, local.stderr
    assert remote.exit_code == 0, (remote.stderr, remote.exception)
    assert remote.stdout == local.stdout and "data/pages.jsonl/#" in remote.stdout and "misc/" in remote.stdout
    assert "warning: news/gone.txt: no such object, skipped" in remote.stderr
    # Ids as on disk: relative to the deepest common folder; --absolute gives the objects' URLs.
    dropped = run("dedup", "--files-from", tmp_path / "local.txt", "--index", tmp_path / "local.idx").stdout.split()
    absolute = run(
        "dedup", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "s3.idx", "--absolute", "--storage-option", endpoint
    )
    assert absolute.exit_code == 0, absolute.stderr
    assert dropped and absolute.stdout.split() == [f"s3://{bucket}/crawl/2026/{d}" for d in dropped]
    # A nightly run: nothing changed, no object read (one HEAD each, no GET); then one edit is seen.
    requests.seen.clear()
    again = run("pairs", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "s3.idx", *opts, "--storage-option", endpoint)
    assert again.exit_code == 0 and again.stdout == "", again.stderr
    assert requests.object_reads(bucket) == []
    fs.pipe(f"{bucket}/crawl/2026/misc/todo.txt", numbered_page(3, change=1).encode())
    edited = run("pairs", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "s3.idx", *opts, "--storage-option", endpoint)
    assert edited.exit_code == 0, edited.stderr
    assert "misc/todo.txt" in edited.stdout and "data/pages.jsonl/#" in edited.stdout


@pytest.mark.parametrize("second", ["local", "other-bucket"])
def test_a_list_that_mixes_urls_with_paths_or_buckets_is_one_error_line(run, s3, tmp_path, second):
    fs, endpoint, bucket, _ = s3
    fs.pipe(f"{bucket}/c/a.txt", numbered_page(1).encode())
    other = str(tmp_path / "b.txt") if second == "local" else "s3://another-bucket/c/b.txt"
    (tmp_path / "list.txt").write_text(f"s3://{bucket}/c/a.txt\n{other}\n")
    r = run("pairs", "--files-from", tmp_path / "list.txt", "--index", tmp_path / "idx", "--storage-option", endpoint)
    assert_clean_error(r, 3, "takes no other CORPUS or local path" if second == "local" else "in several buckets")
    assert not (tmp_path / "idx").exists()


def test_a_list_of_urls_on_a_dask_cluster_gives_the_local_answer(s3, tmp_path):
    """The contract check reaches the list's base with the run's options; the workers read the objects."""
    pytest.importorskip("distributed")
    from tests.test_object_storage import _simdoc

    fs, endpoint, bucket, _ = s3
    corpus = mixed_corpus(tmp_path / "corpus")
    upload(fs, corpus, bucket, "crawl")
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    (tmp_path / "urls.txt").write_text("".join(f"s3://{bucket}/crawl/{n}\n" for n in names))
    opts = ("--files-from", tmp_path / "urls.txt", "--format", "tsv", "--threshold", "0.5", "--storage-option", endpoint)
    local = _simdoc("pairs", "--index", tmp_path / "local.idx", "-j", "1", *opts, cwd=tmp_path)
    dask = _simdoc("pairs", "--index", tmp_path / "dask.idx", "--scheduler", "local[2]", *opts, cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout and "data/pages.jsonl/#" in dask.stdout


def test_a_worker_that_cannot_reach_the_listed_objects_is_one_error_line(s3, tmp_path):
    """Checked on each worker before the client asks the store anything: exit 7, as for a prefix."""
    pytest.importorskip("distributed")
    import re

    from tests.test_object_storage import _simdoc

    fs, endpoint, bucket, _ = s3
    (tmp_path / "urls.txt").write_text(f"s3://{bucket}/m/a.txt\ns3://{bucket}/m/b/c.txt\n")
    r = _simdoc(
        "pairs", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "idx", "--scheduler", "local[1]",
        "--storage-option", "endpoint_url=http://127.0.0.1:9",
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}', cwd=tmp_path,
    )
    assert r.returncode == 7, r.stderr
    assert re.search(rf"^Error: Dask worker .* cannot read the corpus at s3://{bucket}/m: cannot list", r.stderr, re.M), r.stderr

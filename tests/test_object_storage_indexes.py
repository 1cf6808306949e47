"""A simdoc index uploaded under a bucket prefix is not read as documents (QA pass of 2026-11-27),
against moto's S3 server on this machine.

A prefix is listed as a folder is walked: a "folder" of it that holds
simdoc's manifest.json, or simdoc's lock file with nothing but what simdoc
writes beside it (a first build that did not finish), is passed over with the
walk's note, once, as it is on disk; so are the objects a ``--files-from``
list of URLs names inside one. A folder with a lock or manifest of its own is read.
"""

from __future__ import annotations

import pytest

from tests.conftest import TEXT_A, TEXT_C, summary, write
from tests.test_foreign_index import (
    NOTE,
    PID_NOTE,
    UNFINISHED,
    _corpus_with_an_old_index,
    _corpus_with_an_unfinished_index,
)
from tests.test_object_storage import s3, server, upload  # noqa: F401  (fixtures)

FINISHED = NOTE.removeprefix("warning: old.idx: ")


def _warnings(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


@pytest.mark.parametrize("kind", ["finished", "unfinished"])
def test_an_index_under_the_prefix_is_passed_over_with_the_walks_note(run, s3, tmp_path, kind):
    fs, endpoint, bucket, _ = s3
    corpus = _corpus_with_an_old_index(run, tmp_path) if kind == "finished" else _corpus_with_an_unfinished_index(tmp_path)
    reason = FINISHED if kind == "finished" else UNFINISHED
    upload(fs, corpus, bucket, "crawl")  # the index's objects too: manifest.json (or not), lock, arrays
    assert fs.exists(f"{bucket}/crawl/old.idx/lock")
    idx = tmp_path / "idx"
    url = f"s3://{bucket}/crawl/"
    first = run("pairs", url, "--index", idx, "--storage-option", endpoint)
    assert first.exit_code == 0, (first.stderr, first.exception)
    assert first.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(first)["docs"] == "3" and summary(first)["skipped"] == "1"
    assert _warnings(first) == [f"warning: old.idx: {reason}"]
    again = run("pairs", url, "--index", idx, "--storage-option", endpoint)  # said once, counted every time
    assert again.exit_code == 0, again.stderr
    assert _warnings(again) == [] and summary(again)["skipped"] == "1"
    assert run("stats", "--index", idx, "--skipped").stdout == f"old.idx\t{reason}\n"


def test_a_list_of_urls_passes_over_the_objects_of_an_index(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    corpus = _corpus_with_an_old_index(run, tmp_path)
    upload(fs, corpus, bucket, "crawl")
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    (tmp_path / "urls.txt").write_text("".join(f"s3://{bucket}/crawl/{n}\n" for n in names))
    idx = tmp_path / "idx"
    r = run("pairs", "--files-from", tmp_path / "urls.txt", "--index", idx, "--storage-option", endpoint)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout == "a.txt\tb.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "3" and summary(r)["skipped"] == "1"
    assert _warnings(r) == [NOTE]
    assert run("stats", "--index", idx, "--skipped").stdout == f"old.idx\t{FINISHED}\n"


def test_a_prefix_folder_with_a_lock_or_manifest_of_its_own_is_read(run, s3, tmp_path):
    fs, endpoint, bucket, _ = s3
    corpus = tmp_path / "c"
    write(corpus / "a.txt", TEXT_A)
    write(corpus / "app" / "manifest.json", '{"name": "an app", "format": "not simdoc\'s"}')
    write(corpus / "app" / "b.txt", TEXT_A)
    write(corpus / "backup" / "lock", PID_NOTE)
    write(corpus / "backup" / "c.txt", TEXT_C)
    upload(fs, corpus, bucket, "crawl")
    r = run("pairs", f"s3://{bucket}/crawl/", "--index", tmp_path / "idx", "--storage-option", endpoint)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert r.stdout == "a.txt\tapp/b.txt\t1.0000\t1.0000\n"
    assert summary(r)["docs"] == "5" and summary(r)["skipped"] is None


def test_a_list_of_urls_naming_no_manifest_or_lock_asks_no_folder(run, s3, tmp_path, monkeypatch):
    import simdoc.corpus.indexes as indexes

    fs, endpoint, bucket, _ = s3
    corpus = tmp_path / "c"
    for i, folder in enumerate(("x", "y/z", "w")):
        write(corpus / folder / f"d{i}.txt", TEXT_A)
    upload(fs, corpus, bucket, "crawl")
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    (tmp_path / "urls.txt").write_text("".join(f"s3://{bucket}/crawl/{n}\n" for n in names))
    asked: list[str] = []
    real = indexes._object_head
    monkeypatch.setattr(indexes, "_object_head", lambda fs, path, ask=False: asked.append(path) or real(fs, path, ask))
    r = run("pairs", "--files-from", tmp_path / "urls.txt", "--index", tmp_path / "idx", "--storage-option", endpoint)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert summary(r)["docs"] == "3" and len(r.stdout.splitlines()) == 3
    assert asked == []  # no HEAD of a manifest.json or lock in any of the four folders

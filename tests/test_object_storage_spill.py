"""A nightly update on a bucket fetches each changed object once (issue 31), against moto's S3 server.

The scan reads the new and changed objects; verification then reads the
documents of the new pairs again. An object the scan read whole is kept on
local disk for the rest of the run (simdoc.corpus.object_spill), and
verification reads that copy when the store still has the object as it was
(its ETag and size, asked by a HEAD, which carries no body). An object edited
between the scan and verification is read from the store again and found
changed, as before; beyond the bound nothing is kept and objects are read
twice, as before; the copies are gone when the run ends.
"""

from __future__ import annotations

import tempfile
from collections import Counter

import pytest

from tests.conftest import numbered_page
from tests.test_object_storage import s3, server  # noqa: F401  (fixtures)


def _corpus(fs, bucket: str) -> None:
    for i in range(8):
        fs.pipe(f"{bucket}/c/d/p{i}.txt", numbered_page(i).encode())


def _nightly(fs, bucket: str) -> None:
    """p1 and p5 edited into near copies of p0 and p4, a new near copy of p2: three changed objects."""
    fs.pipe(f"{bucket}/c/d/p1.txt", numbered_page(0, change=1).encode())
    fs.pipe(f"{bucket}/c/d/p5.txt", numbered_page(4, change=1).encode())
    fs.pipe(f"{bucket}/c/new/q.txt", numbered_page(2, change=2).encode())


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """The system's temporary directory of this test: the run's copies go there."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_nightly_update_reads_each_changed_object_once(run, s3, tmp_path, own_tmp, jobs):
    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", jobs, "--new", "--storage-option", endpoint)
    first = run(*args)
    assert first.exit_code == 0 and first.stdout == "", first.stderr
    _nightly(fs, bucket)
    requests.seen.clear()
    second = run(*args)
    assert second.exit_code == 0, second.stderr
    assert sorted(line.split("\t")[:2] for line in second.stdout.splitlines()) == [
        ["d/p0.txt", "d/p1.txt"], ["d/p2.txt", "new/q.txt"], ["d/p4.txt", "d/p5.txt"]
    ]
    gets = Counter(requests.object_reads(bucket))
    # Each changed object once (by the scan), each unchanged partner once (by verification).
    assert gets == Counter(f"/{bucket}/c/{k}" for k in ("d/p1.txt", "d/p5.txt", "new/q.txt", "d/p0.txt", "d/p4.txt", "d/p2.txt"))
    assert list(own_tmp.iterdir()) == []  # the copies are gone with the run


def test_an_object_edited_between_the_scan_and_verification_is_still_found_changed(run, s3, tmp_path, own_tmp, monkeypatch):
    from simdoc.stages import pairs

    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", "1", "--new", "--storage-option", endpoint)
    assert run(*args).exit_code == 0
    _nightly(fs, bucket)
    score = pairs._score
    edits = []

    def edited_after_the_scan(*a, **kw):
        if not edits:  # p1 is no near copy of p0 any more: the copy the scan kept is out of date
            fs.pipe(f"{bucket}/c/d/p1.txt", ("an unrelated text, quite different " * 30).encode())
            edits.append(1)
        return score(*a, **kw)

    monkeypatch.setattr(pairs, "_score", edited_after_the_scan)
    requests.seen.clear()
    second = run(*args)
    assert second.exit_code == 0, second.stderr
    # Found changed by verification, indexed again: p0-p1 is no pair (the kept copy would say it is).
    assert sorted(line.split("\t")[:2] for line in second.stdout.splitlines()) == [["d/p2.txt", "new/q.txt"], ["d/p4.txt", "d/p5.txt"]]
    gets = Counter(requests.object_reads(bucket))
    assert gets[f"/{bucket}/c/d/p1.txt"] >= 2 and gets[f"/{bucket}/c/d/p5.txt"] == 1
    assert list(own_tmp.iterdir()) == []


def test_beyond_the_bound_nothing_is_kept_and_objects_are_read_again(run, s3, tmp_path, own_tmp, monkeypatch):
    from simdoc.corpus import object_spill

    monkeypatch.setattr(object_spill, "SPILL_BYTES", len(numbered_page(0, change=1)) + 10)  # one object fits
    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", "1", "--new", "--storage-option", endpoint)
    assert run(*args).exit_code == 0
    _nightly(fs, bucket)
    requests.seen.clear()
    second = run(*args)
    assert second.exit_code == 0, second.stderr
    assert len(second.stdout.splitlines()) == 3, second.stderr
    gets = Counter(requests.object_reads(bucket))
    changed = [gets[f"/{bucket}/c/{k}"] for k in ("d/p1.txt", "d/p5.txt", "new/q.txt")]
    assert sorted(changed) == [1, 2, 2]  # one kept, the others read again as before
    assert list(own_tmp.iterdir()) == []


def test_a_second_run_in_one_process_reads_objects_edited_under_a_subfolder(run, s3, tmp_path):
    """The listing of the first run is not what the second run opens objects by (fsspec's
    cache of the "folder" d/ once kept the old ETag: the edited object was refused as vanished)."""
    fs, endpoint, bucket, _ = s3
    _corpus(fs, bucket)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", "1", "--new", "--storage-option", endpoint)
    assert run(*args).exit_code == 0
    assert run(*args).exit_code == 0  # the listing's folders kept by fsspec, as a long-lived process has them
    _nightly(fs, bucket)
    second = run(*args)
    assert second.exit_code == 0 and "warning" not in second.stderr, second.stderr
    assert len(second.stdout.splitlines()) == 3

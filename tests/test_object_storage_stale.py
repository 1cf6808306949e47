"""An object edited after the listing is stale, as an edited file is, not gone (issue 31), on moto's S3 server.

A run lists the bucket, scans what changed, then verifies the new pairs by
reading both documents again. An unchanged partner edited in between (after
the listing, before verification) no longer has the bytes indexed: it is
*stale*, so the run indexes it again and scores again, exactly as it does
for a file of a folder edited at that moment. It once was *gone* instead
("could not be read again"): its read, carrying the listing's ETag, was
refused, and nothing asked whether the object was still there; the index
then kept its old signature.
"""

from __future__ import annotations

import pytest

from tests.conftest import numbered_page
from tests.test_object_storage import s3, server  # noqa: F401  (fixtures)

UNRELATED = "an unrelated text, quite different from every page " * 30


def _pages() -> dict[str, str]:
    return {f"d/p{i}.txt": numbered_page(i) for i in range(6)}


def _night(put) -> None:
    put("d/p1.txt", numbered_page(0, change=1))  # a near copy of p0 (which is not read by the scan)
    put("d/p5.txt", numbered_page(4, change=1))  # a near copy of p4


def _second_run(run, monkeypatch, corpus, index, jobs, put, extra=()):
    """The nightly run, p0 edited once the scan is done (before verification reads it)."""
    from simdoc.stages import pairs

    score = pairs._score
    edits = []

    def edited_after_the_listing(*a, **kw):
        if not edits:
            put("d/p0.txt", UNRELATED)
            edits.append(1)
        return score(*a, **kw)

    monkeypatch.setattr(pairs, "_score", edited_after_the_listing)
    try:
        return run("pairs", corpus, "--index", index, "-j", jobs, "--new", "--format", "tsv", *extra)
    finally:
        monkeypatch.setattr(pairs, "_score", score)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_object_edited_after_the_listing_is_stale_as_an_edited_file_is(run, s3, tmp_path, monkeypatch, jobs):
    fs, endpoint, bucket, requests = s3
    folder = tmp_path / "corpus"

    def put_file(key: str, text: str) -> None:
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_text(text, encoding="utf-8")

    def put_object(key: str, text: str) -> None:
        fs.pipe(f"{bucket}/c/{key}", text.encode())

    url, opt = f"s3://{bucket}/c/", ("--storage-option", endpoint)
    outcomes = []
    for corpus, put, extra in ((folder, put_file, ()), (url, put_object, opt)):
        for key, text in _pages().items():
            put(key, text)
        index = tmp_path / f"idx{len(outcomes)}"
        first = run("pairs", corpus, "--index", index, "-j", jobs, "--new", *extra)
        assert first.exit_code == 0 and first.stdout == "", first.stderr
        _night(put)
        second = _second_run(run, monkeypatch, corpus, index, jobs, put, extra)
        assert second.exit_code == 0, (second.stderr, second.exception)
        # Indexed again: a third run over the same documents finds nothing changed, nothing new.
        requests.seen.clear()
        third = run("pairs", corpus, "--index", index, "-j", jobs, "--new", "--format", "tsv", *extra)
        assert third.exit_code == 0, third.stderr
        outcomes.append((second, third))
    (local, local_after), (remote, remote_after) = outcomes
    # p0 is no near copy of p1 any more; p4-p5 is the one new pair, as on disk.
    assert [line.split("\t")[:2] for line in local.stdout.splitlines()] == [["d/p4.txt", "d/p5.txt"]]
    assert remote.stdout == local.stdout
    assert "could not be read again" not in remote.stderr, remote.stderr
    assert [ln for ln in remote.stderr.splitlines() if "warning" in ln.lower()] == [
        ln for ln in local.stderr.splitlines() if "warning" in ln.lower()
    ]
    assert local_after.stdout == remote_after.stdout == ""
    assert requests.object_reads(bucket) == []  # p0 was indexed as it is now: nothing to read again

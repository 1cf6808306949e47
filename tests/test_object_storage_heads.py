"""An object listed is read without a HEAD first (issue 31), against moto's S3 server.

The listing gives each object's ETag; its reads carry it (If-Match), so
opening one costs no request, in this process or in the forked workers. A
HEAD is left only where it is the one request: a copy the run kept, read if
the object is unchanged since (simdoc.corpus.object_spill), and a name of a
--files-from list (asked once, then read by that ETag). An object edited
after the listing is still found so: its first read is refused, and it is
opened anew and read as it is now, as a file edited after the walk is.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import numbered_page
from tests.test_object_storage import s3, server  # noqa: F401  (fixtures)
from tests.test_object_storage_spill import _corpus, _nightly, own_tmp  # noqa: F401  (own_tmp: a fixture)


def _heads_before_reads(requests, bucket: str) -> list[str]:
    """Objects asked by a HEAD before the run's first GET of them."""
    got, early = set(), []
    for method, path in requests.seen:
        if not path.startswith(f"/{bucket}/") or "?" in path:
            continue
        if method == "GET":
            got.add(path)
        elif method == "HEAD" and path not in got:
            early.append(path)
    return early


@pytest.fixture
def small_tasks(monkeypatch):
    """Two files a scan task: several tasks, so -j 2 forks workers for the scan."""
    from simdoc.stages import scan

    monkeypatch.setattr(scan, "BATCH_DOCS", 2)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_objects_listed_are_read_without_a_head_first(run, s3, tmp_path, own_tmp, small_tasks, jobs):
    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", jobs, "--new", "--storage-option", endpoint)
    requests.seen.clear()
    first = run(*args)
    assert first.exit_code == 0 and "warning" not in first.stderr, first.stderr
    assert _heads_before_reads(requests, bucket) == []
    assert Counter(requests.object_reads(bucket)) == Counter(f"/{bucket}/c/d/p{i}.txt" for i in range(8))
    _nightly(fs, bucket)
    requests.seen.clear()
    second = run(*args)
    assert second.exit_code == 0 and "warning" not in second.stderr, second.stderr
    assert len(second.stdout.splitlines()) == 3
    assert _heads_before_reads(requests, bucket) == []  # the unchanged partners too (they were HEADed)
    heads = sorted(p for m, p in requests.seen if m == "HEAD")
    # Left: the changed objects' HEADs before their kept copies are read (no GET: the one request).
    assert heads == sorted(f"/{bucket}/c/{k}" for k in ("d/p1.txt", "d/p5.txt", "new/q.txt"))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_object_edited_after_the_listing_is_read_as_it_is_now(run, s3, tmp_path, own_tmp, monkeypatch, jobs):
    """As a file edited after the walk is read as it is when opened: indexed, no warning."""
    from simdoc.corpus import objects

    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    listing = objects.list_prefix

    def edited_after_the_listing(url):
        got = listing(url)
        fs.pipe(f"{bucket}/c/d/p1.txt", numbered_page(0, change=1).encode())  # now a near copy of p0
        return got

    monkeypatch.setattr(objects, "list_prefix", edited_after_the_listing)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", jobs, "--format", "tsv", "--storage-option", endpoint)
    requests.seen.clear()
    r = run(*args)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert "warning" not in r.stderr, r.stderr
    assert [line.split("\t")[:2] for line in r.stdout.splitlines()] == [["d/p0.txt", "d/p1.txt"]]
    # Found edited by its first read (refused), then asked (a HEAD) and read again.
    assert requests.object_reads(bucket).count(f"/{bucket}/c/d/p1.txt") == 2
    monkeypatch.setattr(objects, "list_prefix", listing)
    again = run(*args)  # the identity indexed was the listing's: read again, the same answer
    assert again.exit_code == 0 and again.stdout == r.stdout, again.stderr


def test_a_list_of_objects_asks_each_once(run, s3, tmp_path, own_tmp):
    fs, endpoint, bucket, requests = s3
    _corpus(fs, bucket)
    todo = tmp_path / "todo.txt"
    todo.write_text("".join(f"s3://{bucket}/c/d/p{i}.txt\n" for i in range(8)))
    requests.seen.clear()
    r = run("pairs", "--files-from", todo, "--index", tmp_path / "idx", "-j", "1", "--storage-option", endpoint)
    assert r.exit_code == 0 and "warning" not in r.stderr, r.stderr
    heads = Counter(p for m, p in requests.seen if m == "HEAD")
    assert heads == Counter(f"/{bucket}/c/d/p{i}.txt" for i in range(8))  # the list's HEAD, none to open


def test_a_parquet_object_edited_after_the_listing_is_a_warning_then_read_the_next_night(run, s3, tmp_path, monkeypatch):
    """Read by ranged requests (its footer first): its first read refused is "edited since it was
    listed", a warning as for a file that cannot be read; the next run reads it."""
    import io

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from simdoc.corpus import objects

    fs, endpoint, bucket, _ = s3

    def table(change: int) -> bytes:
        out = io.BytesIO()
        pq.write_table(pa.table({"text": [numbered_page(i % 2, change=i // 2 + change) for i in range(4)]}), out)
        return out.getvalue()

    fs.pipe(f"{bucket}/c/t.parquet", table(0))
    listing = objects.list_prefix

    def edited_after_the_listing(url):
        got = listing(url)
        fs.pipe(f"{bucket}/c/t.parquet", table(5))
        return got

    monkeypatch.setattr(objects, "list_prefix", edited_after_the_listing)
    args = ("pairs", f"s3://{bucket}/c/", "--index", tmp_path / "idx", "-j", "1", "--format", "tsv", "--storage-option", endpoint)
    first = run(*args)
    assert "t.parquet: cannot read: edited since it was listed" in first.stderr, first.stderr
    monkeypatch.setattr(objects, "list_prefix", listing)
    second = run(*args)
    assert second.exit_code == 0 and "warning" not in second.stderr, second.stderr
    assert "t.parquet/#1\tt.parquet/#3" in second.stdout, second.stdout

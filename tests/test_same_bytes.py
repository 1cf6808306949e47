"""A big JSON Lines, WARC or Parquet file whose stat changed but whose bytes did not is not parsed
again: its digest is compared first (simdoc.stages.same_bytes), its rows are kept with its new stat,
and the arrays are those a rebuild makes. One whose bytes changed, its size and time set back, is
read as before."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import numbered_page, warc_record

import simdoc
import simdoc.stages.scan as scan
from simdoc.corpus import jsonl_ranges, warc_spans
from simdoc.stages import same_bytes

pytestmark = pytest.mark.usefixtures("settled")

BUILD = "?" * 16  # a build id
ARRAYS = ("signatures", "bands", "buckets", "docs.digest", "docs.identity", "docs.key", "docs.offset", "docs.n_shingles")


def jsonl(n: int = 60) -> bytes:
    rows = [json.dumps({"text": numbered_page(i % 40, change=i // 40)}) for i in range(n)]
    return ("\n".join(rows) + "\n").encode()


def warc(n: int = 30) -> bytes:
    return b"".join(warc_record(f"http://x.test/{i}", numbered_page(i % 20, change=i // 20), i) for i in range(n))


CORPORA = {
    "big.jsonl": jsonl,
    "big.jsonl.gz": lambda: gzip.compress(jsonl(), mtime=0),
    "crawl.warc": warc,
}


@pytest.fixture
def small_cuts(monkeypatch):
    """Files of 1 KiB or more are big: cut into ranges of 1 KiB, and their digest compared first."""
    monkeypatch.setattr(jsonl_ranges, "RANGE_BYTES", 1 << 10)
    monkeypatch.setattr(warc_spans, "SPAN_BYTES", 1 << 10)
    monkeypatch.setattr(same_bytes, "CHECK_BYTES", 1 << 10)


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The paths of the big files the reading tasks read (run in this process: one job)."""
    seen: list[str] = []
    real_range, real_file = scan.read_range_file, scan.read_file

    def read_range_file(path, *a, **k):
        seen.append(path)
        return real_range(path, *a, **k)

    def read_file(path, *a, **k):
        seen.append(path)
        return real_file(path, *a, **k)

    monkeypatch.setattr(scan, "read_range_file", read_range_file)
    monkeypatch.setattr(scan, "read_file", read_file)
    return seen


def arrays(index: Path) -> dict[str, bytes]:
    return {stem: next(index.glob(f"{stem}.{BUILD}.npy")).read_bytes() for stem in ARRAYS}


def stat_of(index: Path, row: int = 0) -> tuple[int, int]:
    import numpy as np

    return tuple(int(np.load(next(index.glob(f"docs.{c}.{BUILD}.npy")))[row]) for c in ("mtime_ns", "ctime_ns"))


def build(corpus: Path, index: Path):
    return simdoc.find_pairs(corpus, index, jobs=1, threshold=0.5)


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_a_touched_big_file_is_not_parsed_and_its_new_stat_is_kept(tmp_path, small_cuts, parsed, name):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / name).write_bytes(CORPORA[name]())
    first = list(build(corpus, tmp_path / "idx"))
    assert first and parsed  # read, and near-duplicates in it
    before = arrays(tmp_path / "idx")
    st = os.stat(corpus / name)
    os.utime(corpus / name, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # its bytes the same, its stat not
    parsed.clear()
    again = build(corpus, tmp_path / "idx")
    assert parsed == []  # its digest alone was compared
    assert list(again) == first and arrays(tmp_path / "idx") == before
    now = os.stat(corpus / name)
    assert stat_of(tmp_path / "idx") == (now.st_mtime_ns, now.st_ctime_ns)
    shingle = next(s for s in again.stages if s.stage == "shingle")
    assert "read 1 file, 0 new or changed" in shingle.detail, shingle.detail
    third = build(corpus, tmp_path / "idx")  # its stat recorded: nothing read, not even for its digest
    assert parsed == [] and next(s for s in third.stages if s.stage == "shingle").detail == "up to date"
    build(corpus, tmp_path / "fresh")
    assert arrays(tmp_path / "fresh") == before


@pytest.mark.parametrize("name", ["big.jsonl", "crawl.warc"])
def test_a_big_file_edited_with_its_size_and_time_set_back_is_read_again(tmp_path, small_cuts, parsed, name):
    corpus = tmp_path / "c"
    corpus.mkdir()
    path = corpus / name
    path.write_bytes(CORPORA[name]())
    build(corpus, tmp_path / "idx")
    st = os.stat(path)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"w1", b"z1"))  # the same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # its ctime is now's: read again, its digest differs
    assert os.stat(path).st_size == st.st_size and raw != path.read_bytes()
    parsed.clear()
    got = list(build(corpus, tmp_path / "idx"))
    assert parsed and set(parsed) == {str(path)}
    fresh = list(build(corpus, tmp_path / "fresh"))
    assert got == fresh and arrays(tmp_path / "idx") == arrays(tmp_path / "fresh")


def test_a_racily_clean_big_file_is_rechecked_by_its_digest_alone(tmp_path, small_cuts, parsed, monkeypatch):
    """A run that finds every file as listed before reads its racily clean files again
    (simdoc.stages.recheck): a big one by its digest alone."""
    import simdoc.stages.racy

    monkeypatch.setattr(simdoc.stages.racy, "RACY_NS", 10**12)  # every file racily clean when listed
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "big.jsonl").write_bytes(jsonl())
    build(corpus, tmp_path / "idx")
    before = arrays(tmp_path / "idx")
    parsed.clear()
    again = build(corpus, tmp_path / "idx")
    assert parsed == [] and arrays(tmp_path / "idx") == before
    assert next(s for s in again.stages if s.stage == "shingle").detail == "up to date (1 racily clean files re-read)"


def test_two_touched_big_files_are_checked_on_two_jobs_and_kept(tmp_path, small_cuts):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, make in CORPORA.items():
        (corpus / name).write_bytes(make())
    first = list(simdoc.find_pairs(corpus, tmp_path / "idx", jobs=2, threshold=0.5))
    before = arrays(tmp_path / "idx")
    for name in ("big.jsonl", "crawl.warc"):
        st = os.stat(corpus / name)
        os.utime(corpus / name, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = simdoc.find_pairs(corpus, tmp_path / "idx", jobs=2, threshold=0.5)
    assert list(again) == first and arrays(tmp_path / "idx") == before
    assert "read 2 files, 0 new or changed" in next(s for s in again.stages if s.stage == "shingle").detail


@pytest.mark.parametrize("max_bytes", [None, 3000])
@pytest.mark.parametrize("name", ["big.txt.gz", "big.txt"])
def test_a_touched_streamed_file_is_not_shingled_again(tmp_path, small_cuts, monkeypatch, name, max_bytes):
    # A compressed file, or a text over STREAM_BYTES, is shingled as it is read: its digest known at
    # the end only. Its digest is compared first now.
    from simdoc.corpus import streaming

    monkeypatch.setattr(streaming, "STREAM_BYTES", 1 << 10)
    streamed: list[str] = []
    real = streaming.stream_document
    monkeypatch.setattr(streaming, "stream_document", lambda path, *a, **k: streamed.append(path) or real(path, *a, **k))
    text = "\n".join(numbered_page(i) for i in range(40)).encode()
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / name).write_bytes(gzip.compress(text, mtime=0) if name.endswith(".gz") else text)
    (corpus / "copy.txt").write_bytes(text[:1000])  # a plain file, read whole
    first = list(simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1, threshold=0.5, max_bytes=max_bytes))
    assert set(streamed) == {str(corpus / name)}
    before = arrays(tmp_path / "idx")
    st = os.stat(corpus / name)
    os.utime(corpus / name, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    streamed.clear()
    again = simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1, threshold=0.5, max_bytes=max_bytes)
    assert streamed == [] and list(again) == first and arrays(tmp_path / "idx") == before
    assert "read 1 file, 0 new or changed" in next(s for s in again.stages if s.stage == "shingle").detail

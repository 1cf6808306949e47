"""Shingle counts are stored as uint8 plus an overflow table; every reader sees the true counts."""

import json

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.pipeline import open_index
from simdoc.shingling import ShingleSets, Workspace, compact_counts, shingle_texts
from simdoc.similarity import pair_jaccard


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.integers(1, 600), max_size=6), min_size=1, max_size=8),
    st.data(),
)
def test_compact_counts_read_back_exactly(rows, data):
    counts = np.array([c for r in rows for c in r], dtype=np.uint32)
    indptr = np.cumsum([0] + [len(r) for r in rows])
    hashes = np.arange(len(counts), dtype=np.uint32)
    full = ShingleSets(indptr, hashes, counts)
    small, overflow = compact_counts(counts)
    assert small.dtype == np.uint8 and np.all(small == np.minimum(counts, 255))
    scratch = Workspace()
    for first in (0, 7):  # a reused buffer gives the same answer, call after call
        again, again_overflow = compact_counts(counts, first, scratch)
        assert np.array_equal(again, small) and np.array_equal(again_overflow, overflow + [first, 0])
    compact = ShingleSets(indptr, hashes, small, overflow)
    for i in range(len(rows)):
        assert np.array_equal(compact.row_counts(i), full.row_counts(i))
    take = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=10))
    got, want = compact.take(np.array(take, dtype=np.int64)), full.take(np.array(take, dtype=np.int64))
    assert np.array_equal(got.counts, want.counts) and np.array_equal(got.indptr, want.indptr)
    a = data.draw(st.integers(0, len(rows)))
    b = data.draw(st.integers(a, len(rows)))
    part = compact.slice(a, b)
    assert all(np.array_equal(part.row_counts(i), full.row_counts(a + i)) for i in range(b - a))
    both = ShingleSets.concatenate([compact.slice(0, a), compact.slice(a, len(rows))])
    assert np.array_equal(both.counts, counts)


def _docs(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    # "ab" repeated: the shingles "ababa" and "babab" occur ~500 times each, past uint8.
    (corpus / "rep1.txt").write_text("ab" * 1000 + " tail one", encoding="utf-8")
    (corpus / "rep2.txt").write_text("ab" * 700 + " tail two", encoding="utf-8")
    (corpus / "other.txt").write_text("a different document about harbours and lanterns", encoding="utf-8")
    return corpus


def test_counts_past_255_survive_the_index(tmp_path):
    corpus = _docs(tmp_path)
    idx = tmp_path / "idx"
    res = simdoc.find_pairs(corpus, idx, threshold=0.1, measure="bag", jobs=1)
    sets = open_index(idx).shingle_sets()
    assert sets.counts.dtype == np.uint8 and len(sets.overflow) == 4
    texts = [(corpus / n).read_text(encoding="utf-8") for n in ("other.txt", "rep1.txt", "rep2.txt")]
    ref = shingle_texts(texts)
    for i in range(3):
        assert np.array_equal(sets.row(i), ref.row(i))
        assert np.array_equal(sets.row_counts(i), ref.row_counts(i))
    assert ref.row_counts(1).max() == 998  # "ababa" at every even offset of 2000 characters
    want = pair_jaccard(ref, np.array([1]), np.array([2]), "bag")[0]
    (pair,) = [p for p in res if {p.doc_a, p.doc_b} == {"rep1.txt", "rep2.txt"}]
    assert abs(pair.jaccard - want) < 1e-12 and want < 0.5


def test_an_index_with_uint32_counts_is_still_read_and_updated(tmp_path):
    corpus = _docs(tmp_path)
    idx = tmp_path / "idx"
    before = list(simdoc.find_pairs(corpus, idx, threshold=0.1, measure="bag", jobs=1))
    # Rewrite the index as the format-1 layout: uint32 counts, no overflow table.
    manifest = json.loads((idx / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    sets = open_index(idx).shingle_sets()
    full = np.concatenate([sets.row_counts(i) for i in range(len(sets))]).astype(np.uint32)
    name = shingle["roles"]["counts"]
    np.save(idx / name, full)
    shingle["files"][name] = {"dtype": "<u4", "shape": [len(full)], "bytes": (idx / name).stat().st_size}
    del shingle["files"][shingle["roles"].pop("overflow")]
    manifest["format_version"] = 1
    del manifest["checksum"]  # written before manifests had one
    (idx / "manifest.json").write_text(json.dumps(manifest))
    assert open_index(idx).shingle_sets().counts.dtype == np.uint32
    assert list(simdoc.find_pairs(corpus, idx, threshold=0.1, measure="bag", jobs=1)) == before
    # An update copies the old rows into the new layout.
    (corpus / "new.txt").write_text("a new document about lanterns", encoding="utf-8")
    after = simdoc.find_pairs(corpus, idx, threshold=0.1, measure="bag", jobs=1)
    full_build = simdoc.find_pairs(corpus, tmp_path / "fresh", threshold=0.1, measure="bag", jobs=1)
    assert list(after) == list(full_build)
    assert open_index(idx).shingle_sets().counts.dtype == np.uint8
    assert json.loads((idx / "manifest.json").read_text())["format_version"] == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 600), st.sampled_from([0, 1, 2, 5, 8, 70, 300])), max_size=12))
@example([(0, 5), (5, 3), (8, 0), (8, 2), (3, 4)])  # ranges that continue one another are read at once
@example([(10, 300)])  # one long range of an array in memory is sliced, short ones gathered
def test_read_ranges_from_a_file_equals_slicing(tmp_path_factory, spans):
    from simdoc.memory import read_ranges

    path = tmp_path_factory.mktemp("rr") / "a.npy"
    np.save(path, np.arange(640, dtype=np.uint32) * 7)
    mapped = np.load(path, mmap_mode="r")
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    stops = np.minimum(starts + np.array([n for _, n in spans], dtype=np.int64), 640)
    want = np.concatenate([np.asarray(mapped[a:b]) for a, b in zip(starts, stops)] + [np.zeros(0, np.uint32)])
    assert np.array_equal(read_ranges(mapped, starts, stops), want)
    assert np.array_equal(read_ranges(np.array(mapped), starts, stops), want)


def test_check_verifies_the_overflow_table(tmp_path):
    from simdoc.check import check_index
    from simdoc.manifest import dump
    from simdoc.store import _npy_offset, crc32_file

    corpus = _docs(tmp_path)
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx, threshold=0.1, jobs=1)
    facts, problems = check_index(idx)
    assert problems == []
    # Point an overflow entry at a shingle whose stored count is not 255; keep the file's
    # size and checksum consistent so that only the meaning is wrong.
    manifest = json.loads((idx / "manifest.json").read_text())
    shingle = manifest["stages"]["shingle"]
    name = shingle["roles"]["overflow"]
    table = np.load(idx / name)
    table[0, 0] = 0
    np.save(idx / name, table)
    path = idx / name
    shingle["files"][name].update(bytes=path.stat().st_size, crc32=crc32_file(path, _npy_offset(path)))
    (idx / "manifest.json").write_bytes(dump(manifest))
    facts, problems = check_index(idx)
    assert any("overflow table" in p for p in problems), problems


def test_read_ranges_on_reader_threads_equals_slicing(tmp_path, monkeypatch):
    import simdoc.memory as memory

    path = tmp_path / "big.npy"
    np.save(path, np.arange(200_000, dtype=np.uint32) * 3)
    mapped = np.load(path, mmap_mode="r")
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(0, 199_000, 900))
    stops = starts + rng.integers(0, 900, 900)
    starts[5], stops[5] = stops[4], stops[4] + 3  # one range continuing the one before
    want = np.concatenate([np.asarray(mapped[a:b]) for a, b in zip(starts, stops)])
    for per_thread in (1, 16, 10_000):  # 8 groups of reads, fewer, one
        monkeypatch.setattr(memory, "_READS_PER_THREAD", per_thread)
        assert np.array_equal(memory.read_ranges(mapped, starts, stops), want)

"""The local engine's band keys and buckets are written as they are made, never held whole (issue 29)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from simdoc.buckets import bucket_order, bucket_sizes
from simdoc.engines.local import LocalEngine
from simdoc.lsh import band_keys
from simdoc.params import BandingParams, ShingleParams, SignatureParams
from simdoc.stages import banding
from simdoc.stages.index import add_index_stage
from simdoc.stages.shingle import build_shingles
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index


def _signed(tmp_path, n: int, copies: int = 0):
    corpus = tmp_path / "c"
    corpus.mkdir()
    lines = [f'{{"text": "w{i % 997} r{i // 3} tide harbour"}}\n' for i in range(n)] + ['{"text": "w1 r0 tide harbour"}\n'] * copies
    (corpus / "s.jsonl").write_text("".join(lines) + '{"text": ""}\n')  # an empty document: never banded
    build_shingles(corpus, tmp_path / "idx", ShingleParams(), signature=SignatureParams(32).resolved(), engine=LocalEngine(1))
    return open_index(tmp_path / "idx")


def test_keys_and_buckets_written_by_blocks_are_those_made_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(banding, "BANDING_BLOCK_ROWS", 7)
    loaded = _signed(tmp_path, 100, copies=5)
    for threads in (1, 3):
        added = add_index_stage(loaded, BandingParams(bands=8, rows=4), engine=LocalEngine(threads))
        assert added is not None
        keys, buckets = loaded.bands()
        stage = loaded.manifest["stages"]["index"]
        docs = loaded.docs()
        banded = (np.asarray(docs.n_shingles) > 0) & (loaded.representatives() == np.arange(len(docs)))
        assert 0 < banded.sum() < len(docs)
        want_keys = band_keys(np.asarray(loaded.signatures()), 8, 4)
        pairs = np.zeros(8, np.int64)
        want_buckets = bucket_order(want_keys, banded, 1, pairs)
        assert keys.tobytes() == want_keys.tobytes() and buckets.tobytes() == want_buckets.tobytes()
        assert keys.shape == want_keys.shape and buckets.shape == want_buckets.shape
        assert stage["bucket_pairs"] == pairs.tolist()
        sizes = [bucket_sizes(want_keys[t][want_buckets[t]]) for t in range(8)]
        assert (stage["largest_bucket"], stage["large_buckets"]) == ([s[1] for s in sizes], [s[2] for s in sizes])
        assert stage["banded"] == banded.sum() and max(stage["largest_bucket"]) >= 2
        loaded.store.verify_crc(stage["roles"]["bands"], stage["files"][stage["roles"]["bands"]], 128, force=True)
        loaded.store.verify_crc(stage["roles"]["buckets"], stage["files"][stage["roles"]["buckets"]], 128, force=True)
        del loaded.manifest["stages"]["index"]


def test_banding_holds_a_few_bands_not_all_of_them(tmp_path, monkeypatch):
    monkeypatch.setattr(banding, "BANDING_BLOCK_ROWS", 1024)
    n = 30000
    loaded = _signed(tmp_path, n)
    add_index_stage(loaded, BandingParams(bands=16, rows=2), engine=LocalEngine(1))  # compiled and warmed
    del loaded.manifest["stages"]["index"]
    tracemalloc.start()
    try:
        add_index_stage(loaded, BandingParams(bands=16, rows=2), engine=LocalEngine(1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The keys and buckets whole were 16 x 2 x 8 = 256 bytes a document (and the sorts' on top);
    # now one band's sort, and the groups of exact copies, at most ~100.
    assert peak < 150 * n, peak / n


def _all_banded(tmp_path, n: int):
    corpus = tmp_path / "all"
    corpus.mkdir()
    (corpus / "s.jsonl").write_text("".join(f'{{"text": "w{i % 997} r{i // 3} tide harbour w{i}"}}\n' for i in range(n)))
    build_shingles(corpus, tmp_path / "all.idx", ShingleParams(), signature=SignatureParams(32).resolved(), engine=LocalEngine(1))
    return open_index(tmp_path / "all.idx")


def test_every_document_banded_its_buckets_are_the_sorts_order_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(banding, "BANDING_BLOCK_ROWS", 7)
    loaded = _all_banded(tmp_path, 200)
    for threads in (1, 2):
        add_index_stage(loaded, BandingParams(bands=16, rows=2), engine=LocalEngine(threads))
        keys, buckets = loaded.bands()
        assert (loaded.representatives() == np.arange(len(loaded.docs()))).all()
        want_keys = band_keys(np.asarray(loaded.signatures()), 16, 2)
        pairs = np.zeros(16, np.int64)
        want_buckets = bucket_order(want_keys, np.ones(len(want_keys[0]), bool), 1, pairs)
        assert buckets.tobytes() == want_buckets.tobytes() and buckets.shape == want_buckets.shape
        assert loaded.manifest["stages"]["index"]["bucket_pairs"] == pairs.tolist() and pairs.sum() > 0
        del loaded.manifest["stages"]["index"]


def test_a_bands_sort_holds_its_keys_and_order_only(tmp_path, monkeypatch):
    monkeypatch.setattr(banding, "BANDING_BLOCK_ROWS", 1024)  # the keys made a small block at a time
    n, bands = 1 << 18, 2
    signatures = np.random.default_rng(1).integers(0, 2**32, size=(n, 2 * bands), dtype=np.uint32)
    signatures[:1000] = 7  # one bucket of 1,000 in each band; the other buckets hold one document, as most do
    store, warm = IndexStore(tmp_path / "idx"), IndexStore(tmp_path / "warm")
    store.ensure_dir()
    warm.ensure_dir()
    names = {"bands": "bands.0123456789abcdef.npy", "buckets": "buckets.0123456789abcdef.npy"}
    banding.band_here(warm, signatures[:100], bands, 2, np.ones(100, bool), names, 1)  # compiled and warmed
    tracemalloc.start()
    try:
        _, sizes = banding.band_here(store, signatures, bands, 2, np.ones(n, bool), names, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    keys = band_keys(signatures, bands, 2)
    want = np.zeros(bands, np.int64)
    assert np.load(tmp_path / "idx" / names["buckets"]).tobytes() == bucket_order(keys, np.ones(n, bool), 1, want).tobytes()
    assert sizes[:, 0].tolist() == want.tolist() and sizes[:, 1].tolist() == [1000] * bands
    # A band's keys (8 bytes a document), their order (8) and the sort's buffer: ~27; with the
    # keys copied in bucket order, the documents and their copy in that order, and arrays a
    # position to count the band's pairs, ~65.
    assert peak < 40 * n, peak / n

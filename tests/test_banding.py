"""The local engine's band keys and buckets are written as they are made, never held whole (issue 29)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from simdoc.engines.local import LocalEngine
from simdoc.lsh import band_keys, bucket_order
from simdoc.params import BandingParams, ShingleParams, SignatureParams
from simdoc.stages import banding
from simdoc.stages.index import add_index_stage
from simdoc.stages.shingle import build_shingles
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

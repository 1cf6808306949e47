"""Banding and the filled-bins count read a memory-mapped signature matrix a block of rows at a
time, letting its pages go after each (issue 29): the same numbers as in one go."""

import numpy as np
import pytest

from simdoc import lsh
from simdoc.stages import results


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
def test_band_keys_by_blocks_equal_one_block(tmp_path, monkeypatch, block):
    rng = np.random.default_rng(block)
    sigs = rng.integers(0, 2**32, size=(301, 32), dtype=np.uint32)
    whole = lsh.band_keys(sigs, 8, 4)
    np.save(tmp_path / "s.npy", sigs)
    mapped = np.load(tmp_path / "s.npy", mmap_mode="r")
    monkeypatch.setattr(lsh, "BAND_BLOCK_ROWS", block)
    assert np.array_equal(lsh.band_keys(mapped, 8, 4), whole)


@pytest.mark.parametrize("block", [1, 5, 1 << 13])
def test_filled_bins_by_blocks(tmp_path, monkeypatch, block):
    rng = np.random.default_rng(block)
    sigs = rng.integers(0, 40, size=(200, 16), dtype=np.uint32)
    docs = np.unique(rng.integers(0, 200, size=90))
    rows = np.sort(sigs[docs], axis=1)
    expected = 1 + np.count_nonzero(rows[:, 1:] != rows[:, :-1], axis=1)
    np.save(tmp_path / "s.npy", sigs)
    monkeypatch.setattr(results, "FILLED_BINS_ROWS", block)
    assert np.array_equal(results.filled_bins(np.load(tmp_path / "s.npy", mmap_mode="r"), docs), expected)

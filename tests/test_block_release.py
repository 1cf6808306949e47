"""Banding and the filled-bins count read a memory-mapped signature matrix a block of rows at a
time, letting its pages go after each (issue 29): the same numbers as in one go."""

import numpy as np
import pytest

from simdoc import lsh
from simdoc.buckets import iter_candidates
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


def _rss_file_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("RssFile:"))


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="RssFile is Linux's")
def test_candidates_let_the_pages_of_mapped_keys_and_buckets_go(tmp_path):
    """Iterating the candidates reads every band's keys and buckets; mapped, they stayed resident
    (2 GB at 10^7 documents and 13 bands). Now a band's pages go when the next is read."""
    n, bands = 1 << 20, 4
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**63, size=(bands, n), dtype=np.uint64)
    keys[:, :10] = 7  # one bucket of 10 in every band: 45 pairs, found in band 0
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "b.npy", np.argsort(keys, axis=1, kind="stable"))
    del keys
    mapped_keys, mapped_buckets = np.load(tmp_path / "k.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r")
    before = _rss_file_kb()
    pairs = sum(len(left) for left, _ in iter_candidates(mapped_keys, mapped_buckets))
    grown = _rss_file_kb() - before
    assert pairs == 45
    assert grown < 16 << 10, grown  # kB: the 64 MB mapped are not all resident


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("at_once", [7, 1 << 16])
def test_estimates_let_the_pages_of_a_large_mapped_matrix_go_often(tmp_path, monkeypatch, whole, at_once):
    """A matrix of at most MAP_WHOLE_BYTES is estimated a batch at a time (its pages let go once a
    batch: mapping it whole costs at most that); a larger one's rows are read in row order, the
    distinct rows of a block of pairs (ESTIMATE_BYTES of rows) at a time, its pages let go every
    RELEASE_ROWS rows. The same estimates either way."""
    from simdoc import similarity

    rng = np.random.default_rng(4)
    sigs = rng.integers(0, 4, size=(300, 16), dtype=np.uint32)
    left, right = rng.integers(0, 300, size=1000), rng.integers(0, 300, size=1000)
    np.save(tmp_path / "s.npy", sigs)
    mapped = np.load(tmp_path / "s.npy", mmap_mode="r")
    calls, read = [], _rows_read(monkeypatch, sigs.shape)
    monkeypatch.setattr(similarity, "release", lambda *a: calls.append(a))
    monkeypatch.setattr(similarity, "MAP_WHOLE_BYTES", sigs.nbytes if whole else sigs.nbytes - 1)
    monkeypatch.setattr(similarity, "ESTIMATE_BYTES", 2 * at_once * sigs.shape[1] * sigs.itemsize)
    monkeypatch.setattr(similarity, "RELEASE_ROWS", 16)
    monkeypatch.setattr(similarity, "RELEASE_BYTES", sigs.nbytes)  # one window: cut by RELEASE_ROWS alone
    got = similarity.pair_estimates(mapped, left, right)
    assert np.array_equal(got, (sigs[left] == sigs[right]).mean(axis=1))
    if whole:
        assert len(calls) == 1
        return
    blocks = [np.unique(np.concatenate([left[a : a + at_once], right[a : a + at_once]])) for a in range(0, 1000, at_once)]
    mapped_calls = [c for c in calls if c[0] is mapped]
    assert len(mapped_calls) == sum(-(-len(b) // 16) for b in blocks)  # the copies' batches: nothing mapped
    # Each row read once a block, in row order, 16 at a time.
    assert [r.tolist() for r in read] == [b[a : a + 16].tolist() for b in blocks for a in range(0, len(b), 16)]


@pytest.mark.parametrize("num_perm", [1, 16, 128, 512, 1 << 20])
def test_a_block_of_estimates_copies_at_most_its_bytes_of_rows(num_perm):
    """However long a row, a block's two rows a pair stay within ESTIMATE_BYTES (one pair at least):
    512 permutations copied as many pairs as 128 once, and held 4x the memory."""
    from simdoc import similarity

    sigs = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint32), shape=(10, num_perm), strides=(0, 0))
    block = similarity.estimate_block(sigs)
    assert block >= 1
    assert block == 1 or 2 * block * num_perm * 4 <= similarity.ESTIMATE_BYTES
    assert 2 * (block + 1) * num_perm * 4 > similarity.ESTIMATE_BYTES


@pytest.mark.parametrize("window_rows", [1, 3, 10, 64])
def test_estimates_let_the_pages_go_once_the_rows_read_span_release_bytes(tmp_path, monkeypatch, window_rows):
    """Rows read in row order are let go (the mapping's pages dropped) at each RELEASE_BYTES
    window of the matrix they leave, not only every RELEASE_ROWS rows: rows far apart in a large
    matrix would otherwise map all that lies between them. The same estimates."""
    from simdoc import similarity

    rng = np.random.default_rng(7)
    sigs = rng.integers(0, 4, size=(500, 16), dtype=np.uint32)
    left, right = rng.integers(0, 500, size=300), rng.integers(0, 500, size=300)
    np.save(tmp_path / "s.npy", sigs)
    mapped = np.load(tmp_path / "s.npy", mmap_mode="r")
    read = _rows_read(monkeypatch, sigs.shape)
    monkeypatch.setattr(similarity, "MAP_WHOLE_BYTES", sigs.nbytes - 1)
    monkeypatch.setattr(similarity, "RELEASE_ROWS", 40)
    monkeypatch.setattr(similarity, "RELEASE_BYTES", window_rows * sigs.shape[1] * sigs.itemsize)
    got = similarity.pair_estimates(mapped, left, right)
    assert np.array_equal(got, (sigs[left] == sigs[right]).mean(axis=1))
    needed = np.unique(np.concatenate([left, right]))
    assert np.array_equal(np.concatenate(read), needed)  # each row once, in row order
    for r in read:
        assert len(r) <= 40 and r[0] // window_rows == r[-1] // window_rows


def _rows_read(monkeypatch, shape: tuple[int, ...]) -> list[np.ndarray]:
    """The row numbers each read of a mapped matrix of ``shape`` by an index array asked for, in order."""
    read: list[np.ndarray] = []
    real_getitem = np.memmap.__getitem__

    def getitem(self, index):
        if isinstance(index, np.ndarray) and self.shape == shape:
            read.append(index.copy())
        return real_getitem(self, index)

    monkeypatch.setattr(np.memmap, "__getitem__", getitem)
    return read

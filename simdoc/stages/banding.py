"""The band keys and buckets of the local engine, written to their files as they are made (issue 29).

:func:`band_here` bands the signature matrix a block of rows at a time
(:func:`simdoc.lsh.band_keys`), each band's keys of the block written in
place into the keys file (:class:`simdoc.store.npyfiles.PieceWriter`: its
CRC-32 joined from the pieces'); then it sorts one band per thread at a
time from that file (memory-mapped, its pages let go after each band) and
appends each band's bucket order to the buckets file. The arrays are those
:func:`simdoc.lsh.bucket_order` gives, byte for byte; but this process holds
a block of keys and a few bands' sorts, never the (bands, n) keys and
buckets whole (at 10^7 documents and 13 bands, 1 GB each).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from simdoc.lsh import band_keys, bucket_pairs, stable_order
from simdoc.memory import release
from simdoc.store.directory import IndexStore
from simdoc.store.npyfiles import PieceWriter, npy_offset

BANDING_BLOCK_ROWS = 1 << 18  # signature rows banded at once (13 bands: 27 MB of keys)


def band_here(
    store: IndexStore, signatures: np.ndarray, bands: int, rows: int, banded: np.ndarray, names: dict[str, str], threads: int,
) -> tuple[dict[str, dict], np.ndarray]:
    """Write the keys (``names["bands"]``) and the buckets (``names["buckets"]``) of the
    documents ``banded``; their manifest entries, and the pairs in each band's buckets."""
    n = signatures.shape[0]
    keys = PieceWriter(store.path, names["bands"], np.uint64, (bands, n))
    buckets = store.array_writer(names["buckets"], np.int64, (int(np.count_nonzero(banded)),))
    try:
        for a in range(0, n, BANDING_BLOCK_ROWS):
            b = min(a + BANDING_BLOCK_ROWS, n)
            block = band_keys(np.asarray(signatures[a:b]), bands, rows)
            release(signatures)
            for t in range(bands):
                keys.write(t * n + a, block[t])
        pairs = _sort_bands(keys, bands, n, banded, buckets, threads)
        files = {names["bands"]: keys.finish(), names["buckets"]: buckets.finish()}
    except BaseException:
        keys.abort()
        buckets.abort()
        raise
    return files, pairs


def _sort_bands(keys: PieceWriter, bands: int, n: int, banded: np.ndarray, out, threads: int) -> np.ndarray:
    """Each band's banded documents in key order (stable), appended to ``out`` in band order."""
    # Every document banded (the usual case): its bucket order is the sort's order itself, and no
    # (n,) array of documents is held beside it (each is 80 MB at 10^7 documents, per thread).
    docs = None if banded.all() else np.flatnonzero(banded)
    pairs = np.zeros(bands, np.int64)
    if not n or not bands:
        for _ in range(bands):
            out.append(np.zeros((1, n if docs is None else len(docs)), np.int64))
        return pairs
    mapped = np.memmap(keys.tmp, dtype=np.uint64, mode="r", offset=npy_offset(0, 8), shape=(bands, n))

    def sort_band(t: int) -> np.ndarray:
        order, ordered = stable_order(np.asarray(mapped[t]) if docs is None else mapped[t, docs])
        pairs[t] = bucket_pairs(ordered)
        del ordered
        return order if docs is None else docs[order]

    step = max(1, threads)
    with ThreadPoolExecutor(step) as pool:
        for a in range(0, bands, step):
            for order in pool.map(sort_band, range(a, min(a + step, bands))):
                out.append(order.reshape(1, -1))
            release(mapped)
    return pairs

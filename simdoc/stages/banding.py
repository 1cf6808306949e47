"""The band keys and buckets of the local engine, written to their files as they are made (issue 29).

:func:`band_here` bands the signature matrix a block of rows at a time
(:func:`simdoc.lsh.band_keys`), each band's keys of the block written in
place into the keys file (:class:`simdoc.store.npyfiles.PieceWriter`: its
CRC-32 joined from the pieces'); then it sorts one band per thread at a
time from that file (memory-mapped, its pages let go after each band) and
appends each band's bucket order to the buckets file. The arrays are those
:func:`simdoc.buckets.bucket_order` gives, byte for byte; but this process holds
a block of keys and a few bands' sorts, never the (bands, n) keys and
buckets whole (at 10^7 documents and 13 bands, 1 GB each).

An update that kept most rows (a nightly one) does not sort again:
:func:`band_kept` copies the kept rows' keys from the last build's and merges
its buckets, renumbered, with the rows banded anew (the same arrays, byte for
byte).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from simdoc.buckets import bucket_sizes
from simdoc.lsh import band_keys, stable_order
from simdoc.memory import release
from simdoc.store.directory import IndexStore
from simdoc.store.npyfiles import PieceWriter, npy_offset

BANDING_BLOCK_ROWS = 1 << 18  # signature rows banded at once (13 bands: 27 MB of keys)
TIES_AT_ONCE = 1 << 16  # a merge's old rows of keys shared with new rows, compared at once (beyond 4 a row)


def band_here(
    store: IndexStore, signatures: np.ndarray, bands: int, rows: int, banded: np.ndarray, names: dict[str, str], threads: int,
) -> tuple[dict[str, dict], np.ndarray]:
    """Write the keys (``names["bands"]``) and the buckets (``names["buckets"]``) of the
    documents ``banded``; their manifest entries, and each band's :func:`~simdoc.buckets.bucket_sizes`
    (a (bands, 3) array: the pairs in its buckets, the largest, the large ones)."""
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
        sizes = _sort_bands(keys, bands, n, banded, buckets, threads)
        files = {names["bands"]: keys.finish(), names["buckets"]: buckets.finish()}
    except BaseException:
        keys.abort()
        buckets.abort()
        raise
    return files, sizes


def _sort_bands(keys: PieceWriter, bands: int, n: int, banded: np.ndarray, out, threads: int) -> np.ndarray:
    """Each band's banded documents in key order (stable), appended to ``out`` in band order."""
    # Every document banded (the usual case): its bucket order is the sort's order itself, and no
    # (n,) array of documents is held beside it (each is 80 MB at 10^7 documents, per thread).
    docs = None if banded.all() else np.flatnonzero(banded)
    sizes = np.zeros((bands, 3), np.int64)
    if not n or not bands:
        for _ in range(bands):
            out.append(np.zeros((1, n if docs is None else len(docs)), np.int64))
        return sizes
    mapped = np.memmap(keys.tmp, dtype=np.uint64, mode="r", offset=npy_offset(0, 8), shape=(bands, n))

    def sort_band(t: int) -> np.ndarray:
        order, ordered = stable_order(np.asarray(mapped[t]) if docs is None else mapped[t, docs])
        sizes[t] = bucket_sizes(ordered)
        del ordered
        return order if docs is None else docs[order]

    step = max(1, threads)
    with ThreadPoolExecutor(step) as pool:
        for a in range(0, bands, step):
            for order in pool.map(sort_band, range(a, min(a + step, bands))):
                out.append(order.reshape(1, -1))
            release(mapped)
    return sizes


def band_kept(
    store: IndexStore, signatures: np.ndarray, bands: int, rows: int, banded: np.ndarray, names: dict[str, str],
    old_keys: np.ndarray, old_buckets: np.ndarray, old_of_new: np.ndarray,
) -> tuple[dict[str, dict], np.ndarray]:
    """What :func:`band_here` writes, for a build that kept rows of the last one (``old_of_new``: each
    row's row there, -1 for a row signed anew), from that build's keys and buckets of the same
    banding: a kept row's keys are copied, and each band's buckets are the old ones (rows kept and
    still banded, renumbered) merged with the rows banded anew, in the same (key, row) order.

    The rows kept must be in the old order (rows are in corpus order; checked by the caller: see
    :func:`can_merge`). A nightly update sorted 13 bands of 10^5 keys again; now it sorts its new rows'.
    """
    n = signatures.shape[0]
    kept = old_of_new >= 0
    fresh = np.flatnonzero(~kept)
    new_keys = band_keys(np.asarray(signatures[fresh]), bands, rows) if len(fresh) else np.zeros((bands, 0), np.uint64)
    # The old rows' rows now, if still banded (-1: gone, or no longer a representative).
    new_of_old = np.full(old_keys.shape[1], -1, dtype=np.int64)
    new_of_old[old_of_new[kept]] = np.flatnonzero(kept)
    new_of_old[new_of_old >= 0] = np.where(banded[new_of_old[new_of_old >= 0]], new_of_old[new_of_old >= 0], -1)
    was_banded = np.zeros(old_keys.shape[1], dtype=bool)
    if bands:
        was_banded[np.asarray(old_buckets[0])] = True
    # Rows banded now that are not in the old buckets: signed anew, or banded only now.
    still = np.zeros(n, dtype=bool)
    still[kept] = was_banded[old_of_new[kept]]
    inserted = np.flatnonzero(banded & ~still)
    keys = PieceWriter(store.path, names["bands"], np.uint64, (bands, n))
    buckets = store.array_writer(names["buckets"], np.int64, (int(np.count_nonzero(banded)),))
    sizes = np.zeros((bands, 3), np.int64)
    try:
        for t in range(bands):
            band = np.empty(n, dtype=np.uint64)
            band[kept] = np.asarray(old_keys[t])[old_of_new[kept]]
            band[fresh] = new_keys[t]
            keys.write(t * n, band)
            order, ordered = _merge_band(band, new_of_old[np.asarray(old_buckets[t])], inserted)
            sizes[t] = bucket_sizes(ordered)
            buckets.append(order.reshape(1, -1))
        files = {names["bands"]: keys.finish(), names["buckets"]: buckets.finish()}
    except BaseException:
        keys.abort()
        buckets.abort()
        raise
    return files, sizes


def _merge_band(band: np.ndarray, old_order: np.ndarray, inserted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``old_order`` (in (key, row) order, -1 for rows to leave out) and ``inserted``
    (ascending) in (key, row) order, with their keys: one band's buckets."""
    old_order = old_order[old_order >= 0]
    old_sorted = band[old_order]
    order, ins_keys = stable_order(band[inserted])
    ins = inserted[order]
    at = np.searchsorted(old_sorted, ins_keys, "left")
    end = np.searchsorted(old_sorted, ins_keys, "right")
    # A key shared with old rows: among them by row (they are in row order there): the old rows
    # of each such run counted that come before it, all at once unless the runs are huge.
    tied = np.flatnonzero(end > at)
    lens = end[tied] - at[tied]
    if int(lens.sum()) <= 4 * len(old_order) + TIES_AT_ONCE:
        run = np.repeat(np.arange(len(tied)), lens)
        where = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(at[tied] - (np.cumsum(lens) - lens), lens)
        at[tied] += np.bincount(run, old_order[where] < ins[tied][run], minlength=len(tied)).astype(np.int64)
    else:
        for i in tied.tolist():
            at[i] += int(np.searchsorted(old_order[at[i] : end[i]], ins[i]))
    return np.insert(old_order, at, ins), np.insert(old_sorted, at, ins_keys)


def can_merge(old_of_new: np.ndarray, n_old: int) -> bool:
    """Whether the rows kept are in their old order (each kept once), and most rows were kept:
    merging then costs less than sorting."""
    kept = old_of_new[old_of_new >= 0]
    return 4 * len(kept) >= 3 * len(old_of_new) and len(kept) <= n_old and bool(np.all(kept[1:] > kept[:-1]))

"""The index stage on a Dask cluster: band keys by row range, buckets by key range, written by the workers.

Locally, banding is a few sorts in one process (:mod:`simdoc.stages.index`).
On a cluster the client computes only the groups of exact copies (from the
docs table it holds) and hands the rest to the workers in two rounds of
tasks, sized by data volume; no band key or bucket row passes through it.

1. **Keys**, one :class:`KeysTask` per :data:`KEYS_TASK_BYTES` of
   signature rows: the task reads its rows of the signature matrix, computes
   their band keys (:func:`simdoc.lsh.band_keys`) and writes each band's
   keys in place into the new ``bands`` file
   (:class:`~simdoc.store.npyfiles.PieceWriter`). It also writes a *run*:
   for each band, its documents that are banded (with shingles, and the
   first of their exact copies) sorted by key, ties by document number,
   as two arrays of shape (bands, m) under ``dask-parts/band-<build>/``.
2. **Buckets**, one :class:`BucketsTask` per band and key range, as many
   ranges as :func:`simdoc.stages.dask_pairs.ranges_per_band` asks for
   (64 MiB of bucket rows a task), as datatrove cuts its sorted band files:
   the task finds its range in every run by binary search (memory-mapped:
   a few reads each), merges the slices (a stable sort by key keeps
   document order among equal keys, since runs are in row order), and writes
   the documents in place into the new ``buckets`` file. Where they go is
   the number of smaller keys in the band: the sum of the positions its
   searches found, so no task waits for another.

The files are byte-identical to the local engine's: the same keys, and each
band's documents sorted by key with ties in document order. The client
gets back only each piece's place and CRC-32; the runs are removed at the end.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simdoc.buckets import bucket_sizes
from simdoc.engines import Engine
from simdoc.lsh import band_keys
from simdoc.stages.dask_pairs import key_ranges, ranges_per_band
from simdoc.store.loaded import LoadedIndex
from simdoc.store.names import parts_folder, remove_parts
from simdoc.store.npyfiles import PieceWriter, write_piece

KEYS_TASK_BYTES = 64 << 20  # signature rows one keys task reads: 131,072 rows of 128 permutations


@dataclass(frozen=True)
class KeysTask:
    """Rows [start, stop) of the signature matrix: their band keys, and their run."""

    signatures: str  # the matrix (absolute path)
    groups: str  # first member of each document's group of exact copies (int64 .npy)
    n_shingles: str  # the docs table's n_shingles column: documents without shingles are not banded
    bands: int
    rows: int
    start: int
    stop: int
    keys: str  # the new bands file (bands, n_docs), written in place
    run: str  # where the run goes: <run>.keys.npy and <run>.docs.npy


@dataclass(frozen=True)
class BucketsTask:
    """The documents of band ``band`` whose keys are in [lo, hi), from every run, into the buckets file."""

    runs: tuple[str, ...]
    band: int
    lo: int
    hi: int
    n_banded: int  # documents in each band of the buckets file (its second dimension)
    buckets: str  # the new buckets file (bands, n_banded), written in place


def band_rows(task: KeysTask) -> tuple[list[tuple[int, int, int]], int]:
    """Band keys and run of one range of rows (worker); the keys' pieces and the run's length."""
    sigs = np.load(task.signatures, mmap_mode="r", allow_pickle=False)
    n = len(sigs)
    keys = band_keys(np.asarray(sigs[task.start : task.stop]), task.bands, task.rows)
    pieces = []
    for t in range(task.bands):
        start = t * n + task.start
        pieces.append((start, task.stop - task.start, write_piece(task.keys, start, keys[t])))
    docs = np.arange(task.start, task.stop, dtype=np.int64)
    groups = np.load(task.groups, mmap_mode="r", allow_pickle=False)[task.start : task.stop]
    n_shingles = np.load(task.n_shingles, mmap_mode="r", allow_pickle=False)[task.start : task.stop]
    banded = np.flatnonzero((n_shingles > 0) & (groups == docs))
    run_keys = np.empty((task.bands, len(banded)), np.uint64)
    run_docs = np.empty((task.bands, len(banded)), np.int64)
    for t in range(task.bands):
        order = banded[np.argsort(keys[t, banded], kind="stable")]
        run_keys[t], run_docs[t] = keys[t, order], docs[order]
    _save(f"{task.run}.keys.npy", run_keys)
    _save(f"{task.run}.docs.npy", run_docs)
    return pieces, len(banded)


def _save(path: str, arr: np.ndarray) -> None:
    """Save atomically: a task run again after its worker died replaces the file whole."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        np.save(f, arr)
    os.replace(tmp, path)


def bucket_range(task: BucketsTask) -> tuple[tuple[int, int, int], int, tuple[int, int, int]]:
    """One key range of one band, merged from the runs and written in place (worker); its piece
    (first element, elements, CRC-32), its band, and its buckets' :func:`~simdoc.buckets.bucket_sizes`."""
    at, keys, docs = 0, [], []
    for run in task.runs:
        run_keys = np.load(f"{run}.keys.npy", mmap_mode="r", allow_pickle=False)[task.band]
        p0 = int(np.searchsorted(run_keys, np.uint64(task.lo), "left"))
        p1 = len(run_keys) if task.hi >= 1 << 64 else int(np.searchsorted(run_keys, np.uint64(task.hi), "left"))
        at += p0
        if p1 > p0:
            keys.append(np.asarray(run_keys[p0:p1]))
            docs.append(np.asarray(np.load(f"{run}.docs.npy", mmap_mode="r", allow_pickle=False)[task.band, p0:p1]))
    if not docs:
        return (task.band * task.n_banded + at, 0, 0), task.band, (0, 0, 0)
    keys = np.concatenate(keys)
    order = np.argsort(keys, kind="stable")
    merged = np.concatenate(docs)[order]
    start = task.band * task.n_banded + at
    return (start, len(merged), write_piece(task.buckets, start, merged)), task.band, bucket_sizes(keys[order])


def band_on_cluster(
    loaded: LoadedIndex, params: dict, names: dict[str, str], n_banded: int, engine: Engine
) -> tuple[dict, np.ndarray] | None:
    """The bands and buckets files of ``names`` for ``loaded``'s signatures, written by ``engine``'s workers.

    The groups of exact copies are already saved as ``names["groups"]``;
    ``n_banded`` documents are banded (with shingles, first of their group).
    Returns the files' manifest entries, and each band's buckets'
    :func:`simdoc.buckets.bucket_sizes` (a (bands, 3) array); None where no parts folder
    can be had (:func:`simdoc.store.names.parts_folder`): then band here.
    """
    store = loaded.store
    where = store.path.absolute()
    sig_stage, shingle = loaded.stage("signature"), loaded.stage("shingle")
    sigs = where / sig_stage["roles"]["signatures"]
    n, num_perm = sig_stage["files"][sig_stage["roles"]["signatures"]]["shape"]
    bands, rows = params["bands"], params["rows"]
    parts = parts_folder(where)
    if parts is None:
        return None
    for stale in parts.glob("band-*"):  # a killed writer's (this one holds the writer lock)
        remove_parts(stale)
    folder = parts_folder(where, f"band-{names['bands'].split('.')[1]}")
    if folder is None:
        return None
    keys = buckets = None
    try:
        keys = PieceWriter(store.path, names["bands"], np.uint64, (bands, n))
        buckets = PieceWriter(store.path, names["buckets"], np.int64, (bands, n_banded))
        step = max(1, KEYS_TASK_BYTES // (4 * num_perm))
        runs = [str(folder / f"{i:06d}") for i in range(math.ceil(n / step))]
        tasks = (
            KeysTask(
                str(sigs), str(where / names["groups"]), str(where / shingle["roles"]["docs.n_shingles"]), bands, rows,
                a, min(a + step, n), str(keys.tmp.absolute()), run,
            )
            for a, run in zip(range(0, n, step), runs)
        )
        banded = 0
        for pieces, m in engine.map(band_rows, tasks):
            for piece in pieces:
                keys.written(*piece)
            banded += m
        if banded != n_banded:
            raise RuntimeError(f"the keys tasks banded {banded} documents, the docs table says {n_banded}")
        target = str(buckets.tmp.absolute())
        ranges = key_ranges(ranges_per_band(n_banded))
        tasks = (BucketsTask(tuple(runs), t, lo, hi, n_banded, target) for t in range(bands) for lo, hi in ranges)
        sizes = np.zeros((bands, 3), np.int64)
        for piece, band, (pairs, largest, large) in engine.map(bucket_range, tasks):  # (no bucket straddles two ranges)
            buckets.written(*piece)
            sizes[band] += (pairs, 0, large)
            sizes[band, 1] = max(sizes[band, 1], largest)
        return {names["bands"]: keys.finish(), names["buckets"]: buckets.finish()}, sizes
    except BaseException:
        for writer in (keys, buckets):
            if writer is not None:
                writer.abort()
        raise
    finally:
        remove_parts(folder)
        with contextlib.suppress(OSError):
            Path(folder).parent.rmdir()  # unless other parts are in it

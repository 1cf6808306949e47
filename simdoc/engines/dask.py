"""Run simdoc's stages on a Dask cluster: the same functions, the same answers.

* Shingling and signatures: the batches the local engine gives to its
  process pool are Dask tasks instead. Workers read the documents and write
  their shards and signature rows into the index directory, so the index
  must be on a file system every worker sees (a local disk for one host;
  a shared file system for several).
* Candidates: the (band, key, document) triples of all bands are shuffled by
  key with dask.dataframe, so every bucket lands in one partition; each
  partition emits its buckets' pairs, keeps a pair only in the first band
  where its documents share a key (so pairs are unique without a second
  shuffle), expands folded exact copies, and scores and verifies its pairs
  on the worker. Only the pairs that are printed travel back.

The client sorts the pairs exactly as the local engine does, so the output
is byte-identical whatever the number of workers or partitions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterator

import numpy as np

from simdoc.errors import UsageError

ENV = "SIMDOC_SCHEDULER"
_LOCAL = re.compile(r"^local(?:\[(\d+)\])?$")


@contextlib.contextmanager
def connect(address: str):
    """A Dask client for ``address`` (host:port), or ``local[N]``: an in-process LocalCluster of N workers."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask", hint="pip install 'dask[distributed,dataframe]' (or, in simdoc's source folder, pip install '.[dask]')"
        ) from None
    # Dask logs its own bookkeeping (shuffle start/stop) as warnings; stderr is for ours.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    m = _LOCAL.match(address)
    if m:
        n = int(m.group(1) or os.cpu_count() or 1)
        with LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
        ) as cluster:
            with Client(cluster) as client:
                yield client
        return
    try:
        client = Client(address, timeout="5s")
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the Dask scheduler at {address}: {exc}",
            hint="give host:port of a running `dask scheduler` (e.g. tcp://10.0.0.5:8786), or local[N]",
        ) from None
    with client:
        yield client


def map_ordered(client, func: Callable, tasks: list) -> Iterator:
    """Results of func over tasks, computed on the cluster, handed back in task order."""
    futures = client.map(func, tasks, pure=False)
    try:
        for future in futures:
            yield future.result()
    finally:
        client.cancel(futures)


def _band_frame(index: str, band: int):
    import pandas as pd

    from simdoc.pipeline import open_index

    keys, buckets = open_index(index).bands()
    docs = np.asarray(buckets[band])
    return pd.DataFrame({"band": np.full(len(docs), band, np.int32), "key": np.asarray(keys[band])[docs], "doc": docs})


def _score_partition(frame, index: str, threshold: float, measure: str, verify: bool, all_candidates: bool, only_docs):
    """Pairs of the buckets in one partition, first-band rule, expanded, scored, filtered."""
    from simdoc.lsh import pairs_in_runs
    from simdoc.pipeline import open_index
    from simdoc.results import Scoring, _members, score_pairs

    loaded = open_index(index)
    keys, _ = loaded.bands()
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0) if verify else None, 0)
    if len(frame) < 2:
        return empty
    band = frame["band"].to_numpy()
    key = frame["key"].to_numpy()
    doc = frame["doc"].to_numpy()
    order = np.lexsort((doc, key, band))
    band, key, doc = band[order], key[order], doc[order]
    new_group = np.concatenate(([True], (band[1:] != band[:-1]) | (key[1:] != key[:-1])))
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], len(doc))
    after = np.repeat(ends, ends - starts) - np.arange(len(doc)) - 1
    firsts, seconds = pairs_in_runs(after, 0, len(doc))
    if not len(firsts):
        return empty
    a, b = doc[firsts], doc[seconds]
    left, right, found_in = np.minimum(a, b), np.maximum(a, b), band[firsts]
    keep = np.ones(len(firsts), bool)
    for u in range(int(found_in.max())):
        idx = np.flatnonzero(keep & (found_in > u))
        keep[idx] = np.asarray(keys[u])[left[idx]] != np.asarray(keys[u])[right[idx]]
    scored, n_cand = score_pairs(
        loaded, left[keep], right[keep], Scoring(threshold, measure, verify, all_candidates, only_docs),
        _members(loaded.representatives()),
    )
    return (*scored, n_cand)


def score_candidates(client, index: str, threshold: float, measure: str, verify: bool, all_candidates: bool, only_docs, npartitions: int | None = None):
    """The distributed counterpart of :func:`simdoc.pipeline.score_candidates` (same return value)."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from simdoc.lsh import BucketStats
    from simdoc.pipeline import open_index
    from simdoc.results import in_print_order

    loaded = open_index(index)
    loaded.signatures()  # damaged files are an error here, as with the local engine
    if verify:
        loaded.docs()
    n_bands = loaded.stage("index")["params"]["bands"]
    meta = pd.DataFrame({"band": np.zeros(0, np.int32), "key": np.zeros(0, np.uint64), "doc": np.zeros(0, np.int64)})
    frame = dd.from_delayed([dask.delayed(_band_frame)(str(index), t) for t in range(n_bands)], meta=meta)
    n_workers = max(len(client.scheduler_info().get("workers", {})), 1)
    frame = frame.shuffle(on="key", npartitions=npartitions or max(2 * n_workers, 2))
    parts = [
        dask.delayed(_score_partition)(p, str(index), threshold, measure, verify, all_candidates, only_docs)
        for p in frame.to_delayed()
    ]
    results = client.compute(parts, sync=True)
    n_cand = sum(r[4] for r in results)
    left, right, est, jac = in_print_order([r[:4] for r in results], verify)
    return left, right, est, jac, n_cand, BucketStats(n_candidates=n_cand)


# ---------------------------------------------------------------- the index stage as tasks

INDEX_TASK_DOCS = 1 << 17  # documents per task when computing band keys


def _keys_task(task: tuple) -> int:
    """Band keys of documents [a, b) into the shared band-key file."""
    from simdoc.lsh import band_keys
    from simdoc.pipeline import open_index

    index, a, b, path, bands, rows = task
    sigs = open_index(index).signatures()
    out = np.load(path, mmap_mode="r+")
    out[:, a:b] = band_keys(np.asarray(sigs[a:b]), bands, rows)
    out.flush()
    return b - a


def _hash_frame(index: str, a: int, b: int):
    """(signature hash, document) of the documents [a, b) that have shingles."""
    import pandas as pd

    from simdoc.lsh import band_keys
    from simdoc.pipeline import open_index

    loaded = open_index(index)
    sizes = np.diff(np.asarray(loaded.shingle_sets().indptr[a : b + 1]))
    docs = a + np.flatnonzero(sizes > 0)
    sigs = np.asarray(loaded.signatures()[docs])
    h = band_keys(sigs, 1, sigs.shape[1])[0] if len(docs) else np.zeros(0, np.uint64)
    return pd.DataFrame({"h": h, "doc": docs.astype(np.int64)})


def _copies_task(frame, index: str) -> np.ndarray:
    """(document, first equal member) pairs among the documents of a partition with equal signature hashes."""
    from simdoc.exact import copies_among
    from simdoc.pipeline import open_index

    if len(frame) < 2:
        return np.zeros((0, 2), np.int64)
    sets = open_index(index).shingle_sets()
    h, doc = frame["h"].to_numpy(), frame["doc"].to_numpy()
    order = np.lexsort((doc, h))
    h, doc = h[order], doc[order]
    starts = np.flatnonzero(np.concatenate(([True], h[1:] != h[:-1])))
    ends = np.append(starts[1:], len(h))
    out = []
    for s, e in zip(starts[ends - starts > 1], ends[ends - starts > 1]):
        out.extend(copies_among(sets, doc[s:e]))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def _bucket_task(task: tuple) -> int:
    """Row ``band`` of the buckets: eligible documents sorted by that band's key."""
    from simdoc.pipeline import open_index

    index, band, keys_path, rep_path, out_path = task
    loaded = open_index(index)
    keys = np.load(keys_path, mmap_mode="r")[band]
    rep = np.load(rep_path, mmap_mode="r")
    eligible = (np.diff(np.asarray(loaded.shingle_sets().indptr)) > 0) & (np.asarray(rep) == np.arange(len(rep)))
    docs = np.flatnonzero(eligible)
    out = np.load(out_path, mmap_mode="r+")
    out[band] = docs[np.argsort(np.asarray(keys)[docs], kind="stable")]
    out.flush()
    return len(docs)


def build_index_arrays(client, index: str, store, names: dict, bands: int, rows: int, stored_rep: np.ndarray | None) -> dict:
    """Band keys, exact-copy groups and buckets computed by tasks into the index directory.

    No process holds the band keys of the whole corpus: keys are computed per
    document range, copies are found after a shuffle by signature hash, and
    each band's buckets are sorted by one task. Returns the manifest entries
    of the three files, which are byte-identical to the local engine's.
    """
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from simdoc.pipeline import open_index

    loaded = open_index(index)
    n = loaded.stage("shingle")["n_docs"]
    ranges = [(a, min(a + INDEX_TASK_DOCS, n)) for a in range(0, n, INDEX_TASK_DOCS)]
    files = {}
    keys_mm, keys_tmp = store.create_array(names["bands"], np.uint64, (bands, n))
    rep_mm, rep_tmp = store.create_array(names["groups"], np.int64, (n,))
    try:
        list(map_ordered(client, _keys_task, [(index, a, b, str(keys_tmp), bands, rows) for a, b in ranges]))
        keys_mm.flush()
        if stored_rep is not None:
            rep_mm[:] = stored_rep
        else:
            rep_mm[:] = np.arange(n, dtype=np.int64)
            meta = pd.DataFrame({"h": np.zeros(0, np.uint64), "doc": np.zeros(0, np.int64)})
            frame = dd.from_delayed([dask.delayed(_hash_frame)(index, a, b) for a, b in ranges], meta=meta)
            frame = frame.shuffle(on="h", npartitions=max(len(ranges), 2))
            found = client.compute([dask.delayed(_copies_task)(p, index) for p in frame.to_delayed()], sync=True)
            copies = np.concatenate(found) if found else np.zeros((0, 2), np.int64)
            if len(copies):
                rep_mm[copies[:, 0]] = copies[:, 1]
        rep_mm.flush()
        eligible = int(np.count_nonzero((np.diff(np.asarray(loaded.shingle_sets().indptr)) > 0) & (np.asarray(rep_mm) == np.arange(n))))
        buckets_mm, buckets_tmp = store.create_array(names["buckets"], np.int64, (bands, eligible))
        try:
            tasks = [(index, t, str(keys_tmp), str(rep_tmp), str(buckets_tmp)) for t in range(bands)]
            list(map_ordered(client, _bucket_task, tasks))
            files[names["buckets"]] = store.publish(buckets_tmp, names["buckets"], buckets_mm)
        except BaseException:
            buckets_tmp.unlink(missing_ok=True)
            raise
        files[names["bands"]] = store.publish(keys_tmp, names["bands"], keys_mm)
        files[names["groups"]] = store.publish(rep_tmp, names["groups"], rep_mm)
    except BaseException:
        keys_tmp.unlink(missing_ok=True)
        rep_tmp.unlink(missing_ok=True)
        raise
    return files

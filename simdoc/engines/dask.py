"""Run simdoc's stages on a Dask cluster: the same functions, the same answers.

* Reading and signatures: the batches the local engine gives to its
  process pool are Dask tasks instead. Workers read the documents and send
  back their docs-table rows and signature rows; the client writes the
  index. The corpus must be on a file system every worker sees.
* Banding runs on the client (a few sorts of the band keys).
* Candidates: the (band, key, document) triples of all bands are shuffled by
  key with dask.dataframe, so every bucket lands in one partition; each
  partition emits its buckets' pairs, keeps a pair only in the first band
  where its documents share a key (so pairs are unique without a second
  shuffle), expands folded exact copies, and scores its pairs on the
  worker, verifying them against the documents, re-read from the shared
  file system (simdoc.verify). Only the pairs that are printed travel back.

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

    from simdoc.loaded import open_index

    keys, buckets = open_index(index).bands()
    docs = np.asarray(buckets[band])
    return pd.DataFrame({"band": np.full(len(docs), band, np.int32), "key": np.asarray(keys[band])[docs], "doc": docs})


def _score_partition(frame, index: str, threshold: float, measure: str, verify: bool, all_candidates: bool, only_docs):
    """Pairs of the buckets in one partition, first-band rule, expanded, scored, filtered."""
    from simdoc.lsh import pairs_in_runs
    from simdoc.loaded import open_index
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
    from simdoc.loaded import open_index
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

"""Candidates scored on a Dask cluster: the pairs stage's shuffle by band key.

The (band, key, document) triples of all bands are shuffled by key with
dask.dataframe, so every bucket lands in one partition; each partition emits
its buckets' pairs, keeps a pair only in the first band where its documents
share a key (so pairs are unique without a second shuffle), expands folded
exact copies, and scores its pairs on the worker, verifying them against the
documents re-read from the shared file system. Only the pairs that are
printed travel back; the client sorts them exactly as the local engine does
(:func:`simdoc.stages.results.in_print_order`), so the output is
byte-identical whatever the number of workers or partitions.
"""

from __future__ import annotations

import os

import numpy as np


def _band_frame(index: str, band: int):
    import pandas as pd

    from simdoc.store.loaded import open_index

    keys, buckets = open_index(index).bands()
    docs = np.asarray(buckets[band])
    return pd.DataFrame({"band": np.full(len(docs), band, np.int32), "key": np.asarray(keys[band])[docs], "doc": docs})


def score_partition(frame, index: str, threshold: float, measure: str, verify: bool, all_candidates: bool, only_docs):
    """Pairs of the buckets in one partition, first-band rule, expanded, scored, filtered."""
    from simdoc.lsh import pairs_in_runs
    from simdoc.stages.results import Scoring, _members, score_pairs
    from simdoc.store.loaded import open_index

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
    """The distributed counterpart of :func:`simdoc.stages.pipeline.score_candidates` (same return value)."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    from simdoc.lsh import BucketStats
    from simdoc.stages.results import in_print_order
    from simdoc.store.loaded import open_index

    index = os.path.abspath(index)  # workers run in folders of their own
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
        dask.delayed(score_partition)(p, str(index), threshold, measure, verify, all_candidates, only_docs)
        for p in frame.to_delayed()
    ]
    results = client.compute(parts, sync=True)
    n_cand = sum(r[4] for r in results)
    left, right, est, jac = in_print_order([r[:4] for r in results], verify)
    return left, right, est, jac, n_cand, BucketStats(n_candidates=n_cand)

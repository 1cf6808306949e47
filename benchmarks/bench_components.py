"""Connected components: the local union-find against large-star/small-star on a Dask LocalCluster.

    python benchmarks/bench_components.py INDEX [--workers 2] [--partitions 1 8]

The edges are those `simdoc clusters --index INDEX` groups (its verified pairs at
the index's last threshold, read with find_pairs), and, as a worst case for the
number of rounds, one chain through as many documents. Wall times are of the
components alone (the cluster started before); labels are checked equal.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from distributed import Client, LocalCluster

from simdoc.reports.clusters import cluster_edges, connected_components
from simdoc.stages import dask_components as cc
from simdoc.stages.pairs import find_pairs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("index")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    a = ap.parse_args()
    res = find_pairs(None, a.index, threshold=a.threshold, jobs=1)
    n = len(res.doc_ids)
    left, right = cluster_edges(res)
    chain = np.random.default_rng(0).permutation(n)
    graphs = {"verified pairs": (left, right), f"one chain of {n}": (chain[:-1], chain[1:])}
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        for name, (l, r) in graphs.items():
            t = time.perf_counter()
            labels = connected_components(n, l, r)
            print(f"{name}: {len(l)} edges; local union-find {time.perf_counter() - t:.3f} s")
            for p in a.partitions:
                rounds = cc.Rounds()
                t = time.perf_counter()
                docs, got = cc.components(client, l, r, cc.EDGE_BYTES * max(1, -(-2 * len(l) // p)), rounds)
                took = time.perf_counter() - t
                assert np.array_equal(got, labels[docs])
                print(f"  cluster, {rounds.partitions} partitions: {took:.3f} s, {rounds.rounds} rounds, edges per round {rounds.edges}")


if __name__ == "__main__":
    main()

"""Connected components of the verified pairs on a Dask cluster: large-star / small-star.

``clusters`` and ``dedup`` group documents into the connected components of
the verified pairs. On this machine that is one vectorised union-find over
all edges (:func:`simdoc.reports.clusters.connected_components`); with
``--scheduler`` the edges are cut into partitions, one task each, so that no
task holds all of them, and the components are found by the alternating
*large-star* and *small-star* operations of Kiveris et al., "Connected
Components in MapReduce and Beyond" (SoCC 2014), the algorithm text-dedup
runs on Spark. Each operation groups the edges by one end (a hash
partition: a task gets every edge of its nodes) and, per node ``u`` with
neighbours ``N``:

* large-star: ``m = min(N ∪ {u})``; every neighbour ``v > u`` is linked to
  ``m`` instead of ``u``;
* small-star (the edges oriented from the larger end to the smaller):
  ``m = min(N ∪ {u})``; ``u`` and every neighbour are linked to ``m``.

Neither changes which nodes are connected, and together they turn every
component into a star around its smallest node in O(log² n) rounds (about
log n in practice: a chain of 1,000 nodes takes a handful). A graph is a
star forest exactly when every node that has a smaller neighbour has no
other neighbour; each large-star task counts the nodes of its input that
break this rule, and the rounds stop at the first input with none. The
star around a component's smallest node then gives every node its label,
the same smallest document number the local union-find gives.

Data moves between tasks as Dask futures, worker to worker: a task's output
is cut by destination partition, and the next task takes its piece of each
(:func:`piece`). The client submits the tasks, waits for each round's
summaries (a few integers per task), and takes the labels of the linked
documents at the end (it prints them). The edges themselves come from the
client: they are the verified pairs it already holds, the ones ``pairs``
would print.

Skew: the edges of one node go to one task, so the task of a component's
smallest node holds one edge per member of that component at the end. A
component is at most as large as the corpus, and one of 10^9 documents
would be a finding of its own.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from simdoc.engines.dask_waiting import lost_with_a_worker, results_of, scatter

# Times the components are looked for again, the edges sent anew, after a worker died with some.
LOST_EDGES_RETRIES = 3

# Edge rows (two int64 ends) a task takes at most, about, on a graph without a giant component:
# 64 MiB, 4.2 million edges. 10^6 documents with 10^6 verified pairs make one partition.
PARTITION_BYTES = 64 << 20
EDGE_BYTES = 16
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: consecutive document numbers spread over partitions

Pieces = tuple  # one (keys, neighbours) pair of int64 arrays per destination partition


@dataclass
class Rounds:
    """What the client kept of the run: per large-star round, the edges in and the nodes off a star."""

    partitions: int = 0
    edges: list[int] = field(default_factory=list)  # distinct directed edges into each large-star step
    off_star: list[int] = field(default_factory=list)  # nodes that keep the graph from being a star forest

    @property
    def rounds(self) -> int:
        return len(self.edges)


def partition_of(nodes: np.ndarray, n_parts: int) -> np.ndarray:
    """The partition (0 .. n_parts - 1) each node's edges are grouped in."""
    mixed = np.asarray(nodes, dtype=np.int64).astype(np.uint64) * _MIX
    return ((mixed >> np.uint64(32)) % np.uint64(n_parts)).astype(np.int64)


def _split(keys: np.ndarray, nbrs: np.ndarray, n_parts: int) -> Pieces:
    """The (key, neighbour) edges cut by the key's partition, one piece per destination."""
    dest = partition_of(keys, n_parts)
    order = np.argsort(dest, kind="stable")
    bounds = np.cumsum(np.bincount(dest, minlength=n_parts))[:-1]
    return tuple(zip(np.split(keys[order], bounds), np.split(nbrs[order], bounds)))


def _both_ways(a: np.ndarray, b: np.ndarray, n_parts: int) -> Pieces:
    """Edges for a large-star step: each one under both its ends."""
    return _split(np.concatenate([a, b]), np.concatenate([b, a]), n_parts)


def _grouped(pieces: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key, neighbour) edges of the pieces, sorted by key then neighbour, and where
    each key's run starts. Repeats are dropped here, where they meet (as Spark's ``distinct``)."""
    keys = np.concatenate([np.asarray(k, dtype=np.int64) for k, _ in pieces]) if pieces else np.zeros(0, np.int64)
    nbrs = np.concatenate([np.asarray(n, dtype=np.int64) for _, n in pieces]) if pieces else np.zeros(0, np.int64)
    order = np.lexsort((nbrs, keys))
    keys, nbrs = keys[order], nbrs[order]
    if len(keys):
        new = np.concatenate(([True], (keys[1:] != keys[:-1]) | (nbrs[1:] != nbrs[:-1])))
        keys, nbrs = keys[new], nbrs[new]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else np.zeros(0, np.int64)
    return keys, nbrs, starts


def orient(edges: tuple[np.ndarray, np.ndarray], n_parts: int) -> tuple[Pieces, tuple[int, int]]:
    """The first task on a chunk of the client's edges (left, right): self-loops dropped (they
    link nothing), every edge filed under both ends for the first large-star step."""
    left, right = edges
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    proper = left != right
    return _both_ways(left[proper], right[proper], n_parts), (int(np.count_nonzero(proper)), 0)


def large_star(n_parts: int, *pieces: tuple) -> tuple[Pieces, tuple[int, int]]:
    """One partition's large-star step; its output is filed for a small-star step (under the larger end).

    Also counts the nodes of its input that are off a star (a smaller
    neighbour and another neighbour besides): none in every partition means
    the input is already the answer (and this output is that same graph).
    """
    keys, nbrs, starts = _grouped(pieces)
    if not len(keys):
        return _split(keys, nbrs, n_parts), (0, 0)
    size = np.diff(np.append(starts, len(keys)))
    smallest = nbrs[starts]  # neighbours are sorted within each key
    off_star = int(np.count_nonzero((smallest < keys[starts]) & (size > 1)))
    m = np.repeat(np.minimum(smallest, keys[starts]), size)
    up = nbrs > keys
    return _split(nbrs[up], m[up], n_parts), (len(keys), off_star)


def small_star(n_parts: int, *pieces: tuple) -> tuple[Pieces, tuple[int, int]]:
    """One partition's small-star step on edges filed under their larger end; its output is filed
    under both ends for the next large-star step."""
    keys, nbrs, starts = _grouped(pieces)
    if not len(keys):
        return _both_ways(keys, nbrs, n_parts), (0, 0)
    size = np.diff(np.append(starts, len(keys)))
    m = nbrs[starts]  # the smallest neighbour, smaller than the key (edges point down)
    rest = nbrs != np.repeat(m, size)
    a = np.concatenate([nbrs[rest], keys[starts]])
    b = np.concatenate([np.repeat(m, size)[rest], m])
    return _both_ways(a, b, n_parts), (len(a), 0)


def labels_of(*pieces: tuple) -> tuple[np.ndarray, np.ndarray]:
    """On a star forest filed under the larger end: each leaf and its star's centre."""
    keys, nbrs, _ = _grouped(pieces)
    return keys, nbrs


def piece(out: tuple, p: int) -> tuple:
    """The part of a task's output that goes to partition ``p``."""
    return out[0][p]


def summary(out: tuple) -> tuple[int, int]:
    """The few integers of a task's output the client reads."""
    return out[1]


def partitions_for(n_edges: int, partition_bytes: int | None = None) -> int:
    """How many partitions the edges are grouped in: each edge is filed twice in a large-star step."""
    return max(1, math.ceil(2 * n_edges * EDGE_BYTES / (partition_bytes or PARTITION_BYTES)))


def components(
    client, left: np.ndarray, right: np.ndarray, partition_bytes: int | None = None, rounds: Rounds | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every document in an edge that is not a self-loop, sorted, and the smallest document
    number of its component, found on the cluster of ``client``.

    The labels are those of :func:`simdoc.reports.clusters.connected_components`
    for the same documents. ``rounds`` (if given) receives the per-round summaries.
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"left and right must be 1-D and of equal length, got {left.shape} and {right.shape}")
    rounds = rounds if rounds is not None else Rounds()
    n_parts = partitions_for(len(left), partition_bytes)
    rounds.partitions = n_parts
    for attempt in itertools.count():
        rounds.edges.clear()
        rounds.off_star.clear()
        try:
            return _on_cluster(client, left, right, n_parts, rounds)
        except concurrent.futures.CancelledError as exc:
            # A worker died with edges the client scattered: they cannot be computed again,
            # so the tasks that needed them were cancelled. The client still has them all.
            if attempt >= LOST_EDGES_RETRIES or not lost_with_a_worker(client, exc):
                raise


def _on_cluster(client, left: np.ndarray, right: np.ndarray, n_parts: int, rounds: Rounds) -> tuple[np.ndarray, np.ndarray]:
    """:func:`components`, once: the edges scattered, then large- and small-star steps."""
    per_chunk = max(1, math.ceil(len(left) / n_parts))
    # Scattered, not put in the task graph: a chunk is up to PARTITION_BYTES, sent once to a worker.
    chunks = [(left[i : i + per_chunk], right[i : i + per_chunk]) for i in range(0, len(left), per_chunk)]
    scattered = scatter(client, chunks) if chunks else []
    outs = [client.submit(orient, chunk, n_parts, pure=False) for chunk in scattered]
    del chunks, scattered  # the workers hold the chunks now; the futures' tasks keep them

    def step(func, outs: list) -> list:
        # Partition p's task takes the piece for p of every output: worker to worker, not through here.
        return [client.submit(func, n_parts, *[client.submit(piece, o, p, pure=False) for o in outs], pure=False)
                for p in range(n_parts)]

    while outs:
        outs = step(large_star, outs)
        counts = results_of(client, [client.submit(summary, o, pure=False) for o in outs])
        rounds.edges.append(sum(c[0] for c in counts))
        rounds.off_star.append(sum(c[1] for c in counts))
        if rounds.off_star[-1] == 0:
            break
        outs = step(small_star, outs)
    # The last large-star step's input was a star forest, and so is its output: read it off.
    found = [client.submit(labels_of, *[client.submit(piece, o, p, pure=False) for o in outs], pure=False)
             for p in range(n_parts)] if outs else []
    found = results_of(client, found)  # a scheduler left with no worker for --wait-workers: a ClusterError
    leaves = np.concatenate([f[0] for f in found]) if found else np.zeros(0, np.int64)
    centres = np.concatenate([f[1] for f in found]) if found else np.zeros(0, np.int64)
    docs = np.concatenate([leaves, np.unique(centres)])
    labels = np.concatenate([centres, np.unique(centres)])
    order = np.argsort(docs, kind="stable")
    return docs[order], labels[order]

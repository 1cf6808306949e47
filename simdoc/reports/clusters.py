"""Clusters of near-duplicates, and which member of each to keep.

A cluster is a connected component of the graph whose nodes are documents
and whose edges are *verified* pairs: pairs whose exact Jaccard reaches the
threshold. Raw LSH candidates are never used as edges. A false candidate (two
documents that share a band by chance, or by shared boilerplate) is common,
and a single one would glue two unrelated groups into one cluster, after
which ``dedup`` would drop documents that resemble nothing it keeps.

Clustering is transitive: if A~B and B~C are verified pairs, A, B and C form
one cluster even when A and C are not similar themselves (a chain of edits).

Cluster ids are deterministic: members are sorted by document id, clusters are
ordered by their smallest member's id and numbered from 1. Neither the order
of the pairs nor the side of a pair a document is on changes them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simdoc.errors import UsageError
from simdoc.stages import dask_components

if TYPE_CHECKING:  # only for annotations: clusters need the arrays, not the pipeline
    from simdoc.stages.results import PairsResult

KEEP_POLICIES = ("first", "longest", "shortest", "newest", "oldest", "oldest-indexed")


def connected_components(n_docs: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Label every document with the smallest document number of its component.

    Vectorised union-find: each round hooks the larger of the two roots of
    every edge whose roots differ onto the smaller one (``np.minimum.at``), then
    compresses every path by pointer jumping. Parents only ever decrease, so
    the loop ends, and a root is always its component's smallest member.

    Parameters
    ----------
    n_docs : int
        Number of documents; nodes are ``0 .. n_docs - 1``.
    left, right : ndarray of shape (n_edges,), int
        The two ends of each edge (any order, self-loops and repeats allowed).

    Returns
    -------
    ndarray of shape (n_docs,), dtype int64
        ``labels[i]`` is the smallest document number connected to ``i``;
        a document without edges is its own label.

    Examples
    --------
    >>> connected_components(5, np.array([3, 0]), np.array([4, 3])).tolist()
    [0, 1, 2, 0, 0]
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"left and right must be 1-D and of equal length, got {left.shape} and {right.shape}")
    if len(left) and (min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= n_docs):
        raise ValueError(f"edge ends must lie in [0, {n_docs})")
    parent = np.arange(n_docs, dtype=np.int64)
    while True:
        a, b = parent[left], parent[right]
        differ = a != b
        if not differ.any():
            return parent
        lo = np.minimum(a[differ], b[differ])
        hi = np.maximum(a[differ], b[differ])
        np.minimum.at(parent, hi, lo)
        while True:  # pointer jumping until every node points at a root
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped


@dataclass(frozen=True)
class Cluster:
    """One group of near-duplicates.

    Attributes
    ----------
    cluster_id : int
        1 for the cluster with the smallest member id, then 2, 3, ...
    members : tuple of str
        Document ids, sorted.
    rows : tuple of int
        The members' document numbers (rows of the index), aligned with ``members``.
    """

    cluster_id: int
    members: tuple[str, ...]
    rows: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.members)


def build_clusters(doc_ids: Sequence[str], left: np.ndarray, right: np.ndarray) -> list[Cluster]:
    """Clusters (components of two or more documents) of the graph given by edges.

    Parameters
    ----------
    doc_ids : sequence of str
        Document id of each document number.
    left, right : ndarray of shape (n_edges,), int
        Document numbers of the two ends of each edge. Every edge counts:
        filter the pairs first (see :func:`cluster_pairs`). Self-loops are ignored.

    Returns
    -------
    list of Cluster
        In cluster-id order; documents in no edge belong to no cluster.

    Examples
    --------
    >>> [c.members for c in build_clusters(["a", "b", "c", "d"], np.array([3]), np.array([1]))]
    [('b', 'd')]
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    labels = connected_components(len(doc_ids), left, right)
    linked = np.zeros(len(doc_ids), dtype=bool)
    proper = left != right  # a self-loop links a document to nothing
    linked[left[proper]] = True
    linked[right[proper]] = True
    docs = np.flatnonzero(linked)
    return clusters_of_labels(doc_ids, docs, labels[docs])


def clusters_of_labels(doc_ids: Sequence[str], docs: np.ndarray, labels: np.ndarray) -> list[Cluster]:
    """Clusters from the linked documents and their components' labels, however these were found.

    The one place clusters are named and ordered, so that components found on
    a Dask cluster (:mod:`simdoc.stages.dask_components`) print exactly as
    those found here.

    Parameters
    ----------
    doc_ids : sequence of str
        Document id of each document number.
    docs : ndarray of shape (n_linked,), int
        The documents in at least one edge that is not a self-loop, sorted.
    labels : ndarray of shape (n_linked,), int
        The same label for the documents of one component, a different one for another.
    """
    docs = np.asarray(docs, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    docs = docs[np.argsort(labels, kind="stable")]  # one contiguous run per component
    labels = np.sort(labels, kind="stable")
    bounds = [0, *(np.flatnonzero(np.diff(labels)) + 1).tolist(), len(docs)] if len(docs) else [0]
    # The ids gathered in one go where the column can (an id at a time cost 1.7 s of `clusters`
    # at 10^6 records), then each group sorted by them, not by document numbers: the ids are
    # what the user sees.
    take = getattr(doc_ids, "take", None)
    ids = take(docs) if take is not None else [doc_ids[i] for i in docs.tolist()]
    rows = docs.tolist()
    named = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        pairs = sorted(zip(ids[a:b], rows[a:b]))
        named.append((tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)))
    named.sort()
    return [Cluster(n, members, rows) for n, (members, rows) in enumerate(named, start=1)]


def cluster_edges(result: PairsResult) -> tuple[np.ndarray, np.ndarray]:
    """The edges of the clusters of a :func:`~simdoc.stages.pairs.find_pairs` result: (left, right).

    Only pairs whose exact similarity reaches ``result.threshold`` are edges,
    the same test ``pairs`` prints by, so a result made with
    ``all_candidates=True`` clusters exactly like one without it.

    Raises
    ------
    UsageError
        The result has no exact similarities (made with ``verify=False``):
        estimates alone can glue unrelated groups together.
    """
    if result.jaccard is None:
        raise UsageError(
            "clusters are built from verified pairs only, and these pairs were not verified",
            hint="drop --no-verify (verify=False)",
        )
    keep = np.asarray(result.jaccard) >= result.threshold
    left = [np.asarray(result.left, dtype=np.int64)[keep]]
    right = [np.asarray(result.right, dtype=np.int64)[keep]]
    # Exact copies are folded into groups (simdoc.exact); their pairs reach any threshold,
    # and a star from the first member links each group without listing its n^2 pairs.
    for g in result.groups:
        left.append(np.full(len(g) - 1, g[0], dtype=np.int64))
        right.append(np.asarray(g[1:], dtype=np.int64))
    return np.concatenate(left), np.concatenate(right)


def cluster_pairs(
    result: PairsResult, client: Any = None, rounds: dask_components.Rounds | None = None
) -> list[Cluster]:
    """Clusters of the verified pairs of a :func:`~simdoc.stages.pairs.find_pairs` result.

    The edges are those of :func:`cluster_edges`. With a Dask ``client``, the
    components are found on its cluster (:func:`simdoc.stages.dask_components.components`),
    edges cut into partitions, one task each; the clusters are the same.
    ``rounds`` (if given) receives that run's per-round summaries.
    """
    left, right = cluster_edges(result)
    if client is None:
        return build_clusters(result.doc_ids, left, right)
    docs, labels = dask_components.components(client, left, right, rounds=rounds)
    return clusters_of_labels(result.doc_ids, docs, labels)


@dataclass(frozen=True)
class DedupDecision:
    """The document of a cluster to keep and the ones that can go.

    Attributes
    ----------
    cluster_id : int
    keep : str
        Document id of the one member to keep.
    drop : tuple of str
        The other members, sorted by id.
    """

    cluster_id: int
    keep: str
    drop: tuple[str, ...]


def _keep_key(policy: str) -> Callable[[Mapping], tuple]:
    # Every key ends with the id, so ties always go to the smallest id.
    keys = {
        "first": lambda r: (r["id"],),
        "longest": lambda r: (-int(r["size"]), r["id"]),
        "shortest": lambda r: (int(r["size"]), r["id"]),
        "newest": lambda r: (-int(r["mtime_ns"]), r["id"]),
        "oldest": lambda r: (int(r["mtime_ns"]), r["id"]),
        # What the index held first (the update that added it): only the new data loses documents.
        "oldest-indexed": lambda r: (int(r.get("added", 0)), r["id"]),
    }
    return keys[policy]


def plan_dedup(
    clusters: Iterable[Cluster], records: Iterable[Mapping], keep: str = "first", outside: Collection[str] = frozenset()
) -> list[DedupDecision]:
    """Choose one document to keep in every cluster.

    Parameters
    ----------
    clusters : iterable of Cluster
    records : iterable of mapping
        Document records with at least ``id``, ``size`` (bytes) and
        ``mtime_ns`` (as in the index's docs file, ``LoadedIndex.doc_records()``).
    keep : {"first", "longest", "shortest", "newest", "oldest", "oldest-indexed"}
        ``first``: the smallest id; ``longest`` / ``shortest``: the largest /
        smallest file in bytes; ``newest`` / ``oldest``: the latest / earliest
        modification time; ``oldest-indexed``: the earliest indexed (the
        record's ``added`` update), so that only newly added documents go.
        Ties go to the smallest id.
    outside : collection of str
        Ids of documents whose files lie outside the corpus (reached through
        a link): one is kept only in a cluster with no other, so that the
        copy kept for the documents inside is inside too.

    Returns
    -------
    list of DedupDecision
        One per cluster, in the clusters' order. Nothing is deleted here.

    Examples
    --------
    >>> recs = [{"id": "a", "size": 5, "mtime_ns": 2}, {"id": "b", "size": 9, "mtime_ns": 1}]
    >>> plan_dedup([Cluster(1, ("a", "b"), (0, 1))], recs, keep="longest")
    [DedupDecision(cluster_id=1, keep='b', drop=('a',))]
    """
    if keep not in KEEP_POLICIES:
        raise UsageError(f"--keep must be one of {', '.join(KEEP_POLICIES)}, got {keep!r}")
    policy = _keep_key(keep)

    def key(r: Mapping) -> tuple:
        return (r["id"] in outside, *policy(r))

    by_id = {r["id"]: r for r in records}
    out = []
    for c in clusters:
        kept = min((by_id[m] for m in c.members), key=key)["id"]
        out.append(DedupDecision(c.cluster_id, kept, tuple(m for m in c.members if m != kept)))
    return out

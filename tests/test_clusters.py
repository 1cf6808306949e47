"""Clusters from verified pairs, and the keep policies of dedup."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.buckets import BucketStats
from simdoc.errors import UsageError
from simdoc.reports.clusters import (
    KEEP_POLICIES,
    Cluster,
    DedupDecision,
    build_clusters,
    cluster_pairs,
    connected_components,
    plan_dedup,
)
from simdoc.stages.results import PairsResult


def result(doc_ids, edges, jaccard, threshold=0.5, verified=True) -> PairsResult:
    left = np.array([min(a, b) for a, b in edges], dtype=np.int64)
    right = np.array([max(a, b) for a, b in edges], dtype=np.int64)
    jac = np.array(jaccard, dtype=np.float64) if verified else None
    return PairsResult(list(doc_ids), left, right, np.array(jaccard, dtype=np.float64), jac, threshold, "set", len(edges), BucketStats())


def bfs_components(n: int, edges) -> set[frozenset[int]]:
    """Brute force: components of two or more nodes, by breadth-first search."""
    adj = {i: set() for i in range(n)}
    for a, b in edges:
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    seen, out = set(), set()
    for start in range(n):
        if start in seen or not adj[start]:
            continue
        comp, todo = {start}, [start]
        while todo:
            for nb in adj[todo.pop()]:
                if nb not in comp:
                    comp.add(nb)
                    todo.append(nb)
        seen |= comp
        out.add(frozenset(comp))
    return out


# ---------------------------------------------------------------- components


def test_components_smallest_member_labels():
    labels = connected_components(7, np.array([5, 2, 6, 4]), np.array([6, 4, 3, 2]))
    assert labels.tolist() == [0, 1, 2, 3, 2, 3, 3]


def test_components_long_chain_in_reverse():
    n = 1000
    left = np.arange(n - 1)[::-1]
    labels = connected_components(n, left + 1, left)
    assert (labels == 0).all()


def test_components_no_edges_and_self_loops():
    assert connected_components(3, np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == [0, 1, 2]
    assert connected_components(3, np.array([1]), np.array([1])).tolist() == [0, 1, 2]
    assert build_clusters(["a", "b", "c"], np.array([1]), np.array([1])) == []


def test_components_reject_bad_edges():
    with pytest.raises(ValueError):
        connected_components(2, np.array([0]), np.array([2]))
    with pytest.raises(ValueError):
        connected_components(2, np.array([0, 1]), np.array([1]))


def test_cluster_ids_follow_smallest_member_name():
    ids = ["m.txt", "a.txt", "z.txt", "b.txt", "c.txt"]
    clusters = build_clusters(ids, np.array([0, 3]), np.array([2, 4]))
    assert clusters == [
        Cluster(1, ("b.txt", "c.txt"), (3, 4)),
        Cluster(2, ("m.txt", "z.txt"), (0, 2)),
    ]
    assert [c.size for c in clusters] == [2, 2]


# ---------------------------------------------------------------- verified pairs only


def test_below_threshold_candidate_does_not_glue_two_groups():
    ids = ["a", "b", "c", "d"]
    res = result(ids, [(0, 1), (2, 3), (1, 2)], [0.95, 0.9, 0.41], threshold=0.8)
    assert [c.members for c in cluster_pairs(res)] == [("a", "b"), ("c", "d")]


def test_pair_at_threshold_links():
    res = result(["a", "b"], [(0, 1)], [0.8], threshold=0.8)
    assert [c.members for c in cluster_pairs(res)] == [("a", "b")]


def test_unverified_pairs_are_refused():
    res = result(["a", "b"], [(0, 1)], [0.9], verified=False)
    with pytest.raises(UsageError, match="verified"):
        cluster_pairs(res)


def test_no_pairs_no_clusters():
    assert cluster_pairs(result(["a", "b"], [], [])) == []


# ---------------------------------------------------------------- properties

edge_lists = st.integers(1, 30).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
)


@settings(max_examples=200, deadline=None)
@given(edge_lists)
def test_components_equal_bfs(case):
    n, edges = case
    left = np.array([a for a, _ in edges], dtype=np.int64)
    right = np.array([b for _, b in edges], dtype=np.int64)
    labels = connected_components(n, left, right)
    groups: dict[int, set[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, set()).add(i)
        assert lab == min(groups[lab])  # a label is its component's smallest member
    expected = bfs_components(n, edges)
    assert {frozenset(g) for g in groups.values() if len(g) > 1} == expected
    clusters = build_clusters([f"d{i:02d}" for i in range(n)], left, right)
    assert {frozenset(c.rows) for c in clusters} == expected
    assert [c.cluster_id for c in clusters] == list(range(1, len(clusters) + 1))


@settings(max_examples=200, deadline=None)
@given(edge_lists, st.randoms(use_true_random=False))
def test_cluster_ids_do_not_depend_on_pair_order_or_sides(case, rnd):
    n, edges = case
    ids = [f"doc{rnd.randrange(10**6):06d}-{i}" for i in range(n)]  # names not in document order
    shuffled = [(b, a) if rnd.random() < 0.5 else (a, b) for a, b in edges]
    rnd.shuffle(shuffled)

    def run(es):
        return build_clusters(ids, np.array([a for a, _ in es], dtype=np.int64), np.array([b for _, b in es], dtype=np.int64))

    first = run(edges)
    assert run(shuffled) == first
    assert all(list(c.members) == sorted(c.members) for c in first)
    assert [c.members[0] for c in first] == sorted(c.members[0] for c in first)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 25).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(0.0, 1.0)).filter(lambda e: e[0] != e[1]),
                max_size=50,
            ),
        )
    ),
    st.floats(0.05, 1.0),
)
def test_false_candidates_never_merge_clusters(case, threshold):
    n, scored = case
    ids = [f"d{i:02d}" for i in range(n)]
    everything = result(ids, [(a, b) for a, b, _ in scored], [j for _, _, j in scored], threshold)
    verified = [(a, b) for a, b, j in scored if j >= threshold]
    only_verified = result(ids, verified, [1.0] * len(verified), threshold)
    got = cluster_pairs(everything)
    assert got == cluster_pairs(only_verified)
    assert {frozenset(c.rows) for c in got} == bfs_components(n, verified)


# ---------------------------------------------------------------- keep policies

RECORDS = [
    {"id": "a.txt", "size": 100, "mtime_ns": 3_000},
    {"id": "b.txt", "size": 300, "mtime_ns": 1_000},
    {"id": "c.txt", "size": 50, "mtime_ns": 5_000},
    {"id": "d.txt", "size": 300, "mtime_ns": 5_000},
]
ALL = [Cluster(1, ("a.txt", "b.txt", "c.txt", "d.txt"), (0, 1, 2, 3))]


@pytest.mark.parametrize(
    "keep, kept",
    [
        ("first", "a.txt"),
        ("longest", "b.txt"),  # b and d are both 300 bytes: the smaller id wins
        ("shortest", "c.txt"),
        ("newest", "c.txt"),  # c and d are both newest
        ("oldest", "b.txt"),
    ],
)
def test_keep_policies(keep, kept):
    (d,) = plan_dedup(ALL, RECORDS, keep)
    assert d == DedupDecision(1, kept, tuple(m for m in ALL[0].members if m != kept))


def test_keep_policies_cover_the_cli_choices():
    assert KEEP_POLICIES == ("first", "longest", "shortest", "newest", "oldest", "oldest-indexed")


def test_unknown_keep_policy():
    with pytest.raises(UsageError, match="--keep"):
        plan_dedup(ALL, RECORDS, "biggest")


def test_plan_keeps_cluster_order():
    clusters = [Cluster(1, ("a.txt", "b.txt"), (0, 1)), Cluster(2, ("c.txt", "d.txt"), (2, 3))]
    assert plan_dedup(clusters, RECORDS, "longest") == [
        DedupDecision(1, "b.txt", ("a.txt",)),
        DedupDecision(2, "d.txt", ("c.txt",)),
    ]

"""Connected components on a Dask cluster (large-star / small-star), run in this process.

simdoc.stages.dask_components cuts the edges into partitions, one task
each, and moves them between tasks as futures. Whatever the graph and the
number of partitions, every linked document gets the label the local
union-find gives it (its component's smallest document number). The tasks
go through a client that runs each one at once, its arguments and result
pickled as Dask would send them, and futures given as arguments replaced by
their results, as Dask does.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.reports.clusters import (
    build_clusters,
    clusters_of_labels,
    connected_components,
)
from simdoc.stages import dask_components as cc


class Done:
    def __init__(self, value) -> None:
        self.value = value

    def result(self, timeout=None):
        return self.value


class FutureClient:
    """What components() needs of a Dask client: submit with futures as arguments, each task run at once."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.largest_input = 0  # edges given to one task, at most

    def scatter(self, data: list, hash=True, timeout=None) -> list:
        return [Done(pickle.loads(pickle.dumps(x))) for x in data]

    def submit(self, func, *args, pure=True):
        args = tuple(a.value if isinstance(a, Done) else a for a in args)
        name = func.__name__
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in ("large_star", "small_star", "labels_of"):
            pieces = args[1:] if name != "labels_of" else args
            self.largest_input = max(self.largest_input, sum(len(k) for k, _ in pieces))
        result = func(*pickle.loads(pickle.dumps(args)))
        return Done(pickle.loads(pickle.dumps(result)))


def local_labels(n: int, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linked documents and their labels, as the local engine finds them."""
    labels = connected_components(n, left, right)
    proper = left != right
    docs = np.unique(np.concatenate([left[proper], right[proper]]))
    return docs, labels[docs]


def on_cluster(left, right, partition_bytes=None, rounds=None):
    client = FutureClient()
    docs, labels = cc.components(client, np.asarray(left, np.int64), np.asarray(right, np.int64), partition_bytes, rounds)
    return docs, labels, client


@st.composite
def graphs(draw):
    """Random edges among n nodes, with isolated nodes, self-loops, repeats, a long chain and a star."""
    n = draw(st.integers(1, 300))
    m = draw(st.integers(0, 200))
    left = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    right = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    perm = np.asarray(draw(st.permutations(range(n))), np.int64)  # shapes on shuffled node numbers
    if n > 1 and draw(st.booleans()):
        a, b = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True)))
        chain = perm[a : b + 1]  # a path: the worst case for the number of rounds
        left += chain[:-1].tolist()
        right += chain[1:].tolist()
    if n > 2 and draw(st.booleans()):
        centre, *leaves = draw(st.lists(st.integers(0, n - 1), min_size=3, max_size=40, unique=True))
        left += [int(perm[centre])] * len(leaves)
        right += perm[leaves].tolist()
    if left and draw(st.booleans()):
        left, right = right, left
    return n, np.asarray(left, np.int64), np.asarray(right, np.int64)


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), edges_per_task=st.sampled_from([20, 60, 250, 10**6]))
def test_any_graph_and_any_number_of_partitions_give_the_local_labels(graph, edges_per_task):
    n, left, right = graph
    rounds = cc.Rounds()
    docs, labels, _ = on_cluster(left, right, edges_per_task * cc.EDGE_BYTES, rounds)
    want_docs, want_labels = local_labels(n, left, right)
    assert docs.tolist() == want_docs.tolist()
    assert labels.tolist() == want_labels.tolist()
    assert rounds.off_star[-1:] in ([], [0])  # it stopped at a star forest, not before


def test_the_clusters_printed_are_the_local_ones():
    rng = np.random.default_rng(7)
    ids = [f"d{int(x):04d}" for x in rng.permutation(500)]  # ids not in document-number order
    left, right = rng.integers(0, 500, 300), rng.integers(0, 500, 300)
    docs, labels, _ = on_cluster(left, right, 40 * cc.EDGE_BYTES)
    assert clusters_of_labels(ids, docs, labels) == build_clusters(ids, left, right)


def test_a_long_chain_takes_few_rounds_and_no_task_holds_all_edges():
    n = 2000
    perm = np.random.default_rng(3).permutation(n)
    left, right = perm[:-1], perm[1:]
    rounds = cc.Rounds()
    docs, labels, client = on_cluster(left, right, 250 * cc.EDGE_BYTES, rounds)
    assert docs.tolist() == list(range(n)) and labels.tolist() == [0] * n
    assert rounds.partitions == cc.partitions_for(n - 1, 250 * cc.EDGE_BYTES) > 10
    assert rounds.rounds <= 4 * int(np.log2(n))  # a node-by-node propagation would take ~n / 2
    # The first round, on the chain as it is, spreads the edges over the partitions.
    assert client.calls["orient"] == rounds.partitions
    assert client.calls["large_star"] == rounds.rounds * rounds.partitions


def test_the_edges_of_one_round_are_spread_over_the_partitions():
    rng = np.random.default_rng(5)
    left, right = rng.integers(0, 10**6, 5000), rng.integers(0, 10**6, 5000)
    client = FutureClient()
    rounds = cc.Rounds()
    cc.components(client, left, right, 1000 * cc.EDGE_BYTES, rounds)
    assert rounds.partitions == 10
    # Small components: no task gets much more than its share of the 10,000 directed edges.
    assert client.largest_input < 2 * 10_000 / rounds.partitions


def test_no_edges_or_only_self_loops_submit_little_and_give_nothing():
    docs, labels, client = on_cluster([], [])
    assert docs.tolist() == labels.tolist() == [] and client.calls == {}
    docs, labels, _ = on_cluster([4, 2], [4, 2])
    assert docs.tolist() == labels.tolist() == []


def test_edges_of_unequal_length_are_refused():
    with pytest.raises(ValueError):
        cc.components(FutureClient(), np.array([1, 2]), np.array([1]))


def test_partitions_follow_the_volume():
    per = cc.PARTITION_BYTES // cc.EDGE_BYTES
    assert cc.partitions_for(0) == 1
    assert cc.partitions_for(per // 2) == 1
    assert cc.partitions_for(per // 2 + 1) == 2
    parts = cc.partition_of(np.arange(10_000), 7)
    assert parts.min() == 0 and parts.max() == 6
    assert np.bincount(parts).min() > 10_000 / 7 / 2  # consecutive numbers are spread

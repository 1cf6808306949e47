"""Verification's units: whole components of about equal cost, the costliest first; the Jaccards
do not depend on how the pairs are cut or on how many processes verify them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.stages.verify as verify
import simdoc.stages.verify_units as verify_units
from simdoc.stages.reread import reader_of
from simdoc.stages.verify_units import FILE_COST, SHINGLE_COST, components, pair_costs, units
from simdoc.store.loaded import open_index

edges = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)).filter(lambda e: e[0] < e[1]), max_size=80, unique=True)


def ordered(pairs, n=41):
    """The pairs as verify_pairs orders them: by component, then by document."""
    left = np.array([a for a, _ in pairs], np.int64)
    right = np.array([b for _, b in pairs], np.int64)
    label = components(left, right, n)
    order = np.lexsort((right, left, label))
    return left[order], right[order], label[order]


@settings(max_examples=200, deadline=None)
@given(edges, st.integers(1, 4), st.lists(st.integers(0, 5000), min_size=41, max_size=41), st.integers(1, 9))
def test_units_cover_every_pair_once_in_whole_components_costliest_first(pairs, jobs, shingles, unit_pairs):
    ol, orr, label = ordered(pairs)
    shingles = np.array(shingles, np.int64)
    cost = pair_costs(ol, orr, shingles)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verify_units, "UNIT_PAIRS", unit_pairs)
        cut = units(label, cost, jobs)
    assert sorted(b - a for a, b in cut) == sorted(b - a for a, b in cut if b > a)  # none empty
    covered = np.zeros(len(ol), np.int64)
    for a, b in cut:
        covered[a:b] += 1
        assert a == 0 or label[a] != label[a - 1]  # a component is never cut
        assert b == len(ol) or label[b] != label[b - 1]
        assert b - a <= unit_pairs or label[a] == label[b - 1]  # larger: one component
    assert (covered == 1).all()
    weights = [cost[a:b].sum() for a, b in cut]
    assert weights == sorted(weights, reverse=True)
    # The cost: each pair's merge, and each document's reading once.
    docs = np.unique(np.concatenate([ol, orr])) if len(ol) else np.zeros(0, np.int64)
    assert cost.sum() == (shingles[ol] + shingles[orr]).sum() + (FILE_COST + SHINGLE_COST * shingles[docs]).sum()


def test_units_are_cut_by_cost_not_by_pairs():
    # A component of 100 pairs of short documents, then ten single pairs of long ones: by pairs the
    # star would be most of the work; by cost each long pair is a unit, the star a small one.
    star = [(0, d) for d in range(1, 101)]
    single = [(200 + 2 * i, 201 + 2 * i) for i in range(10)]
    ol, orr, label = ordered(star + single, 300)
    shingles = np.full(300, 10, np.int64)
    shingles[200:] = 100_000
    cut = units(label, pair_costs(ol, orr, shingles), 2)
    assert len(cut) == 10
    # The star with the long pair after it (the costliest, first), then each long pair alone.
    assert [b - a for a, b in cut] == [101] + [1] * 9


def test_a_unit_holds_at_most_unit_pairs_unless_one_component_is_larger(monkeypatch):
    monkeypatch.setattr(verify_units, "UNIT_PAIRS", 5)
    monkeypatch.setattr(verify_units, "UNITS_PER_JOB", 1)  # the cost alone would make one unit
    pairs = [(2 * i, 2 * i + 1) for i in range(12)] + [(30, d) for d in range(31, 41)]
    ol, orr, label = ordered(pairs)
    cut = units(label, np.ones(len(ol), np.int64), 1)
    assert max(b - a for a, b in cut) == 10  # the star: one component
    assert sorted(b - a for a, b in cut)[:-1] == [2, 5, 5]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from test_verify_progress import _templated

    root = tmp_path_factory.mktemp("units")
    _templated(root / "c", 24)
    simdoc.find_pairs(root / "c", root / "idx", jobs=1, verify=False)
    loaded = open_index(root / "idx")
    left, right = np.triu_indices(len(loaded.docs()), 1)
    keep = (left % 5 == right % 5) | (right == left + 1)  # components of several sizes
    want = verify.verify_pairs(reader_of(loaded), left[keep], right[keep], jobs=1)
    return loaded, left[keep], right[keep], want


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(1, 300), st.integers(1, 3))
def test_the_jaccards_do_not_depend_on_the_cut(corpus, per_job, unit_pairs, jobs):
    loaded, left, right, want = corpus
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verify_units, "UNITS_PER_JOB", per_job)
        mp.setattr(verify_units, "UNIT_PAIRS", unit_pairs)
        got = verify.verify_pairs(reader_of(loaded), left, right, jobs=1 if jobs < 3 else jobs - 1)
    assert got.ok.all()
    assert got.set_jaccard.tolist() == want.set_jaccard.tolist()
    assert got.bag_jaccard.tolist() == want.bag_jaccard.tolist()

"""With --new, the pairs inside groups of exact copies: those with a member added or changed.

:class:`simdoc.stages.results.PairsResult` counts and lists them from the
groups that hold a changed member only (a nightly run of a crawl that changed
nothing makes no Python loop over its copies). Held here to the definition:
every pair (a, b) of a group, a < b, with a or b changed.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.buckets import BucketStats
from simdoc.stages.results import PairsResult


def _result(groups: list[np.ndarray], changed: np.ndarray | None, n: int) -> PairsResult:
    empty = np.zeros(0, dtype=np.int64)
    return PairsResult(
        [f"d{i:03d}" for i in range(n)], empty, empty, np.zeros(0), np.zeros(0), 0.8, "set", 0, BucketStats(),
        changed=changed, groups=groups,
    )


@st.composite
def _copies(draw):
    n = draw(st.integers(0, 40))
    group_of = draw(st.lists(st.integers(-1, 6), min_size=n, max_size=n))  # -1: in no group
    groups = [np.array(sorted(d for d in range(n) if group_of[d] == g), dtype=np.int64) for g in range(7)]
    groups = [g for g in groups if len(g) >= 2]
    changed = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n).map(lambda c: np.array(c, dtype=bool))))
    return n, groups, changed


@settings(max_examples=300, deadline=None)
@given(_copies())
def test_the_pairs_of_copies_are_those_with_a_changed_member(case) -> None:
    n, groups, changed = case
    expected = sorted(
        (int(a), int(b)) for g in groups for i, a in enumerate(g) for b in g[i + 1 :]
        if changed is None or changed[a] or changed[b]
    )
    got = _result(groups, changed, n)
    assert list(got._group_pairs()) == expected
    assert got.n_group_pairs() == len(expected)

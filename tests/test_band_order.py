"""A band's keys ordered by the compiled sort (simdoc.kernels_sort.argsort64) exactly as numpy's stable argsort orders them.

The LSH index sorts each band's 64-bit keys (one a document) to find its buckets; the compiled
sort and numpy's way (simdoc.lsh.stable_order) must give the same order, ties in document
order, whatever the keys: uniform hashes, many equal keys (exact copies share every band key),
or keys crowded into a few of the counting sort's buckets (its merge-sort way out).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import kernels, lsh

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba not in use")

KINDS = ["uniform", "repeats", "one value", "top bits shared", "small values", "two values", "descending"]


def _keys(n: int, kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    if kind == "repeats":
        keys = rng.choice(keys[: max(1, n // 20)], n) if n else keys
    elif kind == "one value":
        keys[:] = keys[0] if n else 0
    elif kind == "top bits shared":  # every key in one bucket of the counting sort: merge sort
        keys = (keys >> np.uint64(30)) | np.uint64(0xC000000000000000)
    elif kind == "small values":
        keys = keys >> np.uint64(rng.integers(50, 64))
    elif kind == "two values":
        keys = np.where(rng.random(n) < 0.5, np.uint64(2**64 - 1), np.uint64(0)).astype(np.uint64)
    elif kind == "descending":
        keys = np.sort(keys)[::-1].copy()
    return keys


def _numpy(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    return order, keys[order]


@settings(max_examples=150, deadline=None)
@given(n=st.one_of(st.integers(0, 70), st.integers(0, 6000)), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1), bits=st.integers(1, 12))
def test_the_compiled_order_is_numpys_stable_argsort(n, kind, seed, bits):
    from simdoc import kernels_sort

    keys = _keys(n, kind, seed)
    order, ordered = np.empty(n, np.int64), np.empty(n, np.uint64)
    kernels_sort.argsort64(keys, order, ordered, np.zeros((1 << bits) + 1, np.int64))
    want_order, want_keys = _numpy(keys)
    assert np.array_equal(order, want_order)
    assert np.array_equal(ordered, want_keys)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5000), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1))
def test_stable_order_is_the_same_by_numpy_and_compiled(n, kind, seed):
    keys = _keys(n, kind, seed)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(lsh, "_compiled_order", lambda n: False)
        by_numpy = lsh.stable_order(keys)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(lsh, "_compiled_order", lambda n: True)
        compiled = lsh.stable_order(keys)
    want = _numpy(keys)
    for got in (by_numpy, compiled):
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_band_takes_the_compiled_sort_once_numba_is_loaded_or_it_is_long(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert not lsh._compiled_order(1000)  # a run that only bands again, small: numba not imported for it
    assert lsh._compiled_order(lsh.COMPILED_ORDER_AFTER)
    monkeypatch.setitem(sys.modules, "numba", object())
    assert lsh._compiled_order(1000)

"""The compiled 64-bit sorts (simdoc.kernels_sort) against numpy, on rows of every shape."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import kernels

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba not in use")

KINDS = ["uniform", "top bits shared", "high halves shared", "small values", "constant bytes", "repeats", "one value", "descending"]


def _row(n: int, kind: str, seed: int) -> np.ndarray:
    # Uniform hashes (what the kernels sort), and rows the radix passes on the top bits leave
    # far out of order (shared top bits, small numbers), or whose bytes are all the same but one.
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    if kind == "top bits shared":
        values = (values >> np.uint64(24)) | (np.uint64(rng.integers(0, 3)) << np.uint64(62))
    elif kind == "high halves shared":
        values = (values & np.uint64(0xFFFF)) | np.uint64(0xABCDEF0100000000)
    elif kind == "small values":
        values = values >> np.uint64(rng.integers(40, 64))
    elif kind == "constant bytes":
        shift = np.uint64(8 * rng.integers(0, 8))
        values = (values & (np.uint64(0xFF) << shift)) | np.uint64(0x0102030405060708)
    elif kind == "repeats":
        values = rng.choice(values[: max(1, n // 50)], n)
    elif kind == "one value":
        values[:] = values[0] if n else 0
    elif kind == "descending":
        values = np.sort(values)[::-1].copy()
    return values


SIZES = st.one_of(st.integers(0, 40), st.integers(0, 9000))


@settings(max_examples=120, deadline=None)
@given(SIZES, st.sampled_from(KINDS), st.integers(0, 2**32))
def test_sort64_equals_np_sort(n, kind, seed):
    from simdoc.kernels_sort import sort64

    values = _row(n, kind, seed)
    row = values.copy()
    sort64(row, np.empty(n, np.uint64))
    assert np.array_equal(row, np.sort(values))


@settings(max_examples=80, deadline=None)
@given(SIZES, st.sampled_from(KINDS), st.integers(0, 2**32))
def test_sort64_lsd_equals_np_sort(n, kind, seed):
    from simdoc.kernels_sort import sort64_lsd

    values = _row(n, kind, seed)
    row = values.copy()
    sort64_lsd(row, np.empty(n, np.uint64))
    assert np.array_equal(row, np.sort(values))


@settings(max_examples=120, deadline=None)
@given(SIZES, st.sampled_from(KINDS), st.integers(0, 2**32), st.integers(0, 5))
def test_sort64_fold_equals_np_unique(n, kind, seed, pos):
    # What verification writes: each value once, sorted, with its count, from out[pos] on.
    from simdoc.kernels_sort import sort64_fold

    values = _row(n, kind, seed)
    data = np.full(pos + n, 7, np.uint64)
    counts = np.full(pos + n, 7, np.uint32)
    m = sort64_fold(values.copy(), np.empty(n, np.uint64), data, counts, pos)
    want, want_counts = np.unique(values, return_counts=True)
    assert m == len(want)
    assert np.array_equal(data[pos : pos + m], want)
    assert np.array_equal(counts[pos : pos + m], want_counts)
    assert (data[:pos] == 7).all() and (counts[:pos] == 7).all()


def test_sort64_fold_puts_late_values_in_place_among_those_folded():
    # Values the radix passes leave out of order (they share the top bits), smaller ones
    # after larger ones, some equal to values already folded: counted where they belong.
    from simdoc.kernels_sort import sort64_fold

    top = np.uint64(0x5A5A) << np.uint64(48)
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.integers(0, 2**63, 200, dtype=np.uint64) | np.uint64(1 << 63), top + np.arange(50, 0, -1, dtype=np.uint64)])
    values = np.concatenate([values, values[::7]])
    data = np.zeros(len(values), np.uint64)
    counts = np.zeros(len(values), np.uint32)
    m = sort64_fold(values.copy(), np.empty(len(values), np.uint64), data, counts, 0)
    want, want_counts = np.unique(values, return_counts=True)
    assert np.array_equal(data[:m], want) and np.array_equal(counts[:m], want_counts)

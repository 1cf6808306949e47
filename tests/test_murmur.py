"""murmur: MurmurHash3 of token windows in numpy equals the mmh3 package."""

import mmh3
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.murmur import murmur_windows


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=40), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_murmur_windows_equal_mmh3(tokens, k, seed):
    arr = np.array(tokens, dtype=np.uint32)
    got = murmur_windows(arr, k, seed=seed)
    want = [mmh3.hash(arr[i : i + k].astype("<u4").tobytes(), seed, signed=False) for i in range(len(arr) - k + 1)]
    assert got.tolist() == want

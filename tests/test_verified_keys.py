"""The verified-pairs table's keys (simdoc.store.verified.pair_keys): what its docstring says they are,
computed a pair at a time from the bytes, and pinned values (the keys are stored in indexes)."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.store.verified import VerifiedPairs, pair_keys


def reference_key(a: bytes, b: bytes) -> list[int]:
    """BLAKE2b-128 of the smaller identity then the larger (as bytes), as two big-endian halves,
    then the high half of each identity in that order."""
    first, second = sorted([a, b])
    d = hashlib.blake2b(first + second, digest_size=16).digest()
    return [int.from_bytes(d[:8], "big"), int.from_bytes(d[8:], "big"), int.from_bytes(first[:8], "big"), int.from_bytes(second[:8], "big")]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40),
    st.booleans(),
)
def test_pair_keys_match_a_pair_at_a_time(idents, pairs, same_high):
    if same_high:  # identities that differ only in their low halves: the order is decided there
        idents = [idents[0][:8] + x[8:] for x in idents]
    ident = np.frombuffer(b"".join(idents), np.uint8).reshape(-1, 16)
    pairs = [(a % len(idents), b % len(idents)) for a, b in pairs]
    left = np.array([a for a, _ in pairs], np.int64)
    right = np.array([b for _, b in pairs], np.int64)
    got = pair_keys(ident, left, right)
    assert got.shape == (len(pairs), 4) and got.dtype == np.uint64
    assert got.tolist() == [reference_key(idents[a], idents[b]) for a, b in pairs]
    # Unordered: a pair's key does not depend on which side a document is on.
    assert np.array_equal(pair_keys(ident, right, left), got)


def test_pair_keys_pinned():
    ident = np.arange(32, dtype=np.uint8).reshape(2, 16)
    assert pair_keys(ident, np.array([0, 1]), np.array([1, 1])).tolist() == [
        [17553391620651556052, 11481784659327058719, 283686952306183, 1157726452361532951],
        [15486553947318304841, 4298450072822756458, 1157726452361532951, 1157726452361532951],
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**64 - 1)), min_size=0, max_size=40, unique=True),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2**64 - 1)), max_size=20),
    st.integers(0, 2**32),
)
def test_lookup_finds_exactly_the_stored_keys(stored, asked, seed):
    """Keys of a few high halves only (many entries share one): each asked key is found with its
    own Jaccards when stored, and only then, as a dict would say."""
    rng = np.random.default_rng(seed)
    asked = asked + [s for s in stored if rng.random() < 0.5]
    keys = np.array([[h, lo, 0, 0] for h, lo in stored], dtype=np.uint64).reshape(-1, 4)
    jac = rng.random((len(stored), 2))
    table = VerifiedPairs()
    table.add(keys, jac)
    keys, jac = table.merged()
    want = {(int(k[0]), int(k[1])): j for k, j in zip(keys, jac)}
    q = np.array([[h, lo, 0, 0] for h, lo in asked], dtype=np.uint64).reshape(-1, 4)
    found, got = VerifiedPairs(keys, jac).lookup(q)
    for i, (h, lo) in enumerate(asked):
        assert found[i] == ((h, lo) in want)
        assert np.array_equal(got[i], want.get((h, lo), np.zeros(2)))

"""BLAKE2b-128 of many strings in one compiled call (simdoc.kernels_blake): the digests hashlib gives."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.read import identity, member_identities
from simdoc.kernels_blake import blake2b_16

_LENGTHS = st.lists(st.integers(0, 300) | st.sampled_from([127, 128, 129, 255, 256, 257, 1000]), max_size=12)


@settings(max_examples=80, deadline=None)
@given(lengths=_LENGTHS, data=st.data())
def test_each_digest_is_hashlibs(lengths, data):
    raw = data.draw(st.binary(min_size=sum(lengths), max_size=sum(lengths)))
    bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    got = blake2b_16(raw, bounds)
    assert got.shape == (len(lengths), 16) and got.dtype == np.uint8
    assert [g.tobytes() for g in got] == [hashlib.blake2b(raw[a:b], digest_size=16).digest() for a, b in zip(bounds[:-1], bounds[1:])]


def test_identities_by_the_kernel_are_member_identities():
    """As simdoc.stages.range_rows makes a range's identities: the digests and the tail, hashed at once."""
    digests = np.frombuffer(bytes(range(80)), dtype=np.uint8).reshape(5, 16)
    for how in ("jsonl", "warc", "parquet"):
        got = member_identities(digests, how)
        assert [g.tobytes() for g in got] == [identity(d.tobytes(), how, f"f/#{i}") for i, d in enumerate(digests)]
    assert member_identities(digests[:0], "jsonl").shape == (0, 16)


def test_without_numba_hashlib_gives_them(monkeypatch):
    from simdoc import kernels_blake

    monkeypatch.setattr(kernels_blake, "ENABLED", False)
    raw = bytes(range(200)) * 3
    bounds = np.array([0, 0, 1, 128, 129, 600], dtype=np.int64)
    got = blake2b_16(raw, bounds)
    assert [g.tobytes() for g in got] == [hashlib.blake2b(raw[a:b], digest_size=16).digest() for a, b in zip(bounds[:-1], bounds[1:])]

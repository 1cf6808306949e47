"""BLAKE2b-128 of many strings in one compiled call (simdoc.kernels_blake, through simdoc.digests): the digests hashlib gives."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import kernels
from simdoc.corpus.read import identity, member_identities
from simdoc.digests import blake2b_16  # the compiled loop where numba is (the kernels are wanted outside a small stage)

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


def test_where_the_kernels_are_not_wanted_hashlib_gives_them_and_numba_is_not_loaded():
    """A small stage (simdoc.kernel_choice) hashes by hashlib, in a process that has not loaded numba."""
    code = (
        "import hashlib, sys\n"
        "import numpy as np\n"
        "from simdoc import digests, kernel_choice\n"
        "raw = bytes(range(200)) * 3\n"
        "bounds = np.array([0, 0, 1, 128, 129, 600], dtype=np.int64)\n"
        "with kernel_choice.reads(100):\n"
        "    got = digests.blake2b_16(raw, bounds)\n"
        "want = [hashlib.blake2b(raw[a:b], digest_size=16).digest() for a, b in zip(bounds[:-1], bounds[1:])]\n"
        "assert [g.tobytes() for g in got] == want, 'not the hashlib digests'\n"
        "assert 'numba' not in sys.modules, 'numba loaded'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")
def test_where_they_are_wanted_the_kernel_gives_the_hashlib_digests_too():
    raw = bytes(range(200)) * 3
    bounds = np.array([0, 0, 1, 128, 129, 600], dtype=np.int64)
    got = blake2b_16(raw, bounds)
    assert [g.tobytes() for g in got] == [hashlib.blake2b(raw[a:b], digest_size=16).digest() for a, b in zip(bounds[:-1], bounds[1:])]

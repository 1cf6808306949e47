"""BLAKE2b-128 of many byte strings of one buffer, each a document's digest or identity.

One call hashes ``raw[bounds[i]:bounds[i + 1]]`` for every i: by the compiled
loop (:mod:`simdoc.kernels_blake`) where the kernels are wanted
(:func:`simdoc.kernel_choice.wanted`), else by ``hashlib`` one string at a
time. Both give the same bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from simdoc.kernel_choice import wanted


def blake2b_16(raw: bytes | np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``hashlib.blake2b(raw[bounds[i]:bounds[i + 1]], digest_size=16).digest()`` of each i, as an (n, 16) uint8 array."""
    if wanted():
        from simdoc import kernels_blake  # here: numba is imported only by a run that calls a kernel

        return kernels_blake.blake2b_16(raw, bounds)
    n = len(bounds) - 1
    out = np.empty((max(n, 0), 16), dtype=np.uint8)
    view = memoryview(np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) else raw)
    at = np.asarray(bounds, dtype=np.int64).tolist()
    for i in range(n):
        out[i] = np.frombuffer(hashlib.blake2b(view[at[i] : at[i + 1]], digest_size=16).digest(), dtype=np.uint8)
    return out

"""BLAKE2b-128 of many short byte strings in one compiled call (issue 29).

A document's digest is ``hashlib.blake2b(its UTF-8, digest_size=16)`` and its identity a
BLAKE2b-128 of that digest and a few bytes more (:func:`simdoc.corpus.read.identity`). A range
of 10^4 records of ~360 characters made two ``hashlib`` calls and two ``bytes`` objects per
record for them, more than hashing them cost. :func:`blake2b_16` hashes all the strings of a
buffer (``raw[bounds[i]:bounds[i + 1]]``) in one call, as RFC 7693 defines BLAKE2b (no key, a
16-byte digest): the same bytes ``hashlib`` gives, which the tests check over random lengths
(0, and either side of each 128-byte block).
"""

from __future__ import annotations

import numpy as np

from simdoc.jit import CACHE, ENABLED

_IV = np.array(
    [
        0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
        0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179,
    ],
    dtype=np.uint64,
)


def blake2b_16(raw: bytes | np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``hashlib.blake2b(raw[bounds[i]:bounds[i + 1]], digest_size=16).digest()`` of each i, as an
    (n, 16) uint8 array. Callers go through :func:`simdoc.digests.blake2b_16`, which hashes with
    ``hashlib`` where the kernels are not wanted (no numba, a small stage)."""
    n = len(bounds) - 1
    out = np.empty((max(n, 0), 16), dtype=np.uint8)
    if n <= 0:
        return out
    array = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    if not ENABLED:
        raise RuntimeError("kernels_blake.blake2b_16 needs numba: call simdoc.digests.blake2b_16")
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False  # one build, for read-only bytes
    _blake2b_16(array, bounds, _IV, out)
    return out


if ENABLED:
    from numba import njit, uint64

    @njit(cache=CACHE, nogil=True, inline="always")
    def _rotr(x, n):
        return (x >> uint64(n)) | (x << uint64(64 - n))

    @njit(cache=CACHE, nogil=True, inline="always")
    def _g(a, b, c, d, x, y):
        a = a + b + x
        d = _rotr(d ^ a, 32)
        c = c + d
        b = _rotr(b ^ c, 24)
        a = a + b + y
        d = _rotr(d ^ a, 16)
        c = c + d
        b = _rotr(b ^ c, 63)
        return a, b, c, d

    @njit(cache=CACHE, nogil=True, inline="always")
    def _compress(h, m, iv, t, last):
        # The rounds written out, each message word a local: the permutations are constants.
        m0, m1, m2, m3, m4, m5, m6, m7 = m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]
        m8, m9, m10, m11, m12, m13, m14, m15 = m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]
        v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
        v8, v9, v10, v11, v12, v13, v14, v15 = iv[0], iv[1], iv[2], iv[3], iv[4] ^ t, iv[5], iv[6], iv[7]
        if last:
            v14 = ~v14
        # round 1
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m0, m1)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m2, m3)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m4, m5)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m6, m7)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m8, m9)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m10, m11)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m12, m13)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m14, m15)
        # round 2
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m14, m10)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m4, m8)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m9, m15)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m13, m6)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m1, m12)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m0, m2)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m11, m7)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m5, m3)
        # round 3
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m11, m8)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m12, m0)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m5, m2)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m15, m13)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m10, m14)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m3, m6)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m7, m1)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m9, m4)
        # round 4
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m7, m9)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m3, m1)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m13, m12)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m11, m14)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m2, m6)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m5, m10)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m4, m0)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m15, m8)
        # round 5
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m9, m0)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m5, m7)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m2, m4)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m10, m15)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m14, m1)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m11, m12)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m6, m8)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m3, m13)
        # round 6
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m2, m12)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m6, m10)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m0, m11)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m8, m3)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m4, m13)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m7, m5)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m15, m14)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m1, m9)
        # round 7
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m12, m5)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m1, m15)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m14, m13)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m4, m10)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m0, m7)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m6, m3)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m9, m2)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m8, m11)
        # round 8
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m13, m11)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m7, m14)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m12, m1)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m3, m9)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m5, m0)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m15, m4)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m8, m6)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m2, m10)
        # round 9
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m6, m15)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m14, m9)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m11, m3)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m0, m8)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m12, m2)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m13, m7)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m1, m4)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m10, m5)
        # round 10
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m10, m2)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m8, m4)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m7, m6)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m1, m5)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m15, m11)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m9, m14)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m3, m12)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m13, m0)
        # round 11
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m0, m1)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m2, m3)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m4, m5)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m6, m7)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m8, m9)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m10, m11)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m12, m13)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m14, m15)
        # round 12
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m14, m10)
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m4, m8)
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m9, m15)
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m13, m6)
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m1, m12)
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m0, m2)
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m11, m7)
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m5, m3)
        h[0] ^= v0 ^ v8
        h[1] ^= v1 ^ v9
        h[2] ^= v2 ^ v10
        h[3] ^= v3 ^ v11
        h[4] ^= v4 ^ v12
        h[5] ^= v5 ^ v13
        h[6] ^= v6 ^ v14
        h[7] ^= v7 ^ v15

    @njit(cache=CACHE, nogil=True)
    def _blake2b_16(raw, bounds, iv, out):
        h = np.empty(8, np.uint64)
        m = np.empty(16, np.uint64)
        for i in range(bounds.shape[0] - 1):
            start, end = bounds[i], bounds[i + 1]
            for k in range(8):
                h[k] = iv[k]
            h[0] ^= uint64(0x01010000 ^ 16)  # no key, a 16-byte digest
            p = start
            while True:
                take = min(end - p, 128)
                if take == 128:  # eight bytes a word, little-endian (a load, once compiled)
                    for w in range(16):
                        q = p + 8 * w
                        m[w] = (
                            uint64(raw[q]) | (uint64(raw[q + 1]) << uint64(8)) | (uint64(raw[q + 2]) << uint64(16))
                            | (uint64(raw[q + 3]) << uint64(24)) | (uint64(raw[q + 4]) << uint64(32))
                            | (uint64(raw[q + 5]) << uint64(40)) | (uint64(raw[q + 6]) << uint64(48)) | (uint64(raw[q + 7]) << uint64(56))
                        )
                else:
                    m[:] = 0
                    for j in range(take):
                        m[j >> 3] |= uint64(raw[p + j]) << uint64((j & 7) * 8)
                p += take
                if p >= end:
                    _compress(h, m, iv, uint64(p - start), True)
                    break
                _compress(h, m, iv, uint64(p - start), False)
            for j in range(16):
                out[i, j] = (h[j >> 3] >> uint64((j & 7) * 8)) & uint64(0xFF)

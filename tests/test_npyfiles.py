"""store.npyfiles: CRC-32 maths of the checked .npy files."""

import random


def test_crc32_combine_matches_zlib():
    import zlib

    from simdoc.store.npyfiles import crc32_combine

    rng = random.Random(3)
    for la, lb in [(0, 5), (7, 0), (1, 1), (1000, 12345), (3, 1 << 20), (rng.randrange(10**5), rng.randrange(10**6))]:
        a, b = rng.randbytes(la), rng.randbytes(lb)
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_fast_crc32_is_zlibs():
    # Indexes record zlib's CRC-32; the SIMD one that computes them must agree, chained too.
    import zlib

    import numpy as np

    from simdoc.store.npyfiles import crc32

    rng = random.Random(5)
    for n in (0, 1, 15, 16, 17, 63, 64, 65, 4095, 1 << 20, rng.randrange(10**6)):
        data = rng.randbytes(n)
        assert crc32(data) == zlib.crc32(data)
        cut = rng.randrange(n + 1)
        assert crc32(data[cut:], crc32(data[:cut])) == zlib.crc32(data)
        arr = np.frombuffer(data[: n - n % 4], dtype=np.uint32)  # as the workers pass arrays
        assert crc32(arr.data) == zlib.crc32(arr.tobytes())

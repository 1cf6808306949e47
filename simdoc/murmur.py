"""MurmurHash3 (x86, 32-bit) in numpy: every window of k tokens hashed at once.

The Murmur rounds are written out with numpy ``uint32`` arithmetic, which
wraps modulo 2**32 exactly as the reference C code does; tests pin
:func:`murmur_windows` against the ``mmh3`` package. :func:`fmix32`, the
finaliser, is a bijection of 32-bit integers, which MinHash uses to
scramble its permutations (:mod:`simdoc.minhash`). The compiled kernels
(:mod:`simdoc.kernels`) compute the same hashes; this is their reference.
"""

from __future__ import annotations

import numpy as np

_C1 = np.uint32(0xCC9E2D51)


_C2 = np.uint32(0x1B873593)


_M5 = np.uint32(5)


_N1 = np.uint32(0xE6546B64)


_F1 = np.uint32(0x85EBCA6B)


_F2 = np.uint32(0xC2B2AE35)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _premix(tokens: np.ndarray) -> np.ndarray:
    """The per-block part of MurmurHash3 (k1 = rotl(t*c1, 15)*c2), done once per token."""
    k1 = tokens * _C1
    k1 = _rotl(k1, 15)
    k1 *= _C2
    return k1


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, in place on a uint32 array; returns it."""
    h ^= h >> np.uint32(16)
    h *= _F1
    h ^= h >> np.uint32(13)
    h *= _F2
    h ^= h >> np.uint32(16)
    return h


def murmur_windows(tokens: np.ndarray, k: int, starts: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """MurmurHash3_x86_32 of every window of k uint32 tokens.

    Parameters
    ----------
    tokens : ndarray of shape (n,), dtype uint32
    k : int
        Window length; the hashed key is 4*k bytes.
    starts : ndarray of int, optional
        Window start positions; default every position 0..n-k.

    Returns
    -------
    ndarray of shape (n_windows,), dtype uint32
        Equal to ``mmh3.hash(tokens[s:s+k].astype('<u4').tobytes(), seed, signed=False)``.
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.uint32)
    blocks = _premix(tokens)
    if starts is None:
        n_win = max(len(tokens) - k + 1, 0)
        h = np.full(n_win, seed, dtype=np.uint32)
        for j in range(k):
            h ^= blocks[j : j + n_win]
            h[:] = _rotl(h, 13)
            h *= _M5
            h += _N1
    else:
        starts = np.asarray(starts, dtype=np.int64)
        h = np.full(len(starts), seed, dtype=np.uint32)
        for j in range(k):
            h ^= blocks[starts + j]
            h[:] = _rotl(h, 13)
            h *= _M5
            h += _N1
    h ^= np.uint32((4 * k) & 0xFFFFFFFF)
    return fmix32(h)

"""The assembled peer's numba kernels and batch reader (see assembled.py for the pipeline).

Kernels are compiled with ``cache=True``, as a user would: the first run on
a machine compiles them (tens of seconds), later runs load them from
__pycache__.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from numba import njit, prange

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import jsonl_file, normalize, split_member  # noqa: E402

PACK_BITS = 12
BIG_CP = 1 << PACK_BITS  # code points from here on do not fit the exact packing
K_MAX = 60 // PACK_BITS  # 5

_U = np.uint64
_M1 = _U(0xFF51AFD7ED558CCD)
_M2 = _U(0xC4CEB9FE1A85EC53)
_POLY = _U(0x9E3779B97F4A7C15)
_TOP = _U(1 << 63)
_S33 = _U(33)
_S12 = _U(PACK_BITS)
_S60 = _U(60)
_LOW12 = _U(BIG_CP - 1)


@njit(cache=True, inline="always")
def fmix64(x):
    x ^= x >> _S33
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


@njit(cache=True, inline="always")
def poly_hash(arr, s, n):
    """63-bit hash of n code points with the top bit set (windows holding a big code point)."""
    h = _U(n)
    for p in range(s, s + n):
        h = (h ^ _U(arr[p])) * _POLY
        h ^= h >> _S33
    return fmix64(h) | _TOP


@njit(parallel=True, cache=True)
def normalise_ascii(buf, starts, lens, out, nlen):
    """Lowercase + collapse whitespace runs + strip, per document, into out.

    nlen[d] gets the normalised length, or -1 if the document has a byte
    >= 0x80 (then the reference normalisation in Python takes it).
    """
    for d in prange(starts.size):
        s = starts[d]
        e = s + lens[d]
        w = s
        pending = False
        ok = True
        for p in range(s, e):
            c = buf[p]
            if c >= 128:
                ok = False
                break
            if c == 32 or (c >= 9 and c <= 13) or (c >= 28 and c <= 31):
                if w > s:
                    pending = True
            else:
                if pending:
                    out[w] = 32
                    w += 1
                    pending = False
                if c >= 65 and c <= 90:
                    c += 32
                out[w] = c
                w += 1
        nlen[d] = w - s if ok else -1


@njit(parallel=True, cache=True)
def hash_shingles(arr, starts, lens, dest, out, k):
    """64-bit hashes of every k-gram of each document (uint8 or uint32 units) into out[dest[d]:]."""
    mask = (_U(1) << _U(PACK_BITS * k)) - _U(1)
    for d in prange(starts.size):
        n = lens[d]
        if n <= 0:
            continue
        s = starts[d]
        o = dest[d]
        if n < k:  # one shingle, the whole text; its length in bits 60-62 keeps it apart
            key = _U(0)
            big = False
            for p in range(s, s + n):
                c = _U(arr[p])
                big = big or c >= _U(BIG_CP)
                key = (key << _S12) | (c & _LOW12)
            out[o] = fmix64(poly_hash(arr, s, n) if big else key | (_U(n) << _S60))
            continue
        key = _U(0)
        last_big = -k
        for i in range(n):
            c = _U(arr[s + i])
            if c >= _U(BIG_CP):
                last_big = i
            key = ((key << _S12) | (c & _LOW12)) & mask
            if i >= k - 1:
                if i - last_big < k:
                    out[o + i - k + 1] = fmix64(poly_hash(arr, s + i - k + 1, k))
                else:
                    out[o + i - k + 1] = fmix64(key)


def sort_each(flat: np.ndarray, offsets: np.ndarray, threads: int) -> None:
    """Sort each document's hashes in place: numpy's SIMD sort, one call a document.

    numba's own sort was 5x slower here; np.sort releases the GIL, so the
    documents are split over ``threads`` threads.
    """
    bounds = offsets.tolist()

    def part(lo: int, hi: int) -> None:
        for d in range(lo, hi):
            if bounds[d + 1] - bounds[d] > 1:
                flat[bounds[d]:bounds[d + 1]].sort()

    n = len(bounds) - 1
    if threads <= 1 or n < 2:
        part(0, n)
        return
    from concurrent.futures import ThreadPoolExecutor

    cuts = [n * t // threads for t in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(part, cuts[t], cuts[t + 1]) for t in range(threads)]:
            f.result()


@njit(parallel=True, cache=True)
def count_distinct(flat, offsets, nuniq):
    """Distinct values of each document's sorted hashes, moved to the front of its run."""
    for d in prange(offsets.size - 1):
        s = offsets[d]
        e = offsets[d + 1]
        if e == s:
            nuniq[d] = 0
            continue
        w = s + 1
        for p in range(s + 1, e):
            if flat[p] != flat[w - 1]:
                flat[w] = flat[p]
                w += 1
        nuniq[d] = w - s


@njit(parallel=True, cache=True)
def compact(flat, offsets, nuniq, out, dest):
    """Copy each document's first nuniq[d] values to out[dest[d]:]."""
    for d in prange(offsets.size - 1):
        s = offsets[d]
        o = dest[d]
        for p in range(nuniq[d]):
            out[o + p] = flat[s + p]


@njit(parallel=True, cache=True)
def intersect_counts(flat, starts, sizes, a, b, inter):
    """|A & B| of each pair (a[p], b[p]) of sorted distinct hash runs, by a merge."""
    for p in prange(a.size):
        i = starts[a[p]]
        ie = i + sizes[a[p]]
        j = starts[b[p]]
        je = j + sizes[b[p]]
        c = 0
        while i < ie and j < je:
            x = flat[i]
            y = flat[j]
            if x == y:
                c += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        inter[p] = c


@njit(parallel=True, cache=True)
def count_equal(sigs, a, b, out):
    """Equal sketch slots of each pair (the numerator of the sketch estimate)."""
    m = sigs.shape[1]
    for p in prange(a.size):
        x = sigs[a[p]]
        y = sigs[b[p]]
        c = 0
        for t in range(m):
            if x[t] == y[t]:
                c += 1
        out[p] = c


# --------------------------------------------------------------------------
# reading and hashing one batch


def read_batch(root: str, names: list[str]) -> tuple[list[bytes], list[bool]]:
    """UTF-8 bytes of each document, and whether it is a file (a file's BOM is dropped)."""
    raws: list[bytes] = []
    is_file: list[bool] = []
    i = 0
    while i < len(names):
        m = split_member(names[i])
        if m is None:
            with open(os.path.join(root, names[i]), "rb") as fh:
                raws.append(fh.read())
            is_file.append(True)
            i += 1
            continue
        # a run of members of one JSON Lines file: one read and one json.loads
        rel, lines = m[0], [m[1]]
        i += 1
        while i < len(names) and (mm := split_member(names[i])) is not None and mm[0] == rel:
            lines.append(mm[1])
            i += 1
        objs = json.loads(b"[" + b",".join(jsonl_file(os.path.join(root, rel)).lines(lines)) + b"]")
        raws.extend(o["text"].encode("utf-8", "surrogatepass") for o in objs)
        is_file.extend(False for _ in objs)
    return raws, is_file


def reference_codepoints(raw: bytes, is_file: bool) -> np.ndarray:
    text = raw.decode("utf-8", errors="replace")
    if is_file and text.startswith("\ufeff"):
        text = text[1:]
    return np.frombuffer(normalize(text).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


class Workspace:
    """Buffers kept from batch to batch: a fresh page costs ~8 us on this VM, so reuse them."""

    def __init__(self):
        self.bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype) -> np.ndarray:
        b = self.bufs.get(name)
        if b is None or b.size < n:
            b = self.bufs[name] = np.empty(max(n, int(1.25 * b.size) if b is not None else n),
                                           dtype=dtype)
        return b[:n]


def hash_batch(raws: list[bytes], is_file: list[bool], k: int,
               ws: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(flat uint64 shingle hashes, int64 offsets of n + 1) of a batch of documents.

    With a workspace, the hashes live in its buffer until the next call.
    """
    ws = ws or Workspace()
    n = len(raws)
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(raws), dtype=np.uint8)
    norm = ws.get("norm", buf.size, np.uint8)
    nlen = np.empty(n, dtype=np.int64)
    normalise_ascii(buf, starts, lens, norm, nlen)
    slow = np.flatnonzero(nlen < 0)
    cps = [reference_codepoints(raws[d], is_file[d]) for d in slow.tolist()]
    sizes = nlen.copy()
    if cps:
        sizes[slow] = [c.size for c in cps]
    counts = np.where(sizes <= 0, 0, np.where(sizes < k, 1, sizes - k + 1))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = ws.get("flat", int(offsets[-1]), np.uint64)
    ascii_lens = nlen.copy()
    ascii_lens[slow] = 0
    hash_shingles(norm, starts, ascii_lens, offsets[:-1], flat, k)
    if cps:
        clen = np.array([c.size for c in cps], dtype=np.int64)
        cstart = np.zeros(len(cps), dtype=np.int64)
        np.cumsum(clen[:-1], out=cstart[1:])
        hash_shingles(np.concatenate(cps), cstart, clen, offsets[:-1][slow], flat, k)
    return flat, offsets

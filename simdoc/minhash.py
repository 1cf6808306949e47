"""MinHash signatures: n hash functions standing in for n random permutations.

For a set S and a permutation π of the shingle universe, min π(S) equals
min π(T) with probability exactly |S ∩ T| / |S ∪ T| (MMDS §3.3.3), so the
fraction of equal positions in two signatures estimates Jaccard similarity,
with standard error sqrt(J(1-J)/num_perm).

The hash family
---------------
Permutation p is ``h_p(x) = fmix32((a_p * x + b_p) mod 2**32)`` with ``a_p``
odd. An affine map with an odd multiplier is a bijection of the 32-bit
integers and MurmurHash3's finaliser ``fmix32`` is a bijection too, so every
``h_p`` is a true permutation of the uint32 shingle universe: it adds no
collisions, and the finaliser's avalanche removes the regular low bits of a
bare affine map that bias low-similarity estimates. The arithmetic is
deliberately modulo 2**32 in ``uint32``: no step needs a wider intermediate,
so nothing can overflow. (The common ``(a*x + b) mod (2**61 - 1)`` with
``a < 2**61`` and 32-bit ``x`` evaluated in uint64 overflows before the
modulo and is not the family it claims to be.)

``a_p`` and ``b_p`` are drawn from ``seed`` with SplitMix64, in plain Python
integers, so they are the same on every platform and numpy version; they are
stored in the index and handed back on load rather than regenerated.

Textbook examples with explicit row hash functions (MMDS Fig. 3.4) go
through :func:`signature_matrix` with a list of callables.

One-permutation hashing (``scheme="oph"``)
------------------------------------------
The classic scheme evaluates every shingle under every permutation:
num_perm hash evaluations per shingle. One-permutation hashing (Li, Owen &
Zhang 2012) hashes each shingle once to 64 bits, uses the top half to pick
one of num_perm bins and keeps the minimum of the low half per bin; a bin
that no shingle falls in borrows the value of the first non-empty bin on a
seeded probe sequence ("optimal densification", Shrivastava 2017). The
fraction of equal positions is still an unbiased estimate of Jaccard
similarity; its spread is that of the classic scheme for sets much larger
than num_perm, and somewhat wider for small sets, where densification
copies values. It costs one hash per shingle instead of num_perm, which is
why it is the default (:data:`DEFAULT_SCHEME`); an index keeps the scheme it
was built with. The hash
``splitmix64(x + key)`` is a bijection of the 64-bit integers, so distinct
shingles never collide before binning. benchmarks/RESULTS.md has both
schemes' speed and estimation error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from simdoc.errors import UsageError
from simdoc.kernel_choice import wanted
from simdoc.murmur import fmix32
from simdoc.shinglesets import ShingleSets

DEFAULT_NUM_PERM = 128
DEFAULT_SEED = 1
SCHEMES = ("classic", "oph")
DEFAULT_SCHEME = "oph"
EMPTY = np.uint32(0xFFFFFFFF)  # signature of an empty set: larger than any hash
_MASK64 = (1 << 64) - 1
# Hash values computed at once: num_perm x BLOCK uint32 (16 MiB at 128 permutations).
BLOCK = 1 << 15

HashBlock = Callable[[np.ndarray], np.ndarray]


def splitmix64(seed: int, n: int) -> list[int]:
    """The first n outputs of SplitMix64 started at ``seed`` (64-bit ints)."""
    state = seed & _MASK64
    out = []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        out.append(z ^ (z >> 31))
    return out


class MinHasher:
    """A seeded family of ``num_perm`` permutations of the 32-bit shingle universe.

    Parameters
    ----------
    num_perm : int
        Signature length (number of hash functions), 1..65536.
    seed : int
        Draws the family; the same seed gives the same signatures everywhere.
    a, b : ndarray of shape (num_perm,), dtype uint32, optional
        The stored family, to rebuild a hasher from an index without
        regenerating it (then ``seed`` is only recorded).
    scheme : {"classic", "oph"}
        num_perm permutations, or one-permutation hashing with densification.

    Examples
    --------
    >>> from simdoc.shingling import shingle_texts
    >>> sets = shingle_texts(["the cat sat on the mat", "the cat sat on a mat"])
    >>> sigs = MinHasher(num_perm=64, seed=7).signatures(sets)
    >>> sigs.shape, sigs.dtype
    ((2, 64), dtype('uint32'))
    """

    def __init__(
        self, num_perm: int = DEFAULT_NUM_PERM, seed: int = DEFAULT_SEED, *, a=None, b=None, scheme: str = DEFAULT_SCHEME
    ) -> None:
        if scheme not in SCHEMES:
            raise UsageError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
        self.scheme = scheme
        if not isinstance(num_perm, (int, np.integer)) or not 1 <= num_perm <= 65536:
            raise UsageError(f"num_perm must be a whole number from 1 to 65536, got {num_perm!r}")
        if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
            raise UsageError(f"seed must be a whole number from 0 to 2**64-1, got {seed!r}")
        self.num_perm = int(num_perm)
        self.seed = int(seed)
        if a is None or b is None:
            draws = splitmix64(self.seed, 2 * self.num_perm)
            a = [(d >> 32) | 1 for d in draws[0::2]]
            b = [d >> 32 for d in draws[1::2]]
        self.a = np.asarray(a, dtype=np.uint32)
        self.b = np.asarray(b, dtype=np.uint32)
        if self.a.shape != (self.num_perm,) or self.b.shape != (self.num_perm,):
            raise ValueError("a and b must have shape (num_perm,)")
        if not np.all(self.a & np.uint32(1)):
            raise ValueError("every multiplier a must be odd, or h_p is not a permutation")
        # One-permutation hashing: the key of the shingle hash and of the probe sequence.
        keys = splitmix64(self.seed ^ 0x6F70682D6B657973, 2)  # "oph-keys"
        self.oph_key = np.uint64(keys[0])
        self.probe_key = np.uint64(keys[1])

    def family(self) -> np.ndarray:
        """What the index stores to rebuild this hasher: (2, num_perm) uint32 a and b."""
        return np.stack([self.a, self.b])

    def hash_values(self, x: np.ndarray) -> np.ndarray:
        """All permutations applied to shingles x: shape (num_perm, len(x)), uint32."""
        x = np.asarray(x, dtype=np.uint32)
        h = self.a[:, None] * x[None, :]
        h += self.b[:, None]
        return fmix32(h)

    def signatures(self, sets: ShingleSets, out: np.ndarray | None = None) -> np.ndarray:
        """MinHash signatures of every set.

        Returns
        -------
        ndarray of shape (n_docs, num_perm), dtype uint32
            Row i is the signature of set i; an empty set's row is all 0xFFFFFFFF.
        """
        if out is None:
            out = np.empty((sets.n_docs, self.num_perm), dtype=np.uint32)
        compiled = wanted()
        if compiled:
            from simdoc import kernels
        if self.scheme == "oph":
            if compiled:
                kernels.oph_csr(sets.indptr, sets.data, self.oph_key, self.probe_key, out)
                return out
            return _oph_rows(sets, self.num_perm, self.oph_key, self.probe_key, out)
        if compiled:
            kernels.minhash_csr(sets.indptr, sets.data, self.a, self.b, out)
            return out
        return _min_rows(sets, self.hash_values, self.num_perm, np.uint32, out)


def signature_matrix(sets: ShingleSets, hash_functions: Sequence[Callable[[np.ndarray], np.ndarray]]) -> np.ndarray:
    """Signatures under explicit row hash functions, as in the textbook.

    Each function maps an int64 array of shingle ids (row numbers) to an
    array of hash values. Returns int64 of shape (n_docs, len(hash_functions));
    an empty set's row holds the int64 maximum.

    Examples
    --------
    MMDS Example 3.8: rows 0..4, h1(x) = x+1 mod 5, h2(x) = 3x+1 mod 5.

    >>> sets = ShingleSets.from_sets([{0, 3}, {2}, {1, 3, 4}, {0, 2, 3}])
    >>> signature_matrix(sets, [lambda x: (x + 1) % 5, lambda x: (3 * x + 1) % 5]).T.tolist()
    [[1, 3, 0, 1], [0, 2, 0, 0]]
    """
    funcs = list(hash_functions)
    if not funcs:
        raise UsageError("at least one hash function is needed")

    def block(x: np.ndarray) -> np.ndarray:
        xi = x.astype(np.int64)
        return np.stack([np.asarray(f(xi), dtype=np.int64) for f in funcs])

    return _min_rows(sets, block, len(funcs), np.int64, None)


def _min_rows(sets: ShingleSets, hash_block: HashBlock, num_perm: int, dtype, out: np.ndarray | None) -> np.ndarray:
    """Per-row minimum of hash_block over each CSR row, BLOCK shingles at a time."""
    indptr, data = sets.indptr, sets.data
    n = sets.n_docs
    fill = np.iinfo(dtype).max
    if out is None:
        out = np.empty((n, num_perm), dtype=dtype)
    out[...] = fill
    i = 0
    while i < n:
        # Take as many whole rows as fit in one block; a row larger than a block goes alone.
        j = int(np.searchsorted(indptr, indptr[i] + BLOCK, side="right")) - 1
        j = min(max(j, i + 1), n)
        lo, hi = int(indptr[i]), int(indptr[j])
        if hi - lo > BLOCK:
            acc = out[i]
            for s in range(lo, hi, BLOCK):
                np.minimum(acc, hash_block(data[s : min(s + BLOCK, hi)]).min(axis=1), out=acc)
        elif hi > lo:
            sizes = np.diff(indptr[i : j + 1])
            rows = np.flatnonzero(sizes > 0)
            starts = indptr[i : j][rows] - lo
            mins = np.minimum.reduceat(hash_block(data[lo:hi]), starts, axis=1)
            out[i + rows] = mins.T
        i = j
    return out


_M64 = (1 << 64) - 1


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def oph_probe(bin_: int, attempt: int, probe_key: int, num_perm: int) -> int:
    """The bin an empty bin borrows from at this attempt (optimal densification)."""
    z = np.array([(probe_key + (bin_ << 32) + attempt) & _M64], dtype=np.uint64)
    return int((_mix64(z)[0] >> np.uint64(32)) * np.uint64(num_perm) >> np.uint64(32))


def oph_densify(sig: np.ndarray, filled: np.ndarray, probe_key: int, num_perm: int) -> np.ndarray:
    """A copy of ``sig`` whose empty bins borrow, as :func:`oph_probe` says, from the first
    filled bin their probe sequence meets (at least one bin must be filled).

    Every empty bin takes its next attempt together, as one array: an empty bin needs about
    num_perm / (filled bins) attempts, so a short document under a long signature asked a
    scalar probe per attempt millions of times (a 1-shingle text at --num-perm 1024: 10^6
    calls, ~12 s; at 65536, hours). One filled bin is every empty bin's only answer.
    """
    dense = sig.copy()
    empty = np.flatnonzero(~filled)
    if not len(empty):
        return dense
    full = np.flatnonzero(filled)
    if len(full) == 1:
        dense[empty] = sig[full[0]]
        return dense
    base = np.uint64(probe_key) + (empty.astype(np.uint64) << np.uint64(32))
    attempt = np.uint64(0)
    with np.errstate(over="ignore"):
        while len(empty):
            src = ((_mix64(base + attempt) >> np.uint64(32)) * np.uint64(num_perm) >> np.uint64(32)).astype(np.int64)
            hit = filled[src]
            dense[empty[hit]] = sig[src[hit]]
            empty, base = empty[~hit], base[~hit]
            attempt += np.uint64(1)
    return dense


def _oph_rows(sets: ShingleSets, num_perm: int, key: np.uint64, probe_key: np.uint64, out: np.ndarray) -> np.ndarray:
    """Reference one-permutation hashing with optimal densification (numpy + a loop for empty bins)."""
    out[...] = EMPTY
    with np.errstate(over="ignore"):
        for d in range(sets.n_docs):
            row = np.asarray(sets.row(d), dtype=np.uint64)
            if len(row) == 0:
                continue
            h = _mix64(row + key)
            bins = ((h >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)
            vals = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            sig = np.full(num_perm, EMPTY, dtype=np.uint32)
            filled = np.zeros(num_perm, dtype=bool)
            np.minimum.at(sig, bins.astype(np.int64), vals)
            filled[bins.astype(np.int64)] = True
            out[d] = oph_densify(sig, filled, int(probe_key), num_perm)
    return out


class SignatureFold:
    """One document's signature from its shingles given a piece at a time, in memory that does
    not grow with the document: the same bytes as :meth:`MinHasher.signatures` of the whole.

    A minimum over a union is the minimum of the pieces' minima, so the classic scheme folds
    whole signatures. One-permutation hashing folds its bin minima and which bins were hit,
    and densifies only at the end: a bin empty in one piece may be filled by another.
    Repeated shingles (pieces of a window stream) change no minimum.
    """

    def __init__(self, hasher: MinHasher) -> None:
        self.hasher = hasher
        self.sig = np.full(hasher.num_perm, EMPTY, dtype=np.uint32)
        self.filled = np.zeros(hasher.num_perm, dtype=bool)
        self.n = 0  # shingles (windows) seen

    def add(self, data: np.ndarray) -> None:
        data = np.asarray(data, dtype=np.uint32)
        if not len(data):
            return
        self.n += len(data)
        h = self.hasher
        if h.scheme != "oph":
            np.minimum(self.sig, h.signatures(ShingleSets(np.array([0, len(data)], np.int64), data))[0], out=self.sig)
            return
        if wanted():
            from simdoc import kernels

            kernels.oph_bins(data, h.oph_key, self.sig, self.filled)
            return
        with np.errstate(over="ignore"):
            x = _mix64(data.astype(np.uint64) + h.oph_key)
        bins = (((x >> np.uint64(32)) * np.uint64(h.num_perm)) >> np.uint64(32)).astype(np.int64)
        np.minimum.at(self.sig, bins, (x & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        self.filled[bins] = True

    def result(self) -> np.ndarray:
        """The signature (num_perm uint32); all 0xFFFFFFFF if no shingle was added."""
        if self.hasher.scheme != "oph" or self.n == 0:
            return self.sig.copy()
        return oph_densify(self.sig, self.filled, int(self.hasher.probe_key), self.hasher.num_perm)

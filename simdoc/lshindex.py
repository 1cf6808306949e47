"""An index of documents held in memory: insert documents, ask which are near-duplicates of a text.

What ``simdoc pairs`` does with an index directory, for a program that has
its documents at hand (as datasketch's ``MinHashLSH`` is used): each
document inserted is shingled (:func:`simdoc.shingling.shingle_texts`),
signed (:class:`simdoc.minhash.MinHasher`) and put into one bucket per band
(:func:`simdoc.lsh.band_keys`); a query is shingled, signed and banded the
same way, the documents sharing a bucket with it in any band are its
candidates, and each candidate is scored by the MinHash estimate and, with
``verify`` (the default), by the exact Jaccard of the two shingle sets,
kept in memory for that. With the same parameters the candidates, the
estimates and the exact Jaccards are those of ``simdoc.find_pairs`` over the
same texts (tested): character 5-shingles, 128 permutations, seed 1, the
bands and rows chosen for the threshold.

Memory: per document its signature (4 bytes a permutation), a key per band
in a dict, and, with ``verify``, its distinct shingles (8 bytes each). For
millions of documents, an index directory (``simdoc.find_pairs``) keeps
them on disk instead.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from simdoc.errors import UsageError
from simdoc.lsh import DEFAULT_RECALL, band_keys, check_bands_rows, check_threshold, choose_bands_rows
from simdoc.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, MinHasher
from simdoc.params import DEFAULT_THRESHOLD
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import pair_estimates

Document = str | Iterable[int]  # a text, or its shingles as 32-bit integers


@dataclass
class _Stored:
    """What an :class:`LSHIndex` keeps of a document."""

    signature: np.ndarray  # (num_perm,) uint32
    bands: np.ndarray | None  # its bucket key in each band; None: no shingles, in no bucket
    shingles: np.ndarray | None  # its distinct shingles (64-bit for a text), when the index verifies
    is_text: bool  # a text (else shingles given as integers): only texts are compared with texts
    number: int = 0  # the order it was inserted in


@dataclass(frozen=True)
class IndexMatch:
    """A document of an :class:`LSHIndex` found for a query: its key, the MinHash estimate and the
    exact Jaccard (None when the index does not verify)."""

    key: Hashable
    estimated: float
    jaccard: float | None


class LSHIndex:
    """Near-duplicate look-up over documents held in memory (MinHash + LSH, exactly verified).

    Parameters
    ----------
    threshold : float
        Set Jaccard in (0, 1]: :meth:`query` returns the documents at least
        this similar, and the banding is chosen for it. Default 0.6.
    num_perm, seed, scheme
        The MinHash signatures, as ``simdoc pairs --num-perm/--seed/--scheme``
        (default 128, 1, "oph").
    unit, k, lowercase
        The shingles of a text, as ``--unit/--k/--lowercase`` (default
        character 5-shingles of the lowercased text).
    bands, rows : int, optional
        The banding by hand (both, with bands*rows <= num_perm); default: the
        one ``simdoc index`` chooses for ``threshold``.
    verify : bool
        Keep each document's shingles and compare a query with its candidates
        exactly (default). Without, matches are kept and sorted by the estimate.

    Every parameter is checked here: a bad one raises
    :class:`simdoc.errors.UsageError` before any document is inserted.

    A document is a text, or its shingles as 32-bit integers (e.g. a row of
    :func:`simdoc.shingle_texts`); one index takes either kind, but compares
    a text only with texts. A document with no shingles (an empty text) is
    kept but is never a candidate, as in an index directory.

    Examples
    --------
    >>> index = LSHIndex(threshold=0.5)
    >>> index.insert("a", "The quick brown fox jumps over the lazy dog")
    >>> index.insert("b", "The quick brown fox jumped over the lazy dog")
    >>> index.insert("c", "An entirely different sentence about tide pools")
    >>> index.query("the quick brown fox jumps over the lazy dog!")
    ['a', 'b']
    >>> [(m.key, round(m.jaccard, 4)) for m in index.matches("The quick brown fox jumps over the lazy dog")]
    [('a', 1.0), ('b', 0.7556)]
    >>> index.remove("a"); len(index), "a" in index
    (2, False)
    """

    def __init__(
        self,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        num_perm: int = DEFAULT_NUM_PERM,
        seed: int = DEFAULT_SEED,
        scheme: str = DEFAULT_SCHEME,
        unit: str = "char",
        k: int | None = None,
        lowercase: bool = True,
        bands: int | None = None,
        rows: int | None = None,
        verify: bool = True,
    ) -> None:
        self.threshold = check_threshold(threshold)
        self.spec = ShingleSpec(unit, k, bool(lowercase))
        self.hasher = MinHasher(num_perm, seed, scheme=scheme)
        if (bands is None) != (rows is None):
            raise UsageError("bands and rows go together: give both, or neither and let the threshold choose")
        if bands is None:
            bands, rows = choose_bands_rows(self.threshold, self.hasher.num_perm, DEFAULT_RECALL)
        for name, value in (("bands", bands), ("rows", rows)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise UsageError(f"{name} must be a whole number, got {value!r}")
        check_bands_rows(int(bands), int(rows), self.hasher.num_perm)
        self.bands, self.rows = int(bands), int(rows)
        self.verify = bool(verify)
        self._buckets: list[dict[int, set]] = [{} for _ in range(self.bands)]
        self._docs: dict[Hashable, _Stored] = {}
        self._inserted = 0  # documents inserted so far: each one's number orders ties

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._docs

    def keys(self) -> list[Hashable]:
        """The keys of the documents, in the order they were inserted."""
        return list(self._docs)

    def insert(self, key: Hashable, document: Document) -> None:
        """Add ``document`` under ``key``; a key already in the index is a ValueError."""
        self.update([(key, document)])

    def update(self, items: Iterable[tuple[Hashable, Document]]) -> None:
        """Add each (key, document) of ``items``, shingling and signing the texts together
        (much faster than one :meth:`insert` each). Nothing is added if a key is taken."""
        items = list(items)
        keys = [key for key, _ in items]
        taken = [key for key in keys if key in self._docs]
        if taken or len(set(keys)) != len(keys):
            raise ValueError(f"key {(taken or keys)[0]!r} is already in the index (remove it first)")
        for key, doc in zip(keys, self._prepare([doc for _, doc in items])):
            doc.number = self._inserted
            self._inserted += 1
            self._docs[key] = doc
            if doc.bands is not None:
                for t, bucket_key in enumerate(doc.bands.tolist()):
                    self._buckets[t].setdefault(bucket_key, set()).add(key)

    def remove(self, key: Hashable) -> None:
        """Take the document ``key`` out; a key not in the index is a KeyError."""
        band = self._docs.pop(key).bands
        if band is not None:
            for t, bucket_key in enumerate(band.tolist()):
                bucket = self._buckets[t][bucket_key]
                bucket.discard(key)
                if not bucket:
                    del self._buckets[t][bucket_key]

    def query(self, document: Document) -> list[Hashable]:
        """The keys of the documents at least ``threshold`` similar to ``document``, most similar
        first (ties by insertion order). A document of the index finds itself."""
        return [m.key for m in self.matches(document)]

    def matches(self, document: Document, all_candidates: bool = False) -> list[IndexMatch]:
        """:meth:`query` with the numbers: each match's estimate and exact Jaccard, sorted as
        ``simdoc pairs`` prints (similarity to 4 decimals descending). ``all_candidates``
        keeps every document that shares a bucket with ``document``, however similar."""
        (asked,) = self._prepare([document])
        if asked.bands is None:
            return []
        found: set = set()
        for t, bucket_key in enumerate(asked.bands.tolist()):
            found |= self._buckets[t].get(bucket_key, set())
        docs = self._docs
        keys = sorted((key for key in found if docs[key].is_text == asked.is_text), key=lambda key: docs[key].number)
        if not keys:
            return []
        stack = np.vstack([asked.signature] + [docs[key].signature for key in keys])
        pairs = np.arange(1, len(keys) + 1)
        est = pair_estimates(stack, np.zeros(len(keys), np.int64), pairs)
        jac = [_set_jaccard(asked.shingles, docs[key].shingles) for key in keys] if self.verify else None
        score = jac if jac is not None else est.tolist()
        kept = [i for i in range(len(keys)) if all_candidates or score[i] >= self.threshold]
        kept.sort(key=lambda i: -round(score[i], 4))  # stable: ties stay in insertion order
        return [IndexMatch(keys[i], float(est[i]), None if jac is None else jac[i]) for i in kept]

    def _prepare(self, documents: list[Document]) -> list[_Stored]:
        """What the index keeps of each document, in order (not numbered yet)."""
        texts = [i for i, d in enumerate(documents) if isinstance(d, str)]
        given = [i for i, d in enumerate(documents) if not isinstance(d, str)]
        sigs = np.empty((len(documents), self.hasher.num_perm), dtype=np.uint32)
        shingles: list[np.ndarray | None] = [None] * len(documents)
        sizes = np.zeros(len(documents), dtype=np.int64)
        if texts:
            batch = [documents[i] for i in texts]
            # Signatures from the window stream and 64-bit sets to verify, as an index directory does.
            stream = shingle_texts(batch, self.spec, form="stream")
            sigs[texts] = self.hasher.signatures(stream)
            sizes[texts] = np.diff(stream.indptr)
            if self.verify:
                wide = shingle_texts(batch, self.spec, form="sets64")
                for j, i in enumerate(texts):
                    shingles[i] = wide.row(j).copy()
        if given:
            rows = [_shingle_ids(documents[i]) for i in given]
            sets = ShingleSets.from_sets(rows)
            sigs[given] = self.hasher.signatures(sets)
            sizes[given] = np.diff(sets.indptr)
            if self.verify:
                for j, i in enumerate(given):
                    shingles[i] = sets.row(j).astype(np.uint64)
        keys = band_keys(sigs, self.bands, self.rows)
        return [
            _Stored(sigs[i].copy(), keys[:, i].copy() if sizes[i] else None, shingles[i], isinstance(documents[i], str))
            for i in range(len(documents))
        ]


def _shingle_ids(document: Iterable[int]) -> np.ndarray:
    """Shingles given as integers, checked: each a whole number in [0, 2**32)."""
    if isinstance(document, (bytes, bytearray)):
        raise TypeError("a document is a str or an iterable of 32-bit shingle ids, not bytes: decode it first")
    ids = np.asarray(document if isinstance(document, np.ndarray) else list(document)).ravel()
    if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= 2**32):
        raise ValueError("shingle ids must be whole numbers in [0, 2**32)")
    return ids


def _set_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sorted arrays of distinct shingles (0 when both are empty)."""
    common = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - common
    return common / union if union else 0.0

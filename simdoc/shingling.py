"""Text → sets of hashed shingles.

A document becomes the set of its k-shingles, each shingle hashed to an
unsigned 32-bit integer with MurmurHash3 (x86, 32-bit), so that a set of
strings turns into a sorted ``uint32`` array and whole batches of documents
are hashed with numpy instead of one Python call per shingle.

The hash is part of the index format and is pinned by tests against the
``mmh3`` package:

* Normalisation: optional lowercasing (``str.lower``), then Unicode
  normalisation (NFC by default: canonically equivalent texts, such as an
  ``é`` typed as one code point or as ``e`` and a combining accent, become
  the same code points; NFKC also folds compatibility forms; ASCII text is
  left as it is by all of them), then every run of
  whitespace (as ``str.split()`` sees it, which includes tabs, newlines and
  no-break spaces) becomes one blank, and leading/trailing whitespace goes.
* ``unit="char"``: tokens are Unicode code points. A k-shingle's hash is
  ``mmh3.hash(shingle.encode("utf-32-le"), SHINGLE_SEED, signed=False)``,
  i.e. MurmurHash3 over k little-endian 32-bit code points. Hashing code
  points rather than UTF-8 bytes makes "café" four characters, as a reader
  sees it.
* ``unit="word"``: tokens are the blank-separated words, each hashed as
  ``mmh3.hash(word, SHINGLE_SEED, signed=False)`` (UTF-8); a k-shingle's hash
  is MurmurHash3 over the k word hashes as little-endian 32-bit integers.
* ``unit="stopword"`` (MMDS §3.2.4): like ``word``, but only the shingles
  that *start* with a stop word (compared lowercased, with surrounding
  punctuation removed) are kept: a stop word followed by the next k-1 words.

Short documents: a document with at least one token but fewer than k has
exactly one shingle, made of all its tokens, so short texts still compare
(for ``stopword`` too, with or without a stop word). An empty document
(nothing left after normalisation) has no shingles; nor has a ``stopword``
document of k tokens or more without a stop word that starts a full shingle.
Documents with no shingles are never candidates, not even of each other.

MurmurHash3 over token windows is :mod:`simdoc.murmur`; the sets of a batch
are one CSR structure, :class:`simdoc.shinglesets.ShingleSets`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import mmh3
import numpy as np

from simdoc.errors import UsageError
from simdoc.kernel_choice import wanted
from simdoc.murmur import murmur_windows
from simdoc.shinglesets import ShingleSets
from simdoc.workspace import workspace

SHINGLE_SEED = 0
UNITS = ("char", "word", "stopword")
UNICODE_FORMS = ("none", "NFC", "NFKC")
DEFAULT_UNICODE = "NFC"
DEFAULT_K = {"char": 5, "word": 3, "stopword": 3}
MAX_K = 256

_PUNCT = "\"'`.,;:!?()[]{}<>«»“”‘’„…–—-*_/\\|#&%$@^~+="


@dataclass(frozen=True)
class ShingleSpec:
    """What a shingle is: the unit, its length k, and the normalisation.

    Parameters
    ----------
    unit : {"char", "word", "stopword"}
    k : int or None
        Shingle length in units; None picks the unit's default
        (char 5, word 3, stopword 3).
    lowercase : bool
        Lowercase the text before shingling.
    unicode : {"none", "NFC", "NFKC"}
        The Unicode normalisation applied after lowercasing.
    """

    unit: str = "char"
    k: int | None = None
    lowercase: bool = True
    unicode: str = DEFAULT_UNICODE

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise UsageError(f"unknown shingle unit {self.unit!r}; choose one of {', '.join(UNITS)}")
        if self.k is None:
            object.__setattr__(self, "k", DEFAULT_K[self.unit])
        if not isinstance(self.k, (int, np.integer)) or isinstance(self.k, bool):
            raise UsageError(f"k must be a whole number, got {self.k!r}")
        if not 1 <= self.k <= MAX_K:
            raise UsageError(f"k must be between 1 and {MAX_K}, got {self.k}")
        object.__setattr__(self, "k", int(self.k))
        if self.unicode not in UNICODE_FORMS:
            raise UsageError(f"unknown Unicode normalisation {self.unicode!r}; choose one of {', '.join(UNICODE_FORMS)}")

    def as_params(self) -> dict:
        return {"unit": self.unit, "k": self.k, "lowercase": self.lowercase, "hash_seed": SHINGLE_SEED, "unicode": self.unicode}


def fold(text: str, lowercase: bool = True, unicode: str = DEFAULT_UNICODE) -> str:
    """Lowercase (optionally), then Unicode-normalise (ASCII needs none): the per-character part of
    :func:`normalise`, which every path applies the same way before whitespace is collapsed."""
    if lowercase:
        text = text.lower()
    if unicode != "none" and not text.isascii():
        text = unicodedata.normalize(unicode, text)
    return text


def normalise(text: str, lowercase: bool = True, unicode: str = DEFAULT_UNICODE) -> str:
    """Lowercase (optionally), Unicode-normalise, and collapse every whitespace run to one blank, trimmed."""
    return " ".join(fold(text, lowercase, unicode).split())


@lru_cache(maxsize=1)
def _space_table() -> np.ndarray:
    """is_space[c] for every code point str.split() treats as whitespace (all are below U+3001)."""
    return np.array([chr(c).isspace() for c in range(0x3001)], dtype=np.uint8)


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """The shipped English stop-word list (``simdoc/data/stopwords.txt``)."""
    from importlib import resources  # (here: it imports tempfile, ~3 ms of every command)

    raw = resources.files("simdoc").joinpath("data/stopwords.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in raw.splitlines() if w.strip() and not w.startswith("#"))


def _word_hashes(words: list[str]) -> np.ndarray:
    return np.fromiter((mmh3.hash(w, SHINGLE_SEED, signed=False) for w in _hashable(words)), dtype=np.uint32, count=len(words))


def _hashable(words: list[str]) -> list[str] | list[bytes]:
    """The words, or their UTF-8 bytes if one holds a lone surrogate (a JSON string may: "\\ud800").

    mmh3 hashes a str as its UTF-8 bytes, and crashes the process (a segmentation fault) on
    a str it cannot encode; the same bytes, surrogates passed through, hash alike.
    """
    try:
        " ".join(words).encode("utf-8")
    except UnicodeEncodeError:
        return [w.encode("utf-8", "surrogatepass") for w in words]
    return words


def _is_stop(word: str, stops: frozenset[str]) -> bool:
    return word.lower().strip(_PUNCT) in stops


def shingle_texts(
    texts: Sequence[str],
    spec: ShingleSpec | None = None,
    normalised: bool = False,
    *,
    views: bool = False,
    form: str = "sets",
) -> ShingleSets:
    """Shingle a batch of texts into a :class:`ShingleSets`.

    Parameters
    ----------
    texts : sequence of str (or bytes, for texts that are all ASCII)
        Raw document texts (a bare ``str`` is refused: it is not a batch).
    spec : ShingleSpec, optional
        Unit, k and normalisation; default character 5-shingles, lowercased.
    normalised : bool
        The texts are already normalised by :func:`normalise` with this spec.
    views : bool
        Return arrays that live in this process's scratch space, valid only
        until the next call (for a worker that uses them at once).
    form : {"sets", "stream", "sets64"}
        ``sets``: each row the sorted unique 32-bit shingle hashes, with counts
        (the textbook's shingle sets, what ``simdoc shingle`` stores).
        ``stream``: each row the 32-bit hash of every window in text order,
        repeats included, counts all 1 (what MinHash needs: a minimum does not
        care about order or repeats, so the per-document sort is skipped).
        ``sets64``: sorted unique 64-bit shingle hashes with counts, for exact
        verification (see :data:`VERIFY_SEEDS`); the 32-bit hash of the
        ``sets`` form collides about once per 10^5 shingle pairs of a large
        document pair, which can move a printed Jaccard in its 4th decimal.

    Examples
    --------
    >>> sets = shingle_texts(["abcdabd"], ShingleSpec("char", 2, lowercase=False))
    >>> len(sets.row(0))  # {ab, bc, cd, da, bd}
    5
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("shingle_texts takes a sequence of texts, not one str; wrap it in a list")
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    spec = spec or ShingleSpec()
    k = spec.k
    if spec.unit == "char" and not normalised and wanted():
        from simdoc import kernels

        # Same result as normalise() + the path below, without building split lists. ASCII
        # documents given as bytes go to the kernel as they are, which lowercases them.
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        all_bytes = all(isinstance(t, bytes) for t in texts)
        if all_bytes:
            np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
            raw = np.frombuffer(b"".join(texts), dtype=np.uint8)
        else:
            # The kernel may lower A-Z only of bytes: a str is folded already, and NFKC can make
            # an ASCII capital of a letter that has no lowercase ('𝔄' -> 'A'), which stays.
            pieces = [
                np.frombuffer(t.lower() if spec.lowercase else t, dtype=np.uint8)
                if isinstance(t, bytes)
                else np.frombuffer(fold(t, spec.lowercase, spec.unicode).encode("utf-32-le", "surrogatepass"), "<u4")
                for t in texts
            ]
            np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), out=offsets[1:])
            raw = workspace().get("raw", int(offsets[-1]), np.uint32)
            for p, a, b in zip(pieces, offsets[:-1].tolist(), offsets[1:].tolist()):
                raw[a:b] = p
        tokens = workspace().get("tokens", len(raw), np.uint32)
        new_offsets = np.empty_like(offsets)
        total = kernels.collapse_whitespace(raw, offsets, _space_table(), tokens, new_offsets, spec.lowercase and all_bytes)
        tokens = tokens[:total]
        return _shingles_of_tokens(tokens, tokens, np.diff(new_offsets), k, None, views, form)
    texts = [t.decode("ascii") if isinstance(t, bytes) else t for t in texts]
    if not normalised:
        texts = [normalise(t, spec.lowercase, spec.unicode) for t in texts]
    n = len(texts)
    if spec.unit == "char":
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
        tokens = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype="<u4")
        return _shingles_of_tokens(tokens, tokens, lengths, k, None, views, form)
    word_lists = [t.split(" ") if t else [] for t in texts]
    lengths = np.fromiter((len(w) for w in word_lists), dtype=np.int64, count=n)
    flat = [w for ws in word_lists for w in ws]
    tokens = _word_hashes(flat)
    # 64-bit shingles need 64 bits of each word: the high half of a second, wider hash.
    high = _word_hashes_high(flat) if form == "sets64" else tokens
    anchors = None
    if spec.unit == "stopword":
        stops = stop_words()
        anchors = np.fromiter((_is_stop(w, stops) for w in flat), dtype=bool, count=len(flat))
    return _shingles_of_tokens(tokens, high, lengths, k, anchors, views, form)


FORMS = ("sets", "stream", "sets64")
# The two 32-bit MurmurHash3 seeds whose window hashes make a 64-bit verification shingle.
VERIFY_SEEDS = (SHINGLE_SEED, 0x5BD1E995)


def _word_hashes_high(words: list[str]) -> np.ndarray:
    """A second 32-bit hash of each word, independent of :func:`_word_hashes` (mmh3's 64-bit hash, high half)."""
    return np.fromiter(
        (mmh3.hash64(w, VERIFY_SEEDS[1], signed=False)[0] >> 32 for w in _hashable(words)), dtype=np.uint32, count=len(words)
    )


def _shingles_of_tokens(
    tokens: np.ndarray, high: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None, views: bool, form: str
) -> ShingleSets:
    if form == "sets":
        return _sets_from_tokens(tokens, lengths, k, anchors, views)
    if form == "stream":
        return _window_stream(tokens, lengths, k, anchors, SHINGLE_SEED, views)
    # The two halves are built in this thread's reused scratch arrays: fresh memory costs a page
    # fault per 4 KiB, and three fresh 8-byte temporaries per shingle took longer than hashing.
    ws = workspace()
    low = _window_stream(tokens, lengths, k, anchors, VERIFY_SEEDS[0], views=True)
    wide = ws.get("wide", len(low.data), np.uint64)
    wide[:] = low.data
    top = _window_stream(high, lengths, k, anchors, VERIFY_SEEDS[1], views=True)  # reuses low's scratch
    upper = ws.get("upper", len(top.data), np.uint64)
    upper[:] = top.data
    upper <<= np.uint64(32)
    wide |= upper
    return unique_rows(low.indptr, wide)  # copies what it keeps: the scratch arrays are free again


def unique_rows(indptr: np.ndarray, data: np.ndarray) -> ShingleSets:
    """Each CSR row of 64-bit values sorted, repeats folded into counts."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = len(indptr) - 1
    if wanted():
        from simdoc import kernels

        data = np.asarray(data, dtype=np.uint64)
        out = np.empty(len(data), dtype=np.uint64)
        counts = np.empty(len(data), dtype=np.uint32)
        sizes = np.empty(n, dtype=np.int64)
        longest = int(np.diff(indptr).max()) if n else 0
        nnz = kernels.unique_rows(indptr, data, out, counts, sizes, np.empty(max(longest, 1), np.uint64))
        new = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=new[1:])
        if nnz * 2 >= len(data):  # few repeats (prose): a view costs less than a copy, and little memory
            return ShingleSets(new, out[:nnz], counts[:nnz])
        return ShingleSets(new, out[:nnz].copy(), counts[:nnz].copy())
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((data, doc))
    sd, sdoc = data[order], doc[order]
    first = np.ones(len(sd), dtype=bool)
    if len(sd):
        first[1:] = (sd[1:] != sd[:-1]) | (sdoc[1:] != sdoc[:-1])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(sd))).astype(np.uint32)
    new = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sdoc[starts], minlength=n), out=new[1:])
    return ShingleSets(new, sd[starts], counts)


def _window_stream(
    tokens: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None, seed: int, views: bool
) -> ShingleSets:
    """The hash of every window of each document, in text order, repeats kept (counts all 1)."""
    n = len(lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if wanted():
        from simdoc import kernels

        ws = workspace()
        cap = max(len(tokens), 1)
        longest = int(lengths.max()) if n else 1
        data = ws.get("stream", cap, np.uint32) if views else np.empty(cap, np.uint32)
        sizes = np.empty(n, dtype=np.int64)
        use = anchors is not None
        anchor_arr = anchors.astype(np.uint8) if use else np.zeros(1, dtype=np.uint8)
        nnz = kernels.shingle_csr(
            np.ascontiguousarray(tokens, dtype=np.uint32), offsets, k, seed, anchor_arr, use, data, data, sizes,
            ws.get("blocks", cap, np.uint32), ws.get("buf", longest, np.uint32), ws.get("tmp", longest, np.uint32),
            ws.get("starts", longest, np.int64), False,
        )
        data = data[:nnz]
    else:
        doc, data = _windows_numpy(tokens, lengths, k, anchors, seed)
        order = np.argsort(doc, kind="stable")
        data = data[order]
        sizes = np.bincount(doc, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    return ShingleSets(indptr, data, np.broadcast_to(np.uint32(1), (len(data),)))


def _sets_from_tokens(
    tokens: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None, views: bool = False
) -> ShingleSets:
    """Window hashes of each document's token run → sorted unique sets with counts."""
    if wanted():
        return _sets_from_tokens_compiled(tokens, lengths, k, anchors, views)
    return _sets_from_tokens_numpy(tokens, lengths, k, anchors)


def _sets_from_tokens_compiled(
    tokens: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None, views: bool = False
) -> ShingleSets:
    from simdoc.kernels import shingle_csr

    ws = workspace()
    n = len(lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    cap = max(len(tokens), 1)
    longest = int(lengths.max()) if n else 1
    data = ws.get("data", cap, np.uint32)
    counts = ws.get("counts", cap, np.uint32)
    sizes = np.empty(n, dtype=np.int64)
    use = anchors is not None
    anchor_arr = anchors.astype(np.uint8) if use else np.zeros(1, dtype=np.uint8)
    nnz = shingle_csr(
        np.ascontiguousarray(tokens, dtype=np.uint32), offsets, k, SHINGLE_SEED, anchor_arr, use, data, counts, sizes,
        ws.get("blocks", cap, np.uint32), ws.get("buf", longest, np.uint32), ws.get("tmp", longest, np.uint32),
        ws.get("starts", longest, np.int64), True,
    )
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    if views:
        return ShingleSets(indptr, data[:nnz], counts[:nnz])
    return ShingleSets(indptr, data[:nnz].copy(), counts[:nnz].copy())


def _windows_numpy(
    tokens: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None, seed: int = SHINGLE_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """(document, hash) of every window: full windows in text order, then short documents' one shingle."""
    n = len(lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    n_win = np.maximum(lengths - k + 1, 0)
    # Start positions of every full window that stays inside its document.
    doc_of_win = np.repeat(np.arange(n, dtype=np.int64), n_win)
    win_base = np.repeat(offsets[:-1] - np.concatenate([[0], np.cumsum(n_win)[:-1]]), n_win)
    starts = np.arange(len(doc_of_win), dtype=np.int64) + win_base
    if anchors is not None:
        keep = anchors[starts]
        starts, doc_of_win = starts[keep], doc_of_win[keep]
        hashes = murmur_windows(tokens, k, starts, seed)
    else:
        all_h = murmur_windows(tokens, k, seed=seed)
        hashes = all_h[starts]
    # Documents with 1..k-1 tokens: one shingle of all their tokens.
    short = np.flatnonzero((lengths > 0) & (lengths < k))
    if len(short):
        short_h = np.fromiter(
            (
                mmh3.hash(np.asarray(tokens[offsets[d] : offsets[d + 1]]).astype("<u4").tobytes(), seed, signed=False)
                for d in short
            ),
            dtype=np.uint32,
            count=len(short),
        )
        hashes = np.concatenate([hashes, short_h])
        doc_of_win = np.concatenate([doc_of_win, short])
    return doc_of_win, hashes


def _sets_from_tokens_numpy(tokens: np.ndarray, lengths: np.ndarray, k: int, anchors: np.ndarray | None) -> ShingleSets:
    """The reference: vectorised numpy over the whole batch."""
    doc_of_win, hashes = _windows_numpy(tokens, lengths, k, anchors)
    return _group_unique(doc_of_win, hashes, len(lengths))


def _group_unique(doc: np.ndarray, hashes: np.ndarray, n_docs: int) -> ShingleSets:
    """Sort (doc, hash) keys once; equal neighbours are repeats of one shingle."""
    keys = (doc.astype(np.uint64) << np.uint64(32)) | hashes.astype(np.uint64)
    keys.sort()
    if len(keys) == 0:
        return ShingleSets(np.zeros(n_docs + 1, np.int64), np.zeros(0, np.uint32))
    first = np.empty(len(keys), dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(keys))).astype(np.uint32)
    uniq = keys[starts]
    data = (uniq & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    doc_of = (uniq >> np.uint64(32)).astype(np.int64)
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc_of, minlength=n_docs), out=indptr[1:])
    return ShingleSets(indptr, data, counts)

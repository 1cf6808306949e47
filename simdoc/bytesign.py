"""A batch of documents to MinHash signatures in one compiled pass, the reference path as fallback.

:func:`sign_texts` gives exactly what the reference gives,
``hasher.signatures(shingle_texts(texts, spec, form="stream"))`` and each
document's window count, byte for byte; :func:`sets64_texts` gives
verification's ``shingle_texts(texts, spec, form="sets64")``. Character shingles go through
:func:`simdoc.kernels_bytes.sign_utf8`, which reads the documents' UTF-8
bytes (an ASCII file's bytes as read; a ``str`` encoded once) with no Python
string per document; what it declines (see below), word shingles, and any
run without numba take the reference path.

The normalisation (``str.lower``, then NFC or NFKC, then ``str.split``
whitespace) is applied through :func:`code_point_table`: for each code point
of the Basic Multilingual Plane the one code point it becomes, or whitespace,
or :data:`~simdoc.kernels_bytes.UNSAFE` when mapping it on its own could differ
from normalising the whole text:

* its lowercase is more than one code point (``İ`` → ``i̇``), or depends on
  the context (``Σ`` → ``ς`` at the end of a word, ``σ`` elsewhere);
* normalisation changes it, it is a combining mark (combining class > 0, it
  may be reordered), or its decomposition starts with one;
* it can be the second of a pair that composes (a combining accent with no
  class, a Hangul vowel or final jamo, an Indic vowel sign that joins the
  consonant before it).

A character the table does not hold (past U+FFFF) makes the document go the
reference way too, as does a byte sequence that is not strict UTF-8 (Python
keeps each such byte as a lone surrogate there, simdoc.corpus.encodings.UNDECODABLE). The table is built from Python's own ``str.lower``
and :mod:`unicodedata`, so it follows the interpreter's Unicode version, as
the reference does; it is built the first time a batch holds a non-ASCII
byte (an ASCII batch needs the first 128 entries only), and kept beside the
compiled kernels for the next process (each worker needs it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from simdoc.kernel_choice import wanted
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import VERIFY_SEEDS, ShingleSpec, shingle_texts
from simdoc.workspace import workspace

_BMP = 0x10000


def sign_texts(texts: Sequence[str | bytes], spec: ShingleSpec, hasher: MinHasher, out: np.ndarray) -> np.ndarray:
    """Sign a batch: ``out[i]`` the signature of ``texts[i]``; returns each one's window count (int64).

    ``texts`` holds ``str``, or ``bytes`` that are ASCII (as
    :func:`simdoc.corpus.files.read_document` gives an ASCII file), as
    :func:`simdoc.shingling.shingle_texts` takes them.
    """
    n = len(texts)
    windows = np.zeros(n, dtype=np.int64)
    handled = np.zeros(n, dtype=np.bool_)
    if n and spec.unit == "char":
        _sign_kernel(*_joined(texts), spec, hasher, out, windows, handled)
    rest = np.flatnonzero(~handled)
    if len(rest):
        _sign_reference([texts[i] for i in rest.tolist()], rest, spec, hasher, out, windows)
    return windows


def sign_joined(
    raw: bytes | np.ndarray, offsets: np.ndarray, spec: ShingleSpec, hasher: MinHasher, out: np.ndarray, ascii: bool | None = None
) -> np.ndarray:
    """:func:`sign_texts` of the texts ``raw[offsets[i]:offsets[i + 1]]`` (UTF-8, surrogatepass:
    as a text is encoded for its digest), straight from that buffer (bytes, or uint8): no ``str``
    per text but for those the kernel declines, decoded for the reference path. ``ascii``: the
    caller knows whether the texts are all ASCII (else ``raw`` is looked at)."""
    n = len(offsets) - 1
    windows = np.zeros(n, dtype=np.int64)
    handled = np.zeros(n, dtype=np.bool_)
    if n and spec.unit == "char":
        _sign_kernel(raw, np.ascontiguousarray(offsets, dtype=np.int64), spec, hasher, out, windows, handled, ascii)
    rest = np.flatnonzero(~handled)
    if len(rest):
        at = offsets.tolist()
        texts = [bytes(raw[at[i] : at[i + 1]]).decode("utf-8", "surrogatepass") for i in rest.tolist()]
        _sign_reference(texts, rest, spec, hasher, out, windows)
    return windows


def _sign_kernel(raw: bytes | np.ndarray, offsets: np.ndarray, spec: ShingleSpec, hasher: MinHasher, out, windows, handled, ascii=None) -> None:
    if not wanted():  # (simdoc.kernel_choice: a small stage, or no numba)
        return
    from simdoc import kernels_bytes  # here: numba is imported only by a run that signs (see simdoc.jit)

    if ascii is None:
        ascii = raw.isascii() if isinstance(raw, bytes) else not (np.frombuffer(raw, dtype=np.uint8) >= 0x80).any()
    table = code_point_table(spec.lowercase, spec.unicode, ascii)
    longest = max(int(np.diff(offsets).max()), 1)
    ws = workspace()
    kernels_bytes.sign_utf8(
        np.frombuffer(raw, dtype=np.uint8), offsets, spec.k, table, hasher.scheme == "oph", hasher.oph_key,
        hasher.probe_key, hasher.a, hasher.b, out, windows, handled, ws.get("blocks", longest, np.uint32),
        ws.get("buf", longest, np.uint32), ws.get("wide", longest, np.uint64), ws.get("sig64", hasher.num_perm, np.uint64),
    )


def _sign_reference(texts: Sequence[str | bytes], rest: np.ndarray, spec: ShingleSpec, hasher: MinHasher, out, windows) -> None:
    stream = shingle_texts(texts, spec, form="stream", views=True)
    out[rest] = hasher.signatures(stream)
    windows[rest] = np.diff(stream.indptr)


def sets64_texts(texts: Sequence[str | bytes], spec: ShingleSpec) -> ShingleSets:
    """Exactly ``shingle_texts(texts, spec, form="sets64")`` (verification's 64-bit shingle
    sets), character shingles made by :func:`simdoc.kernels_bytes.sets64_utf8` in one pass."""
    n = len(texts)
    if not n or spec.unit != "char" or not wanted():
        return shingle_texts(texts, spec, form="sets64")
    raw, offsets = _joined(texts)
    room = max(len(raw), 1)
    data = np.empty(room, dtype=np.uint64)
    counts = np.empty(room, dtype=np.uint32)
    sizes = _sets64_joined(raw, offsets, spec, data, counts)
    handled = sizes >= 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(handled, sizes, 0), out=indptr[1:])
    nnz = int(indptr[-1])
    # As shingling.unique_rows keeps them: few repeats (prose), a view costs less than a copy.
    sets = ShingleSets(indptr, data[:nnz], counts[:nnz]) if nnz * 2 >= room else ShingleSets(indptr, data[:nnz].copy(), counts[:nnz].copy())
    rest = np.flatnonzero(~handled)
    if not len(rest):
        return sets
    others = shingle_texts([texts[i] for i in rest.tolist()], spec, form="sets64")
    at = dict(zip(rest.tolist(), range(len(rest))))
    return ShingleSets.concatenate([others.slice(at[i], at[i] + 1) if i in at else sets.slice(i, i + 1) for i in range(n)])


def sets64_into(texts: Sequence[str | bytes], spec: ShingleSpec, data: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The kernel part of :func:`sets64_texts`, written where the caller says: the rows of the
    texts it handles one after another from ``data[0]``/``counts[0]`` (uint64, uint32, room for
    as many values as the texts have UTF-8 bytes), and each text's row length, -1 for a text
    it declines (word shingles, no numba, a character the table cannot map): the caller
    shingles those the reference way (:func:`simdoc.shingling.shingle_texts`)."""
    if not len(texts) or spec.unit != "char" or not wanted():
        return np.full(len(texts), -1, dtype=np.int64)
    raw, offsets = _joined(texts)
    return _sets64_joined(raw, offsets, spec, data, counts)


def sets64_spans(
    raw: bytes | bytearray, starts: np.ndarray, ends: np.ndarray, spec: ShingleSpec, data: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """:func:`sets64_into` of the texts ``raw[starts[i]:ends[i]]`` (UTF-8 bytes, the spans in
    order, apart or not), straight from the buffer they were read into
    (:func:`simdoc.corpus.plain.read_again_into`): the same rows and sizes as
    ``sets64_into`` of the decoded texts gives. A span that is not strict UTF-8 is
    declined (-1), as one that holds a character the table cannot map: the caller
    decodes it (``errors="surrogateescape"``) and shingles it the reference way."""
    n = len(starts)
    if not n or spec.unit != "char" or not wanted():
        return np.full(n, -1, dtype=np.int64)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    # The buffer's bytes between the spans count too: ASCII is only a cheaper table's condition.
    return _sets64_spans(raw, starts, ends, raw.isascii(), spec, data, counts)


def pair_sums_compiled(spec: ShingleSpec) -> bool:
    """Whether :func:`pair_sums_spans` compares texts shingled as ``spec`` says (character
    shingles, with numba), rather than declining every pair."""
    return spec.unit == "char" and wanted()


def pair_sums_spans(raw: bytes | bytearray, starts: np.ndarray, ends: np.ndarray, spec: ShingleSpec) -> tuple[np.ndarray, np.ndarray]:
    """For each pair p of texts ``raw[starts[2p]:ends[2p]]`` and ``raw[starts[2p + 1]:ends[2p + 1]]``
    (UTF-8 bytes, as :func:`sets64_spans` takes them), the row of :func:`simdoc.similarity.span_sums`
    their :func:`sets64_spans` rows give, and whether it was made: by one kernel call
    (:func:`simdoc.kernels_bytes.pair_sums_utf8`), no set held. False (its row 0): a text the
    kernel declines (as :func:`sets64_spans` would), or word shingles, or no numba."""
    from simdoc import kernels_bytes

    m = len(starts) // 2
    sums = np.zeros((m, 5), np.int64)
    handled = np.zeros(m, dtype=np.bool_)
    if not m or not pair_sums_compiled(spec):
        return sums, handled
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    lengths = ends - starts
    longest = max(int(lengths.max()), 1)
    pair = max(int((lengths[0::2] + lengths[1::2]).max()), 1)
    size = 16
    while size < 2 * pair:
        size *= 2
    ws = workspace()
    array = np.frombuffer(raw, dtype=np.uint8)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False  # the kernel's build for read-only bytes (compiled once)
    cnt = ws.get("pair_counts", size, np.uint64)
    cnt[:] = 0  # a slot's count 0: empty (the kernel leaves it so after each pair)
    kernels_bytes.pair_sums_utf8(
        array, starts, ends, spec.k, code_point_table(spec.lowercase, spec.unicode, raw.isascii()),
        np.uint32(VERIFY_SEEDS[0]), np.uint32(VERIFY_SEEDS[1]), sums, handled,
        ws.get("blocks", longest, np.uint32), ws.get("buf", longest, np.uint32), ws.get("tmp", longest, np.uint32),
        ws.get("wide", longest, np.uint64), ws.get("pair_keys", size, np.uint64), cnt, ws.get("pair_slots", pair, np.int64),
    )
    sums[~handled] = 0
    return sums, handled


def _sets64_joined(raw: bytes, offsets: np.ndarray, spec: ShingleSpec, data: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return _sets64_spans(raw, offsets[:-1], offsets[1:], raw.isascii(), spec, data, counts)


def _sets64_spans(
    raw: bytes | bytearray, starts: np.ndarray, ends: np.ndarray, ascii_only: bool, spec: ShingleSpec, data: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    from simdoc import kernels_bytes

    n = len(starts)
    sizes = np.full(n, -1, dtype=np.int64)
    lengths = ends - starts
    if len(data) < lengths.sum() or len(counts) < lengths.sum():
        raise ValueError("sets64_into: less room than the texts' bytes")
    longest = max(int(lengths.max()), 1)
    ws = workspace()
    handled = np.zeros(n, dtype=np.bool_)
    array = np.frombuffer(raw, dtype=np.uint8)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False  # the kernel's build for read-only bytes (compiled once)
    kernels_bytes.sets64_utf8(
        array, starts, ends, spec.k, code_point_table(spec.lowercase, spec.unicode, ascii_only),
        np.uint32(VERIFY_SEEDS[0]), np.uint32(VERIFY_SEEDS[1]), data, counts, sizes, handled,
        ws.get("blocks", longest, np.uint32), ws.get("buf", longest, np.uint32), ws.get("tmp", longest, np.uint32),
        ws.get("wide", longest, np.uint64), ws.get("upper", longest, np.uint64),
    )
    sizes[~handled] = -1
    return sizes


def _joined(texts: Sequence[str | bytes]) -> tuple[bytes, np.ndarray]:
    """The texts' UTF-8 bytes, one after another, and where each starts (and the last ends)."""
    pieces = [t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), out=offsets[1:])
    return b"".join(pieces), offsets


@lru_cache(maxsize=8)
def code_point_table(lowercase: bool, unicode: str, ascii_only: bool = False) -> np.ndarray:
    """What each code point becomes once lowercased and normalised: one code point, or
    :data:`~simdoc.kernels_bytes.SPACE` (whitespace), or :data:`~simdoc.kernels_bytes.UNSAFE`.

    ``ascii_only``: the first 128 entries, all a batch of ASCII bytes needs.

    The full table takes ~0.25 CPU-s to build (every code point through ``str.lower`` and
    :mod:`unicodedata`), in each process that needs it: each forked worker of a scan or of
    verification of a corpus with non-ASCII text, before its first document (measured: the
    verification of Python's sources took 0.87 s at ``-j 2``, 0.35 s at ``-j 1``). It is built
    once and kept in the folder of the compiled kernels (:func:`table_file`), then loaded (~1 ms).
    """
    if ascii_only:
        return _built_table(lowercase, unicode, 128)
    path = table_file(lowercase, unicode)
    table = _load_table(path) if path is not None else None
    if table is None:
        table = _built_table(lowercase, unicode, _BMP)
        if path is not None:
            _store_table(path, table)
    return table


def _built_table(lowercase: bool, unicode: str, size: int) -> np.ndarray:
    # No ASCII character is the second of a composing pair (a test checks the two tables agree).
    seconds = _second_of_a_pair() if unicode != "none" and size > 128 else frozenset()
    table = np.empty(size, dtype=np.uint32)
    for c in range(size):
        table[c] = _entry(chr(c), lowercase, unicode, seconds)
    return table


def table_file(lowercase: bool, unicode: str) -> str | None:
    """Where the full :func:`code_point_table` is kept: the compiled kernels' cache folder
    (:func:`simdoc.jit.cache_dir`), in a file named by what the table follows (the arguments,
    the interpreter's Unicode version, this module's source); None if nothing is cached."""
    from simdoc import jit

    if not jit.CACHE:
        return None
    with open(__file__, "rb") as f:
        source = hashlib.blake2b(f.read(), digest_size=8).hexdigest()
    name = f"code-points-{int(bool(lowercase))}-{unicode}-{unicodedata.unidata_version}-{source}.npy"
    return os.path.join(jit.cache_dir(), name)


def _load_table(path: str) -> np.ndarray | None:
    """The table kept at ``path``; None if there is none, or not a whole one (it is built again)."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if table.dtype != np.uint32 or table.shape != (_BMP,):
        return None
    return table


def _store_table(path: str, table: np.ndarray) -> None:
    """Keep ``table`` at ``path``, whole or not at all (a temporary file renamed: processes built
    it at the same time, or a reader of a half-written one); a cache that cannot be written is
    skipped."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".code-points-", suffix=".npy")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, table, allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _entry(ch: str, lowercase: bool, unicode: str, seconds: frozenset[str]) -> int:
    from simdoc import kernels_bytes

    c = ord(ch)
    if 0xD800 <= c <= 0xDFFF:
        return kernels_bytes.UNSAFE  # not in strict UTF-8 (a str may hold one: the reference takes it)
    low = ch.lower() if lowercase else ch
    if len(low) != 1 or (lowercase and c == 0x3A3):  # İ → i̇; Σ → σ or ς by its context
        return kernels_bytes.UNSAFE
    norm = unicodedata.normalize(unicode, low) if unicode != "none" else low
    if low.isspace():
        return kernels_bytes.SPACE if norm.isspace() else kernels_bytes.UNSAFE
    if unicode == "none":
        return ord(low)
    if norm != low or unicodedata.combining(low) or low in seconds:
        return kernels_bytes.UNSAFE
    if unicodedata.combining(unicodedata.normalize("NFD", low)[0]):
        return kernels_bytes.UNSAFE
    return ord(low)


@lru_cache(maxsize=1)
def _second_of_a_pair() -> frozenset[str]:
    """Every code point that canonical composition may join to the one before it: the second
    of each primary composite's decomposition, and the Hangul vowel and final jamo."""
    seconds = {chr(c) for c in range(0x1161, 0x1176)} | {chr(c) for c in range(0x11A8, 0x11C3)}
    for c in range(0x110000):
        d = unicodedata.decomposition(chr(c))
        if not d or d.startswith("<"):
            continue
        parts = d.split()
        if len(parts) == 2 and unicodedata.normalize("NFC", chr(c)) == chr(c):
            seconds.add(chr(int(parts[1], 16)))
    return frozenset(seconds)

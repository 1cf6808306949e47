"""Shingle one huge file in bounded memory.

A file larger than :data:`STREAM_BYTES` is read in chunks: bytes are
decoded incrementally, normalised piece by piece (whitespace runs that cross
a chunk boundary still become one blank), and shingle hashes are computed
over each piece plus the last k-1 tokens of the previous one, so every
window is hashed exactly once. The (hash, count) pairs are merged as they
come. The result is the same set and counts as shingling the whole text at
once (tested on random texts and chunk sizes): a chunk is folded (lowercased,
Unicode-normalised) only up to a place where folding it apart gives what
folding the whole would (see :func:`_hold_back`). The one exception: a text with
no such place in 16 MiB (no ASCII digit, blank or pair of ASCII letters, say a
long run of Greek with no space), where a capital sigma at the cut may take the
other final/medial form.
"""

from __future__ import annotations

import codecs
import hashlib
import unicodedata
from collections.abc import Callable, Iterable
from itertools import chain

import numpy as np

from simdoc.bytesign import sets64_texts
from simdoc.corpus.encodings import NOT_UTF8, UNDECODABLE, unicode_bom, wide_decoder, wide_end
from simdoc.corpus.files import BINARY, BINARY_SNIFF, BINARY_WIDE, ReadResult, close_handle, compression_of
from simdoc.corpus.files import decompressing_reader, handle_stat, open_regular, read_from, second_file
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, fold, shingle_texts

STREAM_BYTES = 64 << 20  # files larger than this are streamed
CHUNK_BYTES = 8 << 20
MERGE_ITEMS = 1 << 24  # (hash, count) pairs held before they are merged


class _BadArchive(Exception):
    pass


class _Counts:
    """Sorted unique hashes with their summed counts, merged from pieces."""

    def __init__(self, merge_items: int = MERGE_ITEMS) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.size = 0
        self.merge_items = merge_items
        self.kept = 0  # items in the last merge

    def add(self, data: np.ndarray, counts: np.ndarray) -> None:
        if len(data):
            self.parts.append((data, counts))
            self.size += len(data)
            # Merging when the pieces add a quarter to the last merge keeps the held items within
            # ~1.25x the final set (the merge's temporaries, ~32 bytes an item, are the peak) while
            # the items merged in all stay within ~5x the final set.
            if self.size > max(self.merge_items, self.kept + self.kept // 4):
                self.parts = [self.merged()]
                self.size = self.kept = len(self.parts[0][0])

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.parts:
            return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        data = np.concatenate([p[0] for p in self.parts])
        counts = np.concatenate([p[1] for p in self.parts])
        self.parts = []  # the pieces are in ``data`` now: let them go before sorting
        return sum_repeats(data, counts)


def sum_repeats(data: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted unique hashes of ``data``, each with the sum of its ``counts`` (uint32)."""
    if not len(data):
        return data, counts.astype(np.uint32)
    order = np.argsort(data, kind="stable")
    data = data[order]
    counts = counts[order]
    del order
    first = np.concatenate(([True], data[1:] != data[:-1]))
    starts = np.flatnonzero(first)
    return data[starts], np.add.reduceat(counts, starts, dtype=np.uint64).astype(np.uint32)


class _Normaliser:
    """Yields pieces whose concatenation is normalise(whole text), chunk by chunk.

    Folding is not local: Unicode normalisation joins a character with the
    combining marks after it, and ``str.lower`` makes a capital sigma final
    or medial by the letters around it, either of which may come in the next
    chunk. So the text from the last place where it can be folded apart
    (:func:`_hold_back`) on is held back until the next chunk.
    """

    def __init__(self, lowercase: bool, unicode: str = "none") -> None:
        self.lowercase = lowercase
        self.unicode = unicode
        self.held = ""  # raw text not folded yet
        self.started = False
        self.pending_space = False

    def feed(self, raw: str, final: bool = False) -> str:
        if self.unicode != "none" or self.lowercase:
            raw, self.held = _hold_back(self.held + raw, final, self.lowercase)
        raw = fold(raw, self.lowercase, self.unicode)
        body = " ".join(raw.split())
        if not body:
            if raw and self.started:
                self.pending_space = True
            return ""
        out = " " + body if self.started and (self.pending_space or raw[0].isspace()) else body
        self.started = True
        self.pending_space = raw[-1].isspace()
        return out


# The ASCII characters that are Case_Ignorable (Word_Break MidLetter, MidNumLet, Single_Quote;
# Sk): a capital sigma's context is looked for across them.
_CASE_IGNORABLE_ASCII = frozenset("'.:^`")


def _folds_apart(text: str, i: int, lowercase: bool) -> bool:
    """Whether ``text[:i]`` and ``text[i:]`` fold (see :func:`simdoc.shingling.fold`) to what
    ``text`` folds to.

    Unicode normalisation: ``text[i]`` is ASCII, which composes with nothing
    before it. Lowercasing is per character except for a capital sigma, whose
    form depends on the nearest characters on each side that are not
    Case_Ignorable: ``text[i]`` is not Case_Ignorable and either is not a
    letter (the search stops at it, and it is not cased, as the string's end
    is not) or follows another ASCII character that is not Case_Ignorable (each
    side's search stops on its own side).
    """
    c = text[i]
    if c >= "\x80":
        return False
    if not lowercase:
        return True
    if c in _CASE_IGNORABLE_ASCII:
        return False
    return not c.isalpha() or (i > 0 and text[i - 1] < "\x80" and text[i - 1] not in _CASE_IGNORABLE_ASCII)


# How far back from a chunk's end a place to cut is looked for, and the text held back at most
# while there is none (then it is cut anyway, see the module docstring).
_LOOK_BACK = 1 << 16


def _hold_back(text: str, final: bool, lowercase: bool = False) -> tuple[str, str]:
    """(what can be folded now, what to hold for the next chunk); see :class:`_Normaliser`."""
    if final:
        return text, ""
    for i in range(len(text) - 1, max(len(text) - _LOOK_BACK, 0) - 1, -1):
        if _folds_apart(text, i, lowercase):
            return text[:i], text[i:]
    if len(text) < max(2 * CHUNK_BYTES, 2 * _LOOK_BACK):
        return "", text
    for i in range(len(text) - 1, 0, -1):
        if not unicodedata.combining(text[i]):
            return text[:i], text[i:]
    return text, ""


class _Windows:
    """Shingles a normalised stream: keeps the last k-1 tokens between pieces."""

    def __init__(
        self, spec: ShingleSpec, form: str = "sets", merge_items: int = MERGE_ITEMS,
        sink: Callable[[np.ndarray, np.ndarray], None] | None = None,
    ) -> None:
        self.spec = spec
        self.form = form  # "sets" (32-bit), "stream" or "sets64" (verification), see shingle_texts
        self.carry = ""  # normalised text not yet fully shingled
        self.counts = _Counts(merge_items)
        self.add = sink or self.counts.add  # where each piece's (hashes, counts) go
        self.tokens_seen = 0
        self.windows_done = False

    def feed(self, text: str, final: bool) -> None:
        """Hash every window that starts in ``carry + text`` and fits in it; keep the last k-1 tokens.

        The kept tokens start the next piece, so the windows that begin in them
        are hashed there, exactly once.
        """
        buf = self.carry + text
        k = self.spec.k
        if self.spec.unit == "char":
            tokens = len(buf)
            self.carry = "" if final else buf[len(buf) - (k - 1) :] if k > 1 else ""
            piece = buf
        else:
            words = buf.split(" ") if buf else []
            # Unless this is the end, the last word may go on in the next chunk: hold it back.
            complete = words if final else words[:-1]
            tokens = len(complete)
            piece = " ".join(complete)
            if not final:
                self.carry = " ".join(complete[max(tokens - (k - 1), 0) :] + words[-1:]) if tokens >= k else buf
        if tokens >= k:
            sets = shingle_texts([piece], self.spec, normalised=True, form=self.form)
            self.add(np.asarray(sets.data), np.asarray(sets.counts))
            self.windows_done = True
        elif not final:
            self.carry = buf  # not a single whole window yet: wait for more text
        elif not self.windows_done and tokens > 0:
            # The whole document is shorter than k: one shingle of it all (the short-document rule).
            sets = shingle_texts([piece], self.spec, normalised=True, form=self.form)
            self.add(np.asarray(sets.data), np.asarray(sets.counts))


# Text shingled at once by :func:`sets64_of_texts`, in characters: shingling holds some 70
# bytes per character (code points, window hashes of two seeds, the sort), so ~18 MB.
PIECE_CHARS = 1 << 18
# A document read whole that is longer than this (in characters) is signed a piece at a time
# (:func:`windows_in_pieces`), not shingled with its batch: shingling holds ~40 bytes per character.
LARGE_CHARS = 1 << 22


Part = tuple[int, int, int]  # (lo, hi, P): only the 64-bit hashes in ranges lo..hi-1 of P equal ones


def in_part(data: np.ndarray, part: Part) -> np.ndarray:
    """Which 64-bit hashes fall in ranges ``lo`` to ``hi - 1`` of ``P`` (by their top 32 bits): the
    ranges cut a sorted set into consecutive runs, so passes over ranges that tile 0..P-1 see
    every shingle of a set exactly once."""
    lo, hi, n_parts = part
    top = np.asarray(data, dtype=np.uint64) >> np.uint64(32)
    at = (top * np.uint64(n_parts)) >> np.uint64(32)
    return (at >= np.uint64(lo)) & (at < np.uint64(hi))


def _keep_part(sets: ShingleSets, part: Part | None) -> ShingleSets:
    if part is None:
        return sets
    keep = in_part(sets.data, part)
    n = len(sets.indptr) - 1
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(sets.indptr))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(row[keep], minlength=n), out=indptr[1:])
    return ShingleSets(indptr, sets.data[keep], sets.counts[keep])


def sets64_of_texts(texts: list[str | bytes], spec: ShingleSpec, part: Part | None = None) -> ShingleSets:
    """The 64-bit shingle sets of ``texts`` (one row each, as ``shingle_texts(form="sets64")``
    gives them), in memory bounded by :data:`PIECE_CHARS` whatever the texts' lengths.

    Short texts are shingled together, up to that many characters at a time;
    a longer one is fed through the streaming normaliser and windows in
    pieces of that size, which give the same set as shingling it whole.
    With ``part``, only the hashes of that range are kept (see :func:`in_part`):
    a long text's set is then held a range at a time.
    """
    indptr = [0]
    data: list[np.ndarray] = []
    counts: list[np.ndarray] = []

    def add(sets: ShingleSets) -> None:
        sets = _keep_part(sets, part)
        data.append(np.asarray(sets.data))
        counts.append(np.asarray(sets.counts))
        ends = np.asarray(sets.indptr[1:], dtype=np.int64) + indptr[-1]
        indptr.extend(ends.tolist())

    batch: list[str | bytes] = []
    held = 0
    for text in texts:
        if len(text) > PIECE_CHARS:
            if batch:
                add(sets64_texts(batch, spec))
                batch, held = [], 0
            add(_sets64_in_pieces(text, spec, part))
            continue
        if held + len(text) > PIECE_CHARS and batch:
            add(sets64_texts(batch, spec))
            batch, held = [], 0
        batch.append(text)
        held += len(text)
    if batch:
        add(sets64_texts(batch, spec))
    return ShingleSets(
        np.asarray(indptr, dtype=np.int64),
        np.concatenate(data).astype(np.uint64, copy=False) if data else np.zeros(0, np.uint64),
        np.concatenate(counts).astype(np.uint32, copy=False) if counts else np.zeros(0, np.uint32),
    )


def _part_sink(counts: _Counts, part: Part | None) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """What feeds ``counts`` only the hashes of ``part`` (None: all of them, the default sink)."""
    if part is None:
        return None

    def add(data: np.ndarray, n: np.ndarray) -> None:
        keep = in_part(data, part)
        counts.add(data[keep], n[keep])

    return add


def _sets64_in_pieces(text: str | bytes, spec: ShingleSpec, part: Part | None = None) -> ShingleSets:
    if isinstance(text, bytes):
        text = text.decode("ascii")
    norm = _Normaliser(spec.lowercase, spec.unicode)
    windows = _Windows(spec, "sets64", merge_items=2 * PIECE_CHARS)
    windows.add = _part_sink(windows.counts, part) or windows.add
    for start in range(0, len(text), PIECE_CHARS):
        windows.feed(norm.feed(text[start : start + PIECE_CHARS]), False)
    windows.feed(norm.feed("", final=True), True)
    data, counts = windows.counts.merged()
    return ShingleSets(np.array([0, len(data)], np.int64), data, counts)


def windows_in_pieces(
    text: str | bytes, spec: ShingleSpec, sink: Callable[[np.ndarray, np.ndarray], None], form: str = "stream"
) -> None:
    """Hand ``sink`` the window hashes of one in-memory document (``form`` as in
    :func:`simdoc.shingling.shingle_texts`), :data:`PIECE_CHARS` characters at a time.

    The per-character folding (lowercase, Unicode) is done on the whole text
    first, so the windows are exactly those of shingling it whole (no chunk-boundary
    caveat); whitespace is collapsed and windows cut piece by piece. Memory: the text,
    its folded copy and one piece's scratch arrays, whatever the text holds.
    """
    if isinstance(text, bytes):
        text = text.decode("ascii")
    text = fold(text, spec.lowercase, spec.unicode)
    norm = _Normaliser(lowercase=False)
    windows = _Windows(spec, form, sink=sink)
    for start in range(0, len(text), PIECE_CHARS):
        windows.feed(norm.feed(text[start : start + PIECE_CHARS]), False)
    windows.feed(norm.feed("", final=True), True)


def shingle_pieces(
    pieces: Iterable[str], spec: ShingleSpec, form: str = "sets", part: Part | None = None,
    sink: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> ShingleSets:
    """The one-row sets of a document given as decoded text in pieces of any size, the same as
    of the whole text (``form``, ``part``, ``sink`` as for :func:`stream_document`)."""
    norm = _Normaliser(spec.lowercase, spec.unicode)
    windows = _Windows(spec, form)
    windows.add = sink or _part_sink(windows.counts, part) or windows.add
    for raw in chain(pieces, [None]):  # None: the end
        text = norm.feed("", final=True) if raw is None else norm.feed(raw)
        for start in range(0, len(text), PIECE_CHARS):  # ~40 bytes a character shingled at once
            windows.feed(text[start : start + PIECE_CHARS], False)
    windows.feed("", True)
    data, counts = windows.counts.merged()
    return ShingleSets(np.array([0, len(data)], np.int64), data, counts)


def stream_document(
    path: str, spec: ShingleSpec, max_bytes: int | None, follow_symlinks: bool, form: str = "sets",
    part: Part | None = None, sink: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> tuple[ReadResult, ShingleSets]:
    """Read, decode, normalise and shingle one file in chunks; returns its info and one-row sets
    (``form``: "sets" or "sets64", see :func:`simdoc.shingling.shingle_texts`; ``part``: only
    the 64-bit hashes of that range, see :func:`in_part`; ``sink``: each piece's hashes go there,
    none are kept, and the sets returned are empty)."""
    empty = ShingleSets(np.zeros(2, np.int64), np.zeros(0, np.uint32))
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return opened, empty
    fd, st = opened
    replaced = []
    at = [0]  # where the bytes the decoder is given start, counted as a whole decoding counts (after a BOM)

    def note(err: UnicodeDecodeError):
        if not replaced:
            replaced.append(at[0] + err.start)
        return escape(err)  # each byte as itself, as encodings.UNDECODABLE decodes a file read whole

    escape = codecs.lookup_error(UNDECODABLE)
    handler = f"simdoc-count-{id(note)}"
    codecs.register_error(handler, note)
    digest = hashlib.blake2b(digest_size=16)
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors=handler)
    norm = _Normaliser(spec.lowercase, spec.unicode)
    windows = _Windows(spec, form)
    windows.add = sink or _part_sink(windows.counts, part) or windows.add
    warnings: list[str] = []
    read = 0
    source = None  # the decompressing reader, for compressed files
    try:
        kind = compression_of(path)
        if kind is not None:
            try:
                source = decompressing_reader(second_file(fd), kind)
            except OSError as exc:
                return ReadResult(None, warning=f"cannot decompress: {exc}", status="unreadable"), empty

        def read_some(n: int) -> bytes:
            if source is None:
                return read_from(fd, n)
            try:
                return source.read(n)
            except Exception as exc:  # each decompressor has its own errors for bad data
                raise _BadArchive(str(exc) or type(exc).__name__) from None

        first, wide, said = True, None, None  # wide: UTF-16 or UTF-32, by a byte-order mark (simdoc.corpus.encodings)
        head = b""  # the first bytes, for the BOM
        while True:
            want = CHUNK_BYTES if max_bytes is None else min(CHUNK_BYTES, max_bytes - read)
            chunk = read_some(want) if want > 0 else b""
            if first and (wide := unicode_bom(chunk)) is not None:
                decoder = wide_decoder(wide)
            if first and (b"\x00" in chunk[:BINARY_SNIFF] if wide is None else "\x00" in chunk[: 4 * BINARY_SNIFF].decode(wide, "replace")[:BINARY_SNIFF]):
                digest.update(chunk)
                return ReadResult(None, digest.hexdigest(), warning=BINARY if wide is None else BINARY_WIDE, status="binary"), empty
            first = False
            cut = max_bytes is not None and read + len(chunk) >= max_bytes and bool(read_some(1))
            if cut:
                warnings.append(f"longer than --max-bytes {max_bytes}; only the first {max_bytes} bytes are indexed")
            final = not chunk or cut
            digest.update(chunk)
            held, bom_unread = decoder.getstate()  # bytes kept from the last chunk; BOM not looked for yet
            head = head or chunk[:3]
            at[0] = read - len(held) - (3 if not bom_unread and head == codecs.BOM_UTF8 else 0)
            read += len(chunk)
            text = decoder.decode(chunk, final=final and not cut and wide is None)  # a character cut: left out
            if wide is not None and final and not cut:  # the end of a UTF-16 or UTF-32 text, as encodings.wide_text has it
                tail, said = wide_end(decoder, wide)  # (said: not `note`, the UTF-8 error handler's name here)
                text += tail
            text = norm.feed(text, final)
            # Shingled PIECE_CHARS at a time: a chunk at once would hold ~40 bytes a character.
            for start in range(0, len(text), PIECE_CHARS):
                windows.feed(text[start : start + PIECE_CHARS], False)
            if final:
                windows.feed("", True)
                break
        after = handle_stat(fd)
        if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
            warnings.append("changed while being read; indexed as read (run again to pick up the final version)")
    except _BadArchive as exc:
        return ReadResult(None, warning=f"cannot decompress: {exc}", status="unreadable"), empty
    except OSError as exc:
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable"), empty
    finally:
        close_handle(fd)
        if source is not None:
            source.close()
    status = "ok"
    if replaced or said:
        warnings.append(said or f"invalid UTF-8 at byte {replaced[0]} ({NOT_UTF8})")
        status = "replaced"
    elif any("max-bytes" in w for w in warnings):
        status = "partial"
    data, counts = windows.counts.merged()
    sets = ShingleSets(np.array([0, len(data)], np.int64), data, counts)
    return ReadResult("", digest.hexdigest(), warning="; ".join(warnings) or None, status=status), sets

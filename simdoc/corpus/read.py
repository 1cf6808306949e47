"""How a file becomes documents: the one place that decides how each is read.

A file is read one of six ways (:func:`how_read`), by its name and size:

* ``jsonl``: a JSON Lines file, one document per line (:mod:`simdoc.corpus.formats`);
* ``parquet``: a Parquet file, one document per row (:mod:`simdoc.corpus.parquet`);
* ``warc``: a WARC or WET crawl, one document per HTML or text page (:mod:`simdoc.corpus.warc`);
* ``html``: an HTML page, its visible text (a page over
  :data:`simdoc.corpus.formats.MEMBER_BYTES` is skipped, unread: it is parsed whole);
* ``streamed``: a file over :data:`simdoc.corpus.streaming.STREAM_BYTES`, or any
  compressed file, shingled in chunks in bounded memory;
* ``whole``: every other file, read at once.

The shingle stage reads files with :func:`read_file` (every document of a
file). Verification and ``simdoc show`` read an indexed document again with
:func:`read_again`, the way the docs table says it was read, and learn
whether its digest is still the one indexed; verification reads the members
of one JSON Lines file in one pass with :func:`read_member_texts`, and
shingles a ``streamed`` document in pieces (:mod:`simdoc.corpus.streaming`)
rather than hold its text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simdoc.digests import blake2b_16
from simdoc.corpus.files import ReadResult, compression_of, file_digest, read_document
from simdoc.corpus.formats import member_id, read_jsonl
from simdoc.corpus.html import WEB_EXTRA, html_to_text, in_declared_charset, is_html
from simdoc.corpus import formats, jsonl_ranges, parquet, streaming, warc_spans
from simdoc.corpus.jsonl_ranges import Piece, Rows, read_range
from simdoc.corpus.jsonl_at import texts_at as jsonl_texts_at
from simdoc.corpus.parquet import PARQUET_EXTRA, is_parquet, read_groups, read_parquet
from simdoc.corpus.parquet import texts_at as parquet_texts_at
from simdoc.corpus.walk import is_jsonl, is_warc
from simdoc.corpus.warc import WarcReading, read_warc, texts_at
from simdoc.errors import CorpusError

MEMBER_WAYS = ("jsonl", "warc", "parquet")


def no_pyarrow() -> CorpusError:
    """The error for a Parquet file read without pyarrow installed."""
    return CorpusError(f"Parquet files need {PARQUET_EXTRA}", hint="install it, or leave the .parquet files out with --exclude '*.parquet'")


def how_read(path: str, size: int) -> str:
    """How a file of this name and size is read into documents (see the module docstring)."""
    way = _way_by_name(name_key(path))
    if way == "compressed" or (way == "whole" and size > streaming.STREAM_BYTES):
        return "streamed"
    return way


def indexed_file_digest(path: str, how: str, max_bytes: int | None, follow_symlinks: bool) -> str | None:
    """BLAKE2b-128 (hex) of a file's bytes as the docs table's ``file_digest`` holds it for a file read
    ``how``, read in chunks, never held: a WARC file's as stored (a .warc.gz is not inflated for it),
    a JSON Lines or Parquet file's decompressed and whole (--max-bytes cuts its members, not it),
    any other's decompressed, its first ``max_bytes``. None if it cannot be read."""
    if how == "warc":
        return file_digest(path, None, follow_symlinks, decompress=False)
    return file_digest(path, None if how in ("jsonl", "parquet") else max_bytes, follow_symlinks)


def name_key(path: str) -> str:
    """The end of a path that tells how it is read: its name from the second-to-last dot (``.jsonl.gz``,
    ``.warc.wet``, ``.txt``; "" for a name without a dot).

    Every suffix the ways are told by is one dot and what follows, without a ``/``, after at most one
    compression suffix: it lies within this end. A corpus has few distinct ends, so the shingle
    stage's 10^5 files cost a cache look-up each (the name itself, or its last 16 characters, differs
    from file to file).
    """
    start = path.rfind("/") + 1
    last = path.rfind(".", start)
    if last < 0:
        return ""
    before = path.rfind(".", start, last)
    return path[before if before >= 0 else last :]


@lru_cache(maxsize=1024)
def _way_by_name(end: str) -> str:
    """how_read by name alone, from :func:`name_key`."""
    if is_jsonl(end):
        return "jsonl"
    if is_warc(end):
        return "warc"
    if is_parquet(end):
        return "parquet"
    if is_html(end):
        return "html"
    return "compressed" if compression_of(end) else "whole"


def text_digest(text: str) -> bytes:
    """BLAKE2b-128 of a member's text (UTF-8): a member's digest in the docs table."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def text_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@dataclass
class Member:
    """One document of a JSON Lines, WARC or Parquet file (``offset``, ``length``: where it is, see
    :class:`simdoc.store.doctable.DocsTable`; a Parquet row: its row group and row in it)."""

    id: str
    text: str
    offset: int
    length: int


@dataclass
class FileRead:
    """What reading one file gave: the read result (digest of its bytes, status, warning),
    its members when it holds many documents (None otherwise), and the members it
    left out or skipped (id, why)."""

    result: ReadResult
    members: list[Member] | None = None
    left_out: list[tuple[str, str]] | None = None
    rows: Rows | None = None  # a JSON Lines range's members as columns (then ``members`` is empty)


def read_file(
    path: str, doc_id: str, how: str, max_bytes: int | None, follow: bool, fields: tuple, *, main_content: bool = False,
    all_responses: bool = False,
) -> FileRead:
    """Read a file that is not streamed: its text (``whole``, ``html``) or its members.

    ``main_content``: only the main text of HTML pages; ``all_responses``:
    every HTTP response and revisit of a WARC file (see :mod:`simdoc.corpus.warc`).

    Raises
    ------
    CorpusError
        a Parquet file, and pyarrow is not installed.
    """
    if how == "parquet":
        try:
            got = read_parquet(path, doc_id, *fields, max_bytes=max_bytes, follow_symlinks=follow)
        except ImportError:
            raise no_pyarrow() from None
        return FileRead(got.result, [Member(*d) for d in got.docs], got.skipped)
    if how == "warc":
        return _read_warc(path, doc_id, WarcReading(max_bytes, main_content, all_responses))
    if how == "jsonl":  # line by line: memory bounded by one line, --max-bytes cuts each member
        res, docs, notes, skipped = read_jsonl(path, doc_id, *fields, max_bytes=max_bytes, follow_symlinks=follow)
        res.warning = "; ".join(([res.warning] if res.warning else []) + notes) or None
        return FileRead(res, [Member(*d) for d in docs], skipped)
    res = read_document(path, max_bytes=max_bytes, follow_symlinks=follow, keep_ascii=how == "whole", whole_up_to=_html_bound(how))
    if how == "html" and res.text is not None:
        in_declared_charset(res)
        try:
            res.text = html_to_text(res.text, main_content)
        except ImportError:
            return FileRead(ReadResult(None, res.digest, warning=f"HTML needs an extractor: {WEB_EXTRA}", status="unreadable"))
    return FileRead(res)


def _html_bound(how: str) -> int | None:
    """The most bytes of a file read this way that are held whole: an HTML page is parsed whole,
    so one longer than a JSON Lines line may be is skipped, unread (None: no bound, or streamed)."""
    return formats.MEMBER_BYTES if how == "html" else None


def _read_warc(path: str, doc_id: str, reading: WarcReading) -> FileRead:
    try:
        got = read_warc(path, doc_id, reading)
    except ImportError:
        return FileRead(ReadResult(None, warning=f"its HTML pages need {WEB_EXTRA}", status="unreadable"), [])
    except OSError as exc:
        return FileRead(ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable"), [])
    res = ReadResult("", got.digest, warning="; ".join(got.warnings) or None)
    return FileRead(res, [Member(*d) for d in got.docs], got.left_out)


def _read_warc_span(path: str, source: str, span: tuple[int, int], reading: WarcReading) -> tuple[FileRead, Piece]:
    try:
        piece = warc_spans.read_span(path, *span, reading)
    except ImportError:
        piece = warc_spans.Span(span[0], failed=ReadResult(None, warning=f"its HTML pages need {WEB_EXTRA}", status="unreadable"))
    except OSError as exc:
        piece = warc_spans.Span(span[0], failed=ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable"))
    piece.source, piece.last = source, span[1] >= warc_spans._END
    docs = [Member(member_id(source, str(ev.number)), ev.text, ev.offset, ev.length) for ev in piece.events if ev.text is not None]
    for ev in piece.events:
        if ev.text is not None:
            ev.text = ""  # the join needs to know it was a document, not its text
    return FileRead(piece.failed or ReadResult("", piece.digest), docs), piece


def spans_of(path: str, size: int, text_field: str, follow: bool) -> list[tuple[int, int]] | None:
    """The spans a file is read by, one task each, or None: one task reads it whole. A big plain
    JSON Lines file: byte ranges (:mod:`simdoc.corpus.jsonl_ranges`); a big Parquet file of
    several row groups: spans of row groups (:func:`simdoc.corpus.parquet.cut`, which reads its footer)."""
    if jsonl_ranges.can_cut(path, size):
        return jsonl_ranges.cut(size)
    if warc_spans.can_cut(path, size):
        try:
            return warc_spans.cut(path)
        except OSError:
            return None  # the one task says what
    if is_parquet(path):
        return parquet.cut(path, size, text_field, follow)
    return None


def read_range_file(
    path: str, source: str, span: tuple[int, int], fields: tuple, max_bytes: int | None, follow: bool,
    warc: WarcReading | None = None,
) -> tuple[FileRead, Piece]:
    """The members of one span of a file (see :func:`spans_of`): the span's members as a
    :class:`FileRead` (ids counted from the span), and the piece for the join without its texts.

    Raises
    ------
    CorpusError
        a Parquet file, and pyarrow is not installed.
    """
    if is_warc(path):  # spans of records (simdoc.corpus.warc_spans), read as `warc` says
        return _read_warc_span(path, source, span, warc or WarcReading(max_bytes))
    if is_parquet(path):
        try:
            piece = read_groups(path, source, *span, *fields, max_bytes=max_bytes, follow_symlinks=follow)
        except ImportError:
            raise no_pyarrow() from None
    else:
        piece = read_range(path, source, *span, fields[0], max_bytes, follow, fields[1])
    res = piece.failed or ReadResult("", piece.digest)
    got = FileRead(res, [Member(*d) for d in piece.docs], rows=piece.rows)
    piece.docs, piece.rows = [], None
    return got, piece


def read_member_texts(
    path: str, source: str, how: str, wanted: dict[str, bytes], max_bytes, follow, fields, *,
    offsets: dict[str, int] | None = None, main_content: bool = False, all_responses: bool = False,
    lengths: dict[str, int] | None = None,
) -> dict[str, str | None]:
    """Texts of some members of one JSON Lines, WARC or Parquet file, in one pass over it (WARC: by
    ``offsets``, the offset of each wanted member, see :func:`simdoc.corpus.warc.texts_at`; Parquet:
    by ``offsets``, the (row group, row) of each, see :func:`simdoc.corpus.parquet.texts_at`).
    A plain JSON Lines file with ``offsets`` and ``lengths`` is not parsed whole: each wanted
    line is read where it is (:func:`simdoc.corpus.jsonl_at.texts_at`).

    ``wanted`` maps member id to the digest indexed; a member whose text no
    longer has that digest, or that is gone, maps to None.
    """
    out: dict[str, str | None] = dict.fromkeys(wanted)
    if how == "parquet":
        at = {offsets[i]: wanted[i] for i in wanted if i in offsets}
        try:
            texts = parquet_texts_at(path, at, fields[0], max_bytes, follow)
        except ImportError:
            raise no_pyarrow() from None
        for i in wanted:
            text = texts.get(offsets.get(i, (-1, -1)))
            out[i] = text if text is not None and text_digest(text) == wanted[i] else None
    elif how == "jsonl":
        if lengths is not None and offsets is not None and compression_of(path) is None:
            at = {i: (offsets.get(i, -1), lengths.get(i, -1)) for i in wanted}
            for i, text in jsonl_texts_at(path, at, fields[0], max_bytes, follow).items():
                out[i] = text if text is not None and text_digest(text) == wanted[i] else None
            # A member not found where it was (lines moved, or it changed) is looked for by id in the
            # whole file, as a compressed file's members are: its text is still checked by digest.
            wanted = {i: d for i, d in wanted.items() if out[i] is None}
        if wanted:
            got = read_file(path, source, how, max_bytes, follow, fields, main_content=main_content)
            for m in got.members or []:
                if m.id in wanted:
                    out[m.id] = m.text if text_digest(m.text) == wanted[m.id] else None
    elif how == "warc":
        at = {offsets[i]: wanted[i] for i in wanted if offsets.get(i, -1) >= 0}
        texts = texts_at(path, at, WarcReading(max_bytes, main_content, all_responses))
        for i in wanted:
            text = texts.get(offsets.get(i, -1))
            out[i] = text if text is not None and text_digest(text) == wanted[i] else None
    return out


@dataclass
class Reread:
    """An indexed document read again: today's text and whether it is the text indexed.

    ``text`` is None when the document cannot be read any more (``problem``
    says why: a message fragment naming no path); ``same`` is False when it
    can, but its digest is not the one in the docs table.
    """

    text: str | None
    same: bool
    problem: str | None = None


def read_again(
    path: str, doc_id: str, how: str, digest: bytes, *, source: str | None = None, offset: int = -1,
    max_bytes: int | None = None, follow: bool = False, fields: tuple = ("text", None), search: bool = False,
    ascii_bytes: bool = False, main_content: bool = False, all_responses: bool = False, length: int = -1,
) -> Reread:
    """One indexed document read again from ``path``, the way the index read it (``how``).

    A file (``whole``, ``html``, ``streamed``: read whole here) is compared by
    the digest of its bytes; a member (``jsonl``, ``warc``) by the digest of
    its text. A WARC member is read at ``offset``, where its record started;
    with ``search``, a member no longer there is looked for by id in the
    whole archive (``simdoc show`` wants today's text even if it moved).
    A Parquet member is read at row ``length`` of row group ``offset``, and
    with ``search`` looked for by id in the whole file.
    With ``ascii_bytes``, an all-ASCII file read whole comes back as bytes
    (the shingling kernels take them as they are; see ``read_document``).
    """
    if how in MEMBER_WAYS:
        try:
            text = None
            if how == "warc":
                reading = WarcReading(max_bytes, main_content, all_responses)
                text = texts_at(path, {offset: digest}, reading)[offset] if offset >= 0 else None
                if text is not None and text_digest(text) == digest:
                    return Reread(text, True)
                if search:
                    text = {m[0]: m[1] for m in read_warc(path, source or doc_id, reading).docs}.get(doc_id)
            elif how == "parquet":
                text = parquet_texts_at(path, {(offset, length): digest}, fields[0], max_bytes, follow)[(offset, length)]
                if (text is None or text_digest(text) != digest) and search:
                    got = read_parquet(path, source or doc_id, *fields, max_bytes=max_bytes, follow_symlinks=follow)
                    text = {m[0]: m[1] for m in got.docs}.get(doc_id)
            else:
                res, members, _, _ = read_jsonl(path, source or doc_id, *fields, max_bytes=max_bytes, follow_symlinks=follow)
                if res.text is None:
                    return Reread(None, False, res.warning)
                text = {m[0]: m[1] for m in members}.get(doc_id)
        except ImportError:
            return Reread(None, False, f"Parquet needs {PARQUET_EXTRA}" if how == "parquet" else f"{how.upper()} needs {WEB_EXTRA}")
        except OSError as exc:
            return Reread(None, False, f"cannot read {source or doc_id} ({exc.strerror or exc})")
        if text is None:
            return Reread(None, False, f"no longer in {source or doc_id}")
        return Reread(text, text_digest(text) == digest)
    res = read_document(
        path, max_bytes=max_bytes, follow_symlinks=follow, keep_ascii=ascii_bytes and how == "whole", whole_up_to=_html_bound(how)
    )
    if res.text is None:
        return Reread(None, False, res.warning)
    text = res.text
    if how == "html":
        in_declared_charset(res)
        text = res.text
        try:
            text = html_to_text(text, main_content)
        except ImportError:
            pass  # the index could not have read it either: the markup is today's text
    return Reread(text, res.digest == digest.hex())


def member_identities(digests: np.ndarray, how: str) -> np.ndarray:
    """:func:`identity` of each member read ``how`` (one of MEMBER_WAYS), or of each file read
    ``whole``, with these (n, 16) digests, as an (n, 16) array: these do not depend on the id
    (a file read whole is not compressed: its name says so), so a task's are made at once, by
    one call of the BLAKE2b kernel over the digests and their tails."""
    return identities_with_tail(digests, identity_tail(how))


def identities_with_tail(digests: np.ndarray, tail: bytes) -> np.ndarray:
    """BLAKE2b-128 of each of the (n, 16) ``digests`` followed by ``tail`` (:func:`_identity_tail`),
    as an (n, 16) array: :func:`identity` of documents that share a way of reading, by one call."""
    digests = np.asarray(digests, dtype=np.uint8).reshape(-1, 16)
    tail_a = np.frombuffer(tail, dtype=np.uint8)
    keyed = np.concatenate([digests, np.broadcast_to(tail_a, (len(digests), len(tail_a)))], axis=1)
    return blake2b_16(keyed.reshape(-1), np.arange(len(digests) + 1, dtype=np.int64) * keyed.shape[1])


def identities(
    digests: np.ndarray, how: np.ndarray, ways: Sequence[str], file_ids: Callable[[np.ndarray], list[str]], block: int = 1 << 16
) -> np.ndarray:
    """:func:`identity` of every document, as an (n, 16) array, from its digest and how it was
    read (``how``: codes, ``ways[code]`` the way's name); ``file_ids(rows)``: the ids of those
    rows, asked only for documents that are files (whose name says their compression), never
    for members (a file of 10^6 members: no id made), and ``block`` rows at a time (the ids of
    10^7 files at once would be ~1 GB of strings)."""
    digests = np.asarray(digests, dtype=np.uint8).reshape(-1, 16)
    how = np.asarray(how)
    out = np.empty((len(digests), 16), dtype=np.uint8)
    for code in np.unique(how).tolist():
        way, at = ways[int(code)], np.flatnonzero(how == code)
        if way in MEMBER_WAYS:
            out[at] = identities_with_tail(digests[at], _identity_tail(way, ""))
            continue
        for a in range(0, len(at), block):
            rows = at[a : a + block]
            extras = np.array([compression_of(i) or "" for i in file_ids(rows)], dtype=object)
            for extra in set(extras.tolist()):
                some = rows[extras == extra]
                out[some] = identities_with_tail(digests[some], _identity_tail(way, extra))
    return out


def identity_tail(how: str) -> bytes:
    """What :func:`identity` hashes after the digest of a member read ``how`` (one of MEMBER_WAYS), or of a file read whole."""
    if how not in MEMBER_WAYS and how != "whole":
        raise ValueError(f"not a way members are read: {how!r}")
    return _identity_tail(how, "")


def identity(digest: bytes, how: str, doc_id: str) -> bytes:
    """What identifies a document's text: its digest, how it was read, and (for a file) its
    compression by name, since the same bytes read another way give another text."""
    extra = "" if how in MEMBER_WAYS else (compression_of(doc_id) or "")
    return hashlib.blake2b(digest + _identity_tail(how, extra), digest_size=16).digest()


@lru_cache(maxsize=64)
def _identity_tail(how: str, extra: str) -> bytes:
    """What :func:`identity` hashes after the digest (a few kinds in a corpus: 10^5 documents
    encode the same few strings once)."""
    return how.encode() + b"\0" + extra.encode()

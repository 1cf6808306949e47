"""Web crawls: the documents of a WARC or WET file, read as crawlers write them.

A file is a crawl by its name (:func:`simdoc.corpus.walk.is_warc`): ``.warc`` or ``.wet``
(Common Crawl's plain text, ``.warc.wet``), stored as it is or compressed
(``.gz``, one member per record or one for the whole file; ``.bz2``,
``.xz``, ``.zst``). Its documents are

* ``response`` records with a 2xx HTTP status and an HTML or plain-text body;
* ``resource`` records with such a ``Content-Type``;
* ``conversion`` records (WET), whose block is the page's text.

Responses with another status and ``revisit`` records are left out, and
listed with the reason (``simdoc stats --skipped``), unless
``all_responses``. A record that is not whole (cut short, a
``Content-Length`` that does not end where a record does) or whose body
cannot be made text is skipped alone, with a warning naming it, and listed
too; the file's other records are kept. A damaged gzip member is skipped with
the records in it, listed as ``PATH/#@OFFSET`` (its byte in the file), and
reading goes on at the next member that starts a record
(:class:`simdoc.corpus.rawstream.Gunzip`). A body in gzip or deflate content
coding is decoded first. A body is decoded with the charset
its ``Content-Type`` names (if it names none, an HTML page that is not UTF-8,
with the one its ``<meta>`` names: :mod:`simdoc.corpus.html`); an unknown charset is read as UTF-8, and a byte
invalid in it is kept as itself (as a file's, :data:`simdoc.corpus.encodings.UNDECODABLE`),
with a warning naming the records. A UTF-8 body's
leading byte-order mark is dropped, as a file's is.

A member's id is ``PATH/#TARGET-URI``; a URI that repeats in the file gets
``#RECORD-ID`` appended (see :class:`simdoc.corpus.formats.MemberKeys`). Its
offset says where to find it again (:mod:`simdoc.corpus.warcio`): the
record's place in the file, or the offset of the gzip member it starts,
else its place in the decompressed bytes.
"""

from __future__ import annotations

import codecs
import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from simdoc.corpus import formats, warcio
from simdoc.corpus.encodings import UNDECODABLE
from simdoc.corpus.formats import MemberKeys, member_id
from simdoc.corpus.html import html_to_text, meta_charset

DOC_TYPES = ("response", "resource", "conversion", "revisit")
TEXT_TYPES = ("text/html", "application/xhtml", "text/plain")
HTTP_HEAD_BYTES = 1 << 16  # room for the HTTP header before a body's bound
SHOWN = 3  # records named in a warning that many share
INCLUDE_HINT = "--all-responses includes it"


@dataclass(frozen=True)
class WarcReading:
    """How records become documents: the bound on a body, main content only, every response."""

    max_bytes: int | None = None
    main_content: bool = False
    all_responses: bool = False


@dataclass
class WarcFile:
    """What one file gave: its documents (id, text, offset, length) sorted by id, warnings,
    the records left out or skipped (id, why), and the digest of its bytes."""

    docs: list[tuple[str, str, int, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    digest: str = ""


class _Notes:
    """Problems of a file's records, one warning per kind however many records share it."""

    def __init__(self) -> None:
        self.kinds: dict[str, list[str]] = {}

    def add(self, kind: str, what: str) -> None:
        self.kinds.setdefault(kind, []).append(what)

    def warnings(self) -> list[str]:
        out = []
        for kind, seen in self.kinds.items():
            if len(seen) == 1:
                out.append(f"{seen[0]}: {kind}")
            else:
                named = ", ".join(seen[:SHOWN]) + (", ..." if len(seen) > SHOWN else "")
                out.append(f"{len(seen):,} records ({named}): {kind}")
        return out


def _limit(reading: WarcReading) -> int:
    return formats.MEMBER_BYTES if reading.max_bytes is None else reading.max_bytes


def read_warc(
    path: str, source: str, reading: WarcReading = WarcReading(), keep: Callable[[str], object] | None = None,
) -> WarcFile:
    """Every document of a WARC or WET file, in one pass (see the module docstring).

    With ``keep``, each document holds ``keep(text)`` in place of its text
    (e.g. where it was written out), so that the documents do not hold the file's text.

    Raises ImportError when an HTML body needs the ``web`` extra, and OSError
    when the file cannot be read; nothing else for the file's own problems.
    """
    digest = hashlib.blake2b(digest_size=16)
    handles = []

    def open_again() -> warcio.Input:
        fh, inp = warcio.open_input(path)
        handles.append(fh)
        return inp

    fh, inp = warcio.open_input(path, digest)
    handles.append(fh)
    out = WarcFile()
    notes = _Notes()
    keys = MemberKeys(source)
    limit = _limit(reading)
    try:
        reader = warcio.RecordReader(inp, open_again)
        rec = None
        for rec in reader.records(limit + HTTP_HEAD_BYTES):
            if isinstance(rec, warcio.Broken):
                uri = (rec.headers.get("warc-target-uri") or rec.headers.get("warc-record-id") or "").replace("\0", "%00")
                what = f"record {rec.number}" + (f" ({uri})" if uri else "") + f" at byte {rec.pos:,}"
                out.warnings.append(f"{what}: {rec.reason}")
                out.left_out.append((member_id(source, uri or f"@{rec.pos}"), f"record {rec.number}: {rec.reason}"))
                continue
            got = _document(rec, reading, limit, notes)
            if got is None:
                continue
            uri, text, why = got
            key = uri.replace("\0", "%00")
            if text is None:
                out.left_out.append((member_id(source, key), why))
                continue
            if key in keys.taken:
                key = f"{key}#{rec.headers.get('warc-record-id', rec.number)}"
            doc_id, said = keys.take(key, rec.number, what="record")
            if said:
                out.warnings.append(f"record {rec.number}: {said}")
            out.docs.append((doc_id, text if keep is None else keep(text), rec.offset, rec.length))
        reader.finish()
        for member, resumed, why in reader.skipped:  # a damaged member costs its own records only
            out.warnings.append(f"{why}; the gzip member at byte {member:,} is skipped with its records, reading on at byte {resumed:,}")
            out.left_out.append((member_id(source, f"@{member}"), f"gzip member at byte {member:,}: {why}; skipped"))
        if reader.cut:
            out.warnings.append(f"{reader.cut}; the records before it are indexed")
            if not isinstance(rec, warcio.Broken):
                # No record says where the data ended (a gzip member's CRC, a .zst cut between
                # records): the records past that place are lost, and stats --skipped says so on
                # every run, not only the one warning of the run that read the file (-q hides it).
                key = f"@{reader.inp.pos}"
                out.left_out.append((member_id(source, key), f"{reader.cut}; the records from here on are not read"))
    finally:
        for h in handles:
            h.close()
    out.warnings[:0] = notes.warnings()
    out.docs.sort()
    out.digest = digest.hexdigest()
    return out


def texts_at(path: str, wanted: dict[int, bytes], reading: WarcReading = WarcReading()) -> dict[int, str | None]:
    """The texts of the documents that start at the offsets of ``wanted`` (see :func:`read_warc`).

    ``wanted`` maps an offset to the digest of the text indexed there
    (:func:`simdoc.corpus.read.text_digest`). A record that starts a gzip
    member, or any record of a file stored as it is, is read by seeking to
    it; the others in one pass over the file. An offset maps to the text
    with that digest if one is found, else to what is there now, else None.
    """
    out: dict[int, str | None] = dict.fromkeys(wanted)
    limit = _limit(reading)
    left = set(wanted)
    kind = warcio.kind_of(path)
    if kind in (None, "gzip"):
        for offset in sorted(wanted):
            opened = warcio.open_at(path, offset)
            if opened is None:
                continue
            fh, inp = opened
            try:
                for rec in warcio.RecordReader(inp).records(limit + HTTP_HEAD_BYTES, one=True):
                    got = _document(rec, reading, limit, _Notes()) if isinstance(rec, warcio.Record) else None
                    if got is not None and got[1] is not None:
                        out[offset] = got[1]
                        if _text_digest(got[1]) == wanted[offset]:
                            left.discard(offset)
            finally:
                fh.close()
        if kind is None:
            return out
    if not left:
        return out
    fh, inp = warcio.open_input(path)
    handles = [fh]

    def open_again() -> warcio.Input:
        h, again = warcio.open_input(path)
        handles.append(h)
        return again

    try:
        for rec in warcio.RecordReader(inp, open_again).records(limit + HTTP_HEAD_BYTES):
            if isinstance(rec, warcio.Record) and rec.offset in left:
                got = _document(rec, reading, limit, _Notes())
                if got is not None and got[1] is not None and (out[rec.offset] is None or _text_digest(got[1]) == wanted[rec.offset]):
                    out[rec.offset] = got[1]
    finally:
        for h in handles:
            h.close()
    return out


# ---------------------------------------------------------------- one record


def _document(rec: warcio.Record, reading: WarcReading, limit: int, notes: _Notes) -> tuple[str, str | None, str | None] | None:
    """(uri, text, None) of a record that is a document; (uri, None, why) of one left out or
    skipped; None for a record that is not a page (a request, an image, metadata)."""
    h = rec.headers
    kind = h.get("warc-type", "").lower()
    if kind not in DOC_TYPES:
        return None
    uri = h.get("warc-target-uri") or h.get("warc-record-id") or f"record {rec.number}"
    what = f"{kind} {rec.number} ({uri})"
    if kind == "revisit" and not reading.all_responses:
        return uri, None, f"revisit record, left out ({INCLUDE_HINT})"
    body = rec.block
    head = 0
    if kind in ("response", "revisit"):
        http = _http(rec.block)
        if http is None:
            if kind == "revisit":
                return None  # a revisit without an HTTP header has no page
            why = "no HTTP response header" if not rec.block.startswith(b"HTTP/") else f"no end of its HTTP header in {HTTP_HEAD_BYTES >> 10} KiB"
            notes.add(f"{why}, skipped", what)
            return uri, None, f"{why}, skipped"
        status, fields, head = http
        ctype = fields.get("content-type", "")
        if not _is_text(ctype):
            return None
        if not 200 <= status < 300 and not reading.all_responses:
            return uri, None, f"HTTP status {status}, left out ({INCLUDE_HINT})"
        body = rec.block[head:]
        if "chunked" in fields.get("transfer-encoding", "").lower():
            body = _unchunk(body)
        encoding = fields.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):  # as sent (wget keeps it); most crawlers store it decoded
            body = _content_decoded(body, encoding, limit)
            if body is None:
                notes.add(f"Content-Encoding {encoding!r} cannot be decoded, skipped", what)
                return uri, None, f"Content-Encoding {encoding!r} cannot be decoded, skipped"
    else:
        ctype = h.get("content-type", "") or ("text/plain" if kind == "conversion" else "")
        if not _is_text(ctype) and not (kind == "conversion" and ctype.lower().startswith("text/")):
            return None
    if rec.length - head > limit:
        bound = f"--max-bytes {limit}" if reading.max_bytes is not None else _size_text(limit)
        notes.add(f"body longer than {bound}; only the first {limit} bytes are indexed", what)
    cut = len(body) > limit
    body = body[:limit]
    text = _decode(body, ctype, what, notes, cut)
    if "html" in ctype.lower():
        try:
            text = html_to_text(text, reading.main_content)
        except ImportError:
            raise
        except Exception as exc:  # the extractor's own errors on a page it cannot take
            notes.add(f"the HTML extractor failed ({exc}), skipped", what)
            return uri, None, f"the HTML extractor failed ({exc}), skipped"
    return uri, text, None


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _is_text(ctype: str) -> bool:
    return ctype.strip().lower().startswith(TEXT_TYPES)


def _http(block: bytes) -> tuple[int, dict[str, str], int] | None:
    """(status, header fields lowercased, where the body starts) of an HTTP response, or None."""
    if not block.startswith(b"HTTP/"):
        return None
    end, blank = block.find(b"\r\n\r\n", 0, HTTP_HEAD_BYTES), 4
    lf = block.find(b"\n\n", 0, HTTP_HEAD_BYTES if end < 0 else end)
    if lf >= 0:
        end, blank = lf, 2
    mixed = block.find(b"\n\r\n", 0, HTTP_HEAD_BYTES if end < 0 else end)
    if mixed >= 0:  # a line ended by LF, then a blank CRLF one (as warcio reads it: the header ends there)
        end, blank = mixed, 3
    if end < 0:
        if len(block) > HTTP_HEAD_BYTES:  # no end within a header's room: its body would be read as header
            return None
        end, blank = len(block), 0
    lines = block[:end].decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = lines[0].split(None, 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        return None
    fields = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return status, fields, end + blank


def _content_decoded(body: bytes, encoding: str, limit: int) -> bytes | None:
    """An HTTP body in gzip or deflate content coding, decoded (at most ``limit`` + 1 bytes); None otherwise."""
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return None
    for wbits in ((31,) if "gzip" in encoding else (15, -15)):  # deflate: zlib-wrapped, or raw as some servers send it
        try:
            return zlib.decompressobj(wbits).decompress(body, limit + 1)
        except zlib.error:
            continue
    return None


def _unchunk(body: bytes) -> bytes:
    """A body in HTTP chunked transfer coding, joined; the body as it is if it is not one."""
    out, at = [], 0
    while True:
        eol = body.find(b"\r\n", at)
        if eol < 0:
            return body
        try:
            size = int(body[at:eol].split(b";")[0], 16)
        except ValueError:
            return body
        if size == 0:
            return b"".join(out)
        out.append(body[eol + 2 : eol + 2 + size])
        at = eol + 2 + size + 2


def _charset(ctype: str) -> str | None:
    for param in ctype.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _decode(body: bytes, ctype: str, what: str, notes: _Notes, cut: bool = False) -> str:
    """The body as text, in the charset its Content-Type names (see the module docstring).
    ``cut``: the body was cut at a byte count, and a character the cut splits is left out (as
    it is of a JSON Lines member's text), not decoded as U+FFFD with a warning."""
    named = _charset(ctype)
    charset = named or "utf-8"
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        notes.add(f"unknown charset {charset!r}, read as UTF-8", what)
        charset = name = "utf-8"
    if name == "utf-8":
        charset = "utf-8-sig"  # a leading byte-order mark is no text, as it is not a file's (rules 2)

    def decoded(charset: str, errors: str = "strict") -> str:
        if not cut:
            return body.decode(charset, errors)
        text = codecs.getincrementaldecoder(charset)(errors).decode(body, final=False)  # holds back a split character
        if not isinstance(text, str):  # not a text codec (bytes.decode refuses those itself)
            raise LookupError(f"{charset!r} is not a text encoding")
        return text

    try:
        return decoded(charset)
    except UnicodeDecodeError:
        pass
    except Exception:  # a codec that fails on its own (not a text codec)
        notes.add(f"charset {charset!r} cannot decode text, read as UTF-8", what)
        return decoded("utf-8-sig", UNDECODABLE)
    meta = meta_charset(body) if named is None and "html" in ctype.lower() else None
    if meta is not None:  # a page not UTF-8 that names its charset in a <meta> (simdoc.corpus.html)
        charset = meta
        try:
            return decoded(charset)
        except UnicodeDecodeError:
            pass
    try:
        text = decoded(charset, UNDECODABLE)
    except UnicodeDecodeError:  # an ASCII byte the charset refuses (UTF-16, ISO-2022): no lone surrogate stands for it
        notes.add("bytes invalid in their charset, replaced by U+FFFD", what)
        return decoded(charset, "replace")
    notes.add("bytes invalid in their charset, compared as they are", what)
    return text


def _text_digest(text: str) -> bytes:
    # The digest of a member's text as the docs table holds it (simdoc.corpus.read.text_digest).
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def split_warc(path: str, source: str, max_bytes: int | None = None) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    """(id, text, offset, length) of every document of a WARC file, and the warnings (see :func:`read_warc`)."""
    got = read_warc(path, source, WarcReading(max_bytes))
    return got.docs, got.warnings

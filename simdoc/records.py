"""Documents inside JSON Lines files: one document per line.

A file whose name ends in ``.jsonl`` or ``.ndjson`` (possibly compressed:
``.jsonl.gz``, ...) holds one document per line, a JSON object whose
``text_field`` (default ``text``) is the document's text. Its id is
``PATH#ID``, where ID is the value of ``id_field`` when one is named, else
the line number (from 1). Lines that are blank are ignored; a line that is
not a JSON object, or has no string text field, is skipped with a warning
naming the line; an id that repeats gets ``@LINE`` appended, with a warning.
"""

from __future__ import annotations

import json

from simdoc.corpus import COMPRESSED

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def is_jsonl(path: str) -> bool:
    for suffix in COMPRESSED:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return path.endswith(JSONL_SUFFIXES)


SHOWN_LINES = 3  # line numbers quoted in a warning that many lines share


def split_jsonl(
    text: str, source: str, text_field: str = "text", id_field: str | None = None
) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    """(document id, text, byte offset, byte length) of every usable line, sorted by id, and warnings.

    The offset and length locate the line in the file's (decompressed) bytes.
    A problem on one line is one warning naming the line; the same problem on
    many lines (a misspelt ``--text-field`` on every line of a large file) is
    still one warning, with the count and the first few line numbers.
    """
    docs: dict[str, tuple[str, int, int]] = {}
    offset = 0
    problems: dict[str, list[tuple[int, str]]] = {}  # kind -> (line, what to say of that line alone)
    fields_seen: list[str] | None = None  # the keys of the first object without the text field

    def note(kind: str, lineno: int, message: str) -> None:
        problems.setdefault(kind, []).append((lineno, message))

    for lineno, line in enumerate(text.split("\n"), 1):
        start = offset
        length = len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
        offset += length + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            note("not valid JSON, skipped", lineno, "not valid JSON, skipped")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
            what = f"no string field {text_field!r}, skipped"
            note(what, lineno, what)
            if fields_seen is None and isinstance(obj, dict):
                fields_seen = list(obj)
            continue
        key = str(lineno)
        if id_field is not None:
            if id_field in obj and obj[id_field] is not None:
                key = str(obj[id_field])
            else:
                what = f"no field {id_field!r}, its id is the line number"
                note(what, lineno, what)
        doc_id = f"{source}#{key}"
        if doc_id in docs:
            note("an id that repeats gets @LINE appended", lineno, f"id {key!r} repeats, this one is {key}@{lineno}")
            doc_id = f"{doc_id}@{lineno}"
        docs[doc_id] = (obj[text_field], start, length)
    warnings = [_summarise(kind, seen) for kind, seen in problems.items()]
    if fields_seen and not docs:
        shown = ", ".join(fields_seen[:8]) + (", ..." if len(fields_seen) > 8 else "")
        warnings.append(f"the objects have the fields {shown}: name the one with the text with --text-field")
    return sorted((d, t, o, n) for d, (t, o, n) in docs.items()), warnings


def _summarise(kind: str, seen: list[tuple[int, str]]) -> str:
    """One warning for one kind of problem, however many lines have it."""
    if len(seen) == 1:
        lineno, message = seen[0]
        return f"line {lineno}: {message}"
    first = ", ".join(str(n) for n, _ in seen[:SHOWN_LINES]) + (", ..." if len(seen) > SHOWN_LINES else "")
    return f"{len(seen):,} lines ({first}): {kind}"


# ---------------------------------------------------------------- web pages

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
# Not `pip install 'simdoc[web]'`: the package index's "simdoc" is another project.
WEB_EXTRA = "resiliparse and fastwarc: pip install resiliparse (or, in simdoc's source folder, pip install '.[web]')"


def is_warc(path: str) -> bool:
    return path.endswith(WARC_SUFFIXES)


def is_html(path: str) -> bool:
    for suffix in COMPRESSED:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return path.lower().endswith(HTML_SUFFIXES)


def html_to_text(html: str) -> str:
    """Visible text of an HTML page, by resiliparse's extractor (scripts, styles and tags dropped).

    Raises
    ------
    ImportError
        resiliparse is not installed (the ``web`` extra).
    """
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False)


def split_warc(path: str, source: str) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    """(document id, text, offset, length) of every HTTP response with an HTML or text body in a WARC file.

    The id is ``PATH#TARGET-URI``; a URI that repeats in the file gets
    ``#RECORD-ID`` appended. HTML bodies go through :func:`html_to_text`. The
    offset is where the record starts in the file (compressed, for a
    ``.warc.gz`` of one gzip member per record, as crawlers write them), the
    length how far the next record read starts after it (-1 for the last):
    :func:`warc_record_at` reads it back.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    docs: dict[str, tuple[str, int]] = {}
    warnings: list[str] = []
    starts: list[int] = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True):
            starts.append(rec.stream_pos)
            got = _response_text(rec)
            if got is None:
                continue
            uri, text = got
            doc_id = f"{source}#{uri}"
            if doc_id in docs:
                doc_id = f"{doc_id}#{rec.record_id}"
            docs[doc_id] = (text, rec.stream_pos)
    following = {a: b - a for a, b in zip(starts, starts[1:])}
    return sorted((d, t, o, following.get(o, -1)) for d, (t, o) in docs.items()), warnings


def _response_text(rec) -> tuple[str, str] | None:
    """(target URI, text) of a response record with an HTML or text body; None for other bodies."""
    ctype = (rec.http_content_type or "").lower()
    if not (ctype.startswith("text/html") or ctype.startswith("application/xhtml") or ctype.startswith("text/plain")):
        return None
    body = rec.reader.read()
    text = body.decode(rec.http_charset or "utf-8", errors="replace")
    if "html" in ctype:
        text = html_to_text(text)
    return rec.headers.get("WARC-Target-URI") or rec.record_id, text


def warc_record_at(path: str, offset: int) -> str | None:
    """The text of the response record that starts at ``offset`` of a WARC file (see split_warc),
    or None if no such record starts there."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            for rec in ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True):
                if rec.stream_pos != offset:
                    return None
                got = _response_text(rec)
                return None if got is None else got[1]
    except (OSError, ValueError):  # no record starts there (fastwarc: "Invalid WARC header")
        return None
    return None

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
) -> tuple[list[tuple[str, str]], list[str]]:
    """(document id, text) of every usable line, sorted by id, and warnings.

    A problem on one line is one warning naming the line; the same problem on
    many lines (a misspelt ``--text-field`` on every line of a large file) is
    still one warning, with the count and the first few line numbers.
    """
    docs: dict[str, str] = {}
    problems: dict[str, list[tuple[int, str]]] = {}  # kind -> (line, what to say of that line alone)
    fields_seen: list[str] | None = None  # the keys of the first object without the text field

    def note(kind: str, lineno: int, message: str) -> None:
        problems.setdefault(kind, []).append((lineno, message))

    for lineno, line in enumerate(text.split("\n"), 1):
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
        docs[doc_id] = obj[text_field]
    warnings = [_summarise(kind, seen) for kind, seen in problems.items()]
    if fields_seen and not docs:
        shown = ", ".join(fields_seen[:8]) + (", ..." if len(fields_seen) > 8 else "")
        warnings.append(f"the objects have the fields {shown}: name the one with the text with --text-field")
    return sorted(docs.items()), warnings


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
WEB_EXTRA = "pip install 'simdoc[web]' (resiliparse and fastwarc)"


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


def split_warc(path: str, source: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(document id, text) of every HTTP response with an HTML or text body in a WARC file.

    The id is ``PATH#TARGET-URI``; a URI that repeats in the file gets
    ``#RECORD-ID`` appended. HTML bodies go through :func:`html_to_text`.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    docs: dict[str, str] = {}
    warnings: list[str] = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True):
            ctype = (rec.http_content_type or "").lower()
            if not (ctype.startswith("text/html") or ctype.startswith("application/xhtml") or ctype.startswith("text/plain")):
                continue
            body = rec.reader.read()
            text = body.decode(rec.http_charset or "utf-8", errors="replace")
            if "html" in ctype:
                text = html_to_text(text)
            uri = rec.headers.get("WARC-Target-URI") or rec.record_id
            doc_id = f"{source}#{uri}"
            if doc_id in docs:
                doc_id = f"{doc_id}#{rec.record_id}"
            docs[doc_id] = text
    return sorted(docs.items()), warnings

"""Documents inside JSON Lines and WARC files: one document per line, or per response.

A file whose name ends in ``.jsonl`` or ``.ndjson`` (possibly compressed:
``.jsonl.gz``, ...) holds one document per line, a JSON object whose
``text_field`` (default ``text``) is the document's text. Lines that are
blank are ignored; a line that is not a JSON object, or has no string text
field, is skipped with a warning naming the line.

A member's id is ``PATH/#KEY``: PATH is the file's id and KEY the value of
``id_field`` when one is named, else the line number (from 1). PATH is a
file, so no plain file's id starts with ``PATH/`` and members of two files
never share an id: ids are unique by construction across the corpus (and
sort together, see :func:`simdoc.corpus.walk_key`). Within one file, a key
that is already taken gets ``@LINE`` appended (again, until it is free),
with a warning naming both lines; a key with a NUL byte is replaced by the
line number, with a warning.
"""

from __future__ import annotations

import json

from simdoc.corpus import COMPRESSED, MEMBER_SEPARATOR
from simdoc.corpus import JSONL_SUFFIXES, WARC_SUFFIXES, is_jsonl, is_warc  # noqa: F401  (the names of member files)


# How member ids are formed, recorded with the shingle stage's parameters: an index whose
# members were named another way (version 1: PATH#KEY, which a plain file could repeat)
# is rebuilt rather than updated.
MEMBER_IDS = 2


def member_id(source: str, key: str) -> str:
    """The id of the document ``key`` inside the file whose id is ``source``."""
    return f"{source}{MEMBER_SEPARATOR}{key}"


class MemberKeys:
    """The keys of one file's members, made unique as they come (see the module docstring)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.taken: dict[str, object] = {}  # key -> where it was taken (a line number)

    def take(self, key: str, where: object, warnings: list[str], what: str = "line") -> str:
        """The id of a member whose wanted key is ``key``; says so in ``warnings`` if it had to change."""
        if key in self.taken:
            new = f"{key}@{where}"
            while new in self.taken:
                new += f"@{where}"
            warnings.append(f"{what} {where}: id {key!r} is taken (by {what} {self.taken[key]}); this one is {new!r}")
            key = new
        self.taken[key] = where
        return member_id(self.source, key)


def split_jsonl(
    text: str, source: str, text_field: str = "text", id_field: str | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(document id, text) of every usable line, sorted by id, and warnings."""
    docs: list[tuple[str, str]] = []
    warnings: list[str] = []
    keys = MemberKeys(source)
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            warnings.append(f"line {lineno}: not valid JSON, skipped")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
            warnings.append(f"line {lineno}: no string field {text_field!r}, skipped")
            continue
        key = str(lineno)
        if id_field is not None:
            if id_field in obj and obj[id_field] is not None:
                key = str(obj[id_field])
                if "\0" in key:
                    warnings.append(f"line {lineno}: its id has a NUL byte; its id is the line number")
                    key = str(lineno)
            else:
                warnings.append(f"line {lineno}: no field {id_field!r}, its id is the line number")
        docs.append((keys.take(key, lineno, warnings), obj[text_field]))
    docs.sort()
    return docs, warnings


# ---------------------------------------------------------------- web pages

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
WEB_EXTRA = "pip install 'simdoc[web]' (resiliparse and fastwarc)"


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

    The id is ``PATH/#TARGET-URI``; a URI that repeats in the file (a
    revisit) gets ``#RECORD-ID`` appended; a key still taken after that is
    made unique as in :class:`MemberKeys`, with a warning. HTML bodies go
    through :func:`html_to_text`.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    docs: list[tuple[str, str]] = []
    warnings: list[str] = []
    keys = MemberKeys(source)
    with open(path, "rb") as fh:
        for number, rec in enumerate(ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True), 1):
            ctype = (rec.http_content_type or "").lower()
            if not (ctype.startswith("text/html") or ctype.startswith("application/xhtml") or ctype.startswith("text/plain")):
                continue
            body = rec.reader.read()
            text = body.decode(rec.http_charset or "utf-8", errors="replace")
            if "html" in ctype:
                text = html_to_text(text)
            key = (rec.headers.get("WARC-Target-URI") or rec.record_id).replace("\0", "%00")
            if key in keys.taken:
                key = f"{key}#{rec.record_id}"
            docs.append((keys.take(key, number, warnings, what="response"), text))
    docs.sort()
    return docs, warnings

"""The documents of a file named outside an index, read as an index would read it.

``simdoc query`` and ``simdoc show A B`` take files that are not (or not
yet) documents of an index. They must be read the way ``simdoc pairs`` reads
a corpus, or their shingles would not be comparable: a JSON Lines file is
one document per line, a WARC file one per HTML or text response, an HTML
page its visible text, a compressed file its decompressed text. Which of
these applies is :func:`simdoc.batches.how_read`'s decision, the one the
index itself follows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from simdoc.batches import how_read
from simdoc.corpus import read_document
from simdoc.records import WEB_EXTRA, html_to_text, is_warc, split_jsonl, split_warc


@dataclass
class FileTexts:
    """What one file holds: its documents as (id, text), and what to tell the user.

    ``container`` is True for files holding many documents (JSON Lines,
    WARC); ``documents`` is empty when the file could not be read.
    """

    documents: list[tuple[str, str]]
    warnings: list[str]
    container: bool


def read_file_texts(
    path: str,
    name: str | None = None,
    max_bytes: int | None = None,
    follow_symlinks: bool = False,
    text_field: str = "text",
    id_field: str | None = None,
) -> FileTexts:
    """The documents of the file at ``path``; ids start with ``name`` (default: the path).

    A plain file or page is one document whose id is ``name``; the members
    of a JSON Lines or WARC file are ``name#LINE`` (or ``name#ID`` with
    ``id_field``) and ``name#TARGET-URI``, as ``simdoc pairs`` names them.
    Warnings are prefixed with the file's name. Never raises for the file's
    own problems.
    """
    name = path if name is None else name
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        return FileTexts([], [f"{name}: cannot read: {exc.strerror or exc}"], False)
    how = how_read(path, size)
    if how == "members" and is_warc(path):
        try:
            docs, notes = split_warc(path, name)
        except ImportError:
            return FileTexts([], [f"{name}: WARC needs {WEB_EXTRA}"], True)
        except Exception as exc:  # fastwarc raises its own errors on damaged archives
            return FileTexts([], [f"{name}: cannot read WARC: {exc}"], True)
        return FileTexts(docs, [f"{name}: {n}" for n in notes], True)
    res = read_document(path, max_bytes=max_bytes, follow_symlinks=follow_symlinks)
    warnings = [f"{name}: {res.warning}"] if res.warning else []
    if res.text is None:
        return FileTexts([], warnings, how == "members")
    if how == "members":
        docs, notes = split_jsonl(res.text, name, text_field, id_field)
        return FileTexts(docs, warnings + [f"{name}: {n}" for n in notes], True)
    text = res.text
    if how == "html":
        try:
            text = html_to_text(text)
        except ImportError:
            return FileTexts([], warnings + [f"{name}: HTML needs an extractor: {WEB_EXTRA}"], False)
    return FileTexts([(name, text)], warnings, False)

"""The documents of a file named outside an index, read as an index would read it.

``simdoc query`` and ``simdoc show A B`` take files that are not (or not
yet) documents of an index. They must be read the way ``simdoc pairs`` reads
a corpus, or their shingles would not be comparable: a JSON Lines file is
one document per line, a WARC file one per HTML or text response, an HTML
page its visible text, a compressed file its decompressed text. Which of
these applies is :func:`simdoc.corpus.read.how_read`'s decision, and the
reading is :func:`simdoc.corpus.read.read_file`'s, as for the index itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from simdoc.corpus.objects import is_url, object_stat
from simdoc.corpus.read import MEMBER_WAYS, how_read, read_file


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
    main_content: bool = False,
    all_responses: bool = False,
) -> FileTexts:
    """The documents of the file at ``path``; ids start with ``name`` (default: the path).

    A plain file or page is one document whose id is ``name``; the members
    of a JSON Lines or WARC file are ``name#LINE`` (or ``name#ID`` with
    ``id_field``) and ``name#TARGET-URI``, as ``simdoc pairs`` names them.
    Warnings are prefixed with the file's name. Never raises for the file's
    own problems.
    """
    name = path if name is None else name
    if is_url(path):  # an object (s3://...): its size asked of the store, then read as the scan reads one
        st = object_stat(path)
        if st is None:
            return FileTexts([], [f"{name}: cannot read: no such object, or the store cannot be asked"], False)
        size = st.st_size
    else:
        try:
            size = os.stat(path).st_size
        except OSError as exc:
            return FileTexts([], [f"{name}: cannot read: {exc.strerror or exc}"], False)
    how = how_read(path, size)
    if how == "streamed":
        # Compressed or very large: read whole here (a query or a pair shown is one file).
        how = "whole"
    got = read_file(
        path, name, how, max_bytes, follow_symlinks, (text_field, id_field), main_content=main_content, all_responses=all_responses
    )
    res = got.result
    warnings = [f"{name}: {w}" for w in (res.warning or "").split("; ") if w]
    if got.members is not None:
        return FileTexts([(m.id, m.text) for m in got.members], warnings, True)
    if res.text is None:
        return FileTexts([], warnings, how in MEMBER_WAYS)
    text = res.text.decode("ascii") if isinstance(res.text, bytes) else res.text
    return FileTexts([(name, text)], warnings, False)

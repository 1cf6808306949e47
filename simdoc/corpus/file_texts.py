"""The documents of a file named outside an index, read as an index would read it.

``simdoc query`` and ``simdoc show A B`` take files that are not (or not
yet) documents of an index. They must be read the way ``simdoc pairs`` reads
a corpus, or their shingles would not be comparable: a JSON Lines file is
one document per line, a WARC file one per HTML or text response, an HTML
page its visible text, a compressed file its decompressed text. Which of
these applies is :func:`simdoc.corpus.read.how_read`'s decision, and the
reading is :func:`simdoc.corpus.read.read_file`'s, as for the index itself.

A JSON Lines or WARC file of queries over :data:`HELD_BYTES` (or compressed) is not
held: with ``spill``, its members' texts are written, as they are read, to an
anonymous temporary file, and read back one at a time as they are taken
(:class:`SpilledMembers`), in the order and with the ids and warnings of
reading it whole. What is held is each member's id and where its text is.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from simdoc.corpus.objects import is_url, object_stat
from simdoc.corpus.files import compression_of
from simdoc.corpus.formats import read_jsonl
from simdoc.corpus.html import WEB_EXTRA
from simdoc.corpus.read import MEMBER_WAYS, how_read, read_file
from simdoc.corpus.warc import WarcReading, read_warc
from simdoc.errors import OutputError

# A JSON Lines or WARC file of queries up to this many bytes (on disk) is read whole; a larger one, or
# a compressed one, has its members' texts spilled to a temporary file (see the module docstring).
HELD_BYTES = 4 << 20


@dataclass
class FileTexts:
    """What one file holds: its documents as (id, text), and what to tell the user.

    ``container`` is True for files holding many documents (JSON Lines,
    WARC); ``documents`` is empty when the file could not be read.
    """

    documents: Sequence[tuple[str, str]]
    warnings: list[str]
    container: bool


class SpilledMembers:
    """The members of a JSON Lines or WARC file whose texts are in a temporary file: a sequence of
    (id, text), each text read back when it is taken; its length is known without reading."""

    def __init__(self) -> None:
        try:
            self.file = tempfile.TemporaryFile(prefix="simdoc-queries-")  # freed by the system however simdoc ends
        except OSError as exc:
            raise _no_room(exc) from None
        self.size = 0
        self.members: list[tuple[str, tuple[int, int], int, int]] = []

    def keep(self, text: str) -> tuple[int, int]:
        """Write ``text`` out; where it is. surrogatepass: a JSON string may hold a lone surrogate."""
        raw = text.encode("utf-8", "surrogatepass")
        try:
            self.file.write(raw)
        except OSError as exc:  # not an OSError: the reader of the queries' file would take it for its own
            raise _no_room(exc) from None
        at, self.size = self.size, self.size + len(raw)
        return at, len(raw)

    def flush(self) -> None:
        try:
            self.file.flush()
        except OSError as exc:
            raise _no_room(exc) from None

    def __len__(self) -> int:
        return len(self.members)

    def __getitem__(self, i: int) -> tuple[str, str]:
        doc_id, (at, n), _, _ = self.members[i]
        self.file.seek(at)
        return doc_id, self.file.read(n).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for i in range(len(self.members)):
            yield self[i]

    def close(self) -> None:
        self.file.close()


def _no_room(exc: OSError) -> OutputError:
    return OutputError(
        f"cannot write the queries' texts to a temporary file in {tempfile.gettempdir()}: {exc.strerror or exc}",
        hint="set TMPDIR to a directory with room (a file of queries over 4 MiB needs about its size there)",
    )


def read_file_texts(
    path: str,
    name: str | None = None,
    max_bytes: int | None = None,
    follow_symlinks: bool = False,
    text_field: str = "text",
    id_field: str | None = None,
    main_content: bool = False,
    all_responses: bool = False,
    spill: bool = False,
) -> FileTexts:
    """The documents of the file at ``path``; ids start with ``name`` (default: the path).

    A plain file or page is one document whose id is ``name``; the members
    of a JSON Lines or WARC file are ``name#LINE`` (or ``name#ID`` with
    ``id_field``) and ``name#TARGET-URI``, as ``simdoc pairs`` names them.
    Warnings are prefixed with the file's name. Never raises for the file's
    own problems. With ``spill``, the members of a JSON Lines or WARC file over
    :data:`HELD_BYTES`, or compressed, are a :class:`SpilledMembers`.
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
    if spill and how in ("jsonl", "warc") and (size > HELD_BYTES or compression_of(path) is not None):
        if how == "warc":
            return _spilled_warc(path, name, WarcReading(max_bytes, main_content, all_responses))
        return _spilled(path, name, max_bytes, follow_symlinks, text_field, id_field)
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


def _spilled(path: str, name: str, max_bytes: int | None, follow: bool, text_field: str, id_field: str | None) -> FileTexts:
    """A JSON Lines file read as :func:`read_file` reads it, its texts spilled (see :class:`SpilledMembers`)."""
    spilled = SpilledMembers()
    res, spilled.members, notes, _ = read_jsonl(path, name, text_field, id_field, max_bytes=max_bytes, follow_symlinks=follow, keep=spilled.keep)
    spilled.flush()
    said = "; ".join(([res.warning] if res.warning else []) + notes)  # split as read_file_texts splits it
    warnings = [f"{name}: {w}" for w in said.split("; ") if w]
    return FileTexts(spilled, warnings, True)


def _spilled_warc(path: str, name: str, reading: WarcReading) -> FileTexts:
    """A WARC file read as :func:`read_file` reads it, its texts spilled (see :class:`SpilledMembers`)."""
    spilled = SpilledMembers()
    try:
        got = read_warc(path, name, reading, keep=spilled.keep)
    except ImportError:
        spilled.close()
        return FileTexts([], [f"{name}: its HTML pages need {WEB_EXTRA}"], True)
    except OSError as exc:
        spilled.close()
        return FileTexts([], [f"{name}: cannot read: {exc.strerror or exc}"], True)
    spilled.members = got.docs
    spilled.flush()
    said = "; ".join(got.warnings)  # split as read_file_texts splits it
    return FileTexts(spilled, [f"{name}: {w}" for w in said.split("; ") if w], True)

"""Documents inside JSON Lines files (one document per line) (HTML pages: :mod:`simdoc.corpus.html`).

A file whose name ends in ``.jsonl`` or ``.ndjson`` (possibly compressed:
``.jsonl.gz``, ...) holds one document per line, a JSON object whose
``text_field`` (default ``text``) is the document's text. Lines that are
blank are ignored; a line that is not a JSON object, or has no string text
field, is skipped with a warning naming the line. A file is read line by
line (:func:`read_jsonl`), decompressed as it goes: a line longer than
:data:`MEMBER_BYTES` is skipped without being held, and ``--max-bytes`` cuts
each document's text. A WARC body is read up to the same bound (:mod:`simdoc.corpus.warc`).

A member's id is ``PATH/#KEY``: PATH is the file's id and KEY the value of
``id_field`` when one is named, else the line number (from 1). PATH is a
file, so no plain file's id starts with ``PATH/`` and members of two files
never share an id: ids are unique by construction across the corpus (and
sort together, see :func:`simdoc.corpus.walk.walk_key`). Within one file, a key
that is already taken gets ``@LINE`` appended (again, until it is free),
with a warning naming both lines; a key with a NUL byte is replaced by the
line number, with a warning.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Callable, Iterator

from simdoc.corpus.encodings import UNDECODABLE, kept_decode, not_utf8_lines, unicode_bom
from simdoc.corpus.files import (
    BINARY,
    BINARY_SNIFF,
    ReadResult,
    Undecompressable,
    as_file,
    compression_of,
    decompressing_reader,
    handle_stat,
    open_regular,
)
from simdoc.corpus.streaming import STREAM_BYTES
from simdoc.corpus.walk import MEMBER_SEPARATOR
from simdoc.output import escape_name

# How member ids are formed, recorded with the shingle stage's parameters: an index whose
# members were named another way (version 1: PATH#KEY, which a plain file could repeat)
# is rebuilt rather than updated.
MEMBER_IDS = 2


SHOWN_LINES = 3  # line numbers quoted in a warning that many lines share
REPEATS = "an id that repeats gets @LINE appended"


def member_id(source: str, key: str) -> str:
    """The id of the document ``key`` inside the file whose id is ``source``."""
    return f"{source}{MEMBER_SEPARATOR}{key}"


class MemberKeys:
    """The keys of one file's members, made unique as they come (see the module docstring)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.taken: dict[str, object] = {}  # key -> where it was taken (a line number)

    def take(self, key: str, where: object, what: str = "line") -> tuple[str, str | None]:
        """The id of a member whose wanted key is ``key``, and what to say if it had to change."""
        said = None
        if key in self.taken:
            new = f"{key}@{where}"
            while new in self.taken:
                new += f"@{where}"
            # Written as the ids are printed (a byte that is not UTF-8 as \xNN), to be found in the output.
            said = f"id '{escape_name(key)}' is taken (by {what} {self.taken[key]}); this one is '{escape_name(new)}'"
            key = new
        self.taken[key] = where
        return member_id(self.source, key), said


class _JsonlMembers:
    """The documents of one JSON Lines file, added line by line (see the module docstring).

    A problem on one line is one warning naming the line; the same problem on
    many lines (a misspelt ``--text-field`` on every line of a large file) is
    still one warning, with the count and the first few line numbers.
    """

    def __init__(
        self, source: str, text_field: str, id_field: str | None, max_bytes: int | None, keep: Callable[[str], object] | None = None,
    ) -> None:
        self.text_field = text_field
        self.keep = keep  # what a member's text is held as (None: the text itself)
        self.id_field = id_field
        self.max_bytes = max_bytes
        self.keys = MemberKeys(source)
        self.docs: list[tuple[str, str, int, int]] = []  # (id, text, byte offset, byte length)
        self.problems: dict[str, list[tuple[int, str]]] = {}  # kind -> (line, what to say of that line alone)
        self.fields_seen: list[str] | None = None  # the keys of the first object without the text field
        self.cut = False  # a text was cut to --max-bytes
        # Reading a range (see simdoc.corpus.jsonl_ranges): (line, wanted key; None: the line number)
        # of each member, its key taken only when the ranges are joined, in the whole file's line order.
        self.deferred: list[tuple[int, str | None]] | None = None
        # Reading a range without --id-field: the members as columns (simdoc.corpus.jsonl_ranges.Rows),
        # named by their line numbers when the ranges are joined; ``docs`` stays empty.
        self.rows = None

    def note(self, kind: str, lineno: int, message: str) -> None:
        self.problems.setdefault(kind, []).append((lineno, message))

    def add(self, lineno: int, line: str | bytes, offset: int, length: int) -> None:
        """Add line ``lineno``, found at ``offset`` of the file's (decompressed) bytes, ``length`` bytes long."""
        if not line.strip():
            return
        try:
            obj = json.loads(line)
        except ValueError:
            self.note("not valid JSON, skipped", lineno, "not valid JSON, skipped")
            return
        except RecursionError:  # (the JSON parser recurses: 10^3 nested arrays stopped the run)
            self.note("JSON nested too deeply to parse, skipped", lineno, "JSON nested too deeply to parse, skipped")
            return
        text = obj.get(self.text_field) if isinstance(obj, dict) else None
        if not isinstance(text, str):
            what = f"no string field {self.text_field!r}, skipped"
            self.note(what, lineno, what)
            if self.fields_seen is None and isinstance(obj, dict):
                self.fields_seen = list(obj)
            return
        key, by_line = str(lineno), True
        if self.id_field is not None:
            if obj.get(self.id_field) is not None:
                key, by_line = str(obj[self.id_field]), False
                what = _unnameable(key)
                if what is not None:
                    self.note(what, lineno, what)
                    key, by_line = str(lineno), True
            else:
                what = f"no field {self.id_field!r}, its id is the line number"
                self.note(what, lineno, what)
        if self.max_bytes is not None and len(text) > self.max_bytes // 4 and _utf8_size(text) > self.max_bytes:
            text = cut_utf8(text, self.max_bytes)
            self.cut = True
            what = f"text longer than --max-bytes {self.max_bytes}; only the first {self.max_bytes} bytes are indexed"
            self.note(what, lineno, what)
        if self.rows is not None:  # a range's line numbers are its ids (no --id-field): unique
            self.rows.add(lineno, text, offset, length)
            return
        if self.deferred is not None:  # a range of the file: its keys are taken when the ranges are joined
            self.deferred.append((lineno, None if by_line else key))
            self.docs.append((member_id(self.keys.source, str(lineno)), text, offset, length))
            return
        doc_id, said = self.keys.take(key, lineno)
        if said:
            self.note(REPEATS, lineno, said)
        self.docs.append((doc_id, text if self.keep is None else self.keep(text), offset, length))

    def warnings(self) -> list[str]:
        out = [_summarise(kind, seen) for kind, seen in self.problems.items()]
        if self.fields_seen and not self.docs:
            shown = ", ".join(self.fields_seen[:8]) + (", ..." if len(self.fields_seen) > 8 else "")
            out.append(f"the objects have the fields {shown}: name the one with the text with --text-field")
        return out


def _unnameable(key: str) -> str | None:
    """Why an --id-field value cannot name a document (its problem note), or None.

    A NUL ends a name wherever names are passed as C strings; a lone surrogate (JSON's
    ``"\\ud800"``: half of a pair, no character) has no UTF-8 form, so no id, output or
    index could hold it (it stopped the whole run). But U+DC80..U+DCFF are a byte of the line
    that is not UTF-8 (:data:`~simdoc.corpus.encodings.UNDECODABLE`), which a name holds as a
    file name's (printed ``\\xNN``); ``"\\udce9"`` in JSON is that byte too."""
    if "\0" in key:
        return "its id has a NUL byte; its id is the line number"
    if not key.isascii():
        try:
            key.encode("utf-8", UNDECODABLE)
        except UnicodeEncodeError:
            return "its id has a lone surrogate (no character); its id is the line number"
    return None


def skipped_lines(source: str, problems: dict[str, list[tuple[int, str]]], unit: str = "line") -> list[tuple[str, str]]:
    """The lines of a file that held no document though they were not blank (not JSON, no string
    text field, too long), or the rows of a Parquet file whose text is null (``unit`` "row"), as
    ``stats --skipped`` lists them: (``SOURCE/#N``, why), by number. (Only warned about, they
    were gone from the index's record after the run that read them.) Sorted as ids, as the join
    of a file's ranges sorts what they left out."""
    return sorted(
        (member_id(source, str(n)), f"{unit} {n}: {kind}") for kind, seen in problems.items() if _skips(kind) for n, _ in seen
    )


def _skips(kind: str) -> bool:
    """Whether a problem leaves its line out: its kind ends in "skipped", or in "skipped (why)" as a
    line too long to parse says (that one was only warned about, never listed)."""
    return kind.endswith("skipped") or (kind.endswith(")") and kind[: kind.rfind(" (")].endswith(", skipped"))


def _summarise(kind: str, seen: list[tuple[int, str]], unit: str = "line") -> str:
    """One warning for one kind of problem, however many lines (or Parquet rows: ``unit``) have it."""
    if len(seen) == 1:
        lineno, message = seen[0]
        return f"{unit} {lineno}: {message}"
    first = ", ".join(str(n) for n, _ in seen[:SHOWN_LINES]) + (", ..." if len(seen) > SHOWN_LINES else "")
    return f"{len(seen):,} {unit}s ({first}): {kind}"


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def cut_utf8(text: str, n: int) -> str:
    """The longest prefix of ``text`` that is at most ``n`` bytes of UTF-8."""
    raw = text.encode("utf-8", "surrogatepass")[:n]
    for trim in range(4):  # a character cut in two is left out
        try:
            return raw[: len(raw) - trim].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            continue
    return raw.decode("utf-8", "ignore")


def split_jsonl(
    text: str, source: str, text_field: str = "text", id_field: str | None = None, max_bytes: int | None = None
) -> tuple[list[tuple[str, str, int, int]], list[str]]:
    """(document id, text, byte offset, byte length) of every usable line of ``text``, sorted by id, and warnings.

    The offset and length locate the line in the text's UTF-8 bytes.
    ``max_bytes`` cuts each document's text to that many bytes of UTF-8, with a warning.
    """
    members = _JsonlMembers(source, text_field, id_field, max_bytes)
    offset = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        length = _utf8_size(line)
        members.add(lineno, line, offset, length)
        offset += length + 1
    members.docs.sort()
    return members.docs, members.warnings()


# The longest line of a JSON Lines file that is read (its bytes, decompressed): a document
# is parsed whole, so a longer line is skipped, unread, with a warning. The same bound as
# the size from which a plain file is streamed; WARC bodies are cut to it.
MEMBER_BYTES = STREAM_BYTES
_CHUNK = 1 << 20


def read_jsonl(
    path: str,
    source: str,
    text_field: str = "text",
    id_field: str | None = None,
    max_bytes: int | None = None,
    follow_symlinks: bool = False,
    keep: Callable[[str], object] | None = None,
) -> tuple[ReadResult, list[tuple[str, str, int, int]], list[str], list[tuple[str, str]]]:
    """Read a JSON Lines file (compressed or not) line by line, in memory bounded by its longest line.

    Returns the file's read result (the digest of its decompressed bytes,
    its status, ``text`` None if it could not be read at all), its
    documents as :func:`split_jsonl` gives them (offsets into the
    decompressed bytes), the warnings about its lines, and the lines skipped
    (:func:`skipped_lines`). A line longer
    than :data:`MEMBER_BYTES` is skipped without being held; ``max_bytes``
    cuts each document's text, not the file. With ``keep``, each document
    holds ``keep(text)`` in place of its text (e.g. where it was written
    out), so that the documents do not hold the file's text.
    """
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return opened, [], [], []
    fd, before = opened
    members = _JsonlMembers(source, text_field, id_field, max_bytes, keep)
    digest = hashlib.blake2b(digest_size=16)
    replaced: list[int] = []  # lines with invalid UTF-8
    source_file = as_file(fd, buffering=0)
    kind = compression_of(path)
    try:
        try:
            stream = decompressing_reader(source_file, kind) if kind is not None else source_file
        except OSError as exc:  # zstd without the zstandard package
            raise Undecompressable(str(exc)) from None
        last, end = 0, 0  # the last line read whole, and where it ends (its newline included)
        reading = _Counted(_reading(stream, kind))
        try:
            try:
                for lineno, line, offset, length in _lines(reading, digest, MEMBER_BYTES):
                    add_line(members, replaced, lineno, line, 0, offset, length, MEMBER_BYTES)
                    last, end = lineno, offset + length + 1
            except _CutShort:
                # A download cut short: the lines before the cut were decompressed as written (the data
                # ends, none is damaged) and are kept; the line the cut is in, and any after it, are lost.
                # Cut just after a newline (often only the gzip trailer is missing), it cannot be told
                # whether another line followed: it is not said that one did.
                cut = CUT_SHORT if reading.n > end else CUT_AT_LINE_END
                members.note(cut, last + 1, cut)
            after = handle_stat(fd)  # before the decompressor closes it (zstandard's does)
        finally:
            if stream is not source_file:
                stream.close()
    except _Binary as exc:
        return ReadResult(None, digest.hexdigest(), warning=str(exc), status="binary"), [], [], []
    except Undecompressable as exc:
        return ReadResult(None, warning=f"cannot decompress: {exc}", status="unreadable"), [], [], []
    except OSError as exc:
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable"), [], [], []
    finally:
        source_file.close()
    notes = []
    status = "partial" if members.cut or any(k in members.problems for k in (CUT_SHORT, CUT_AT_LINE_END)) else "ok"
    if replaced:
        notes.append(not_utf8_lines(replaced))
        status = "replaced"
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        notes.append("changed while being read; indexed as read (run again to pick up the final version)")
    members.docs.sort()
    read = ReadResult("", digest.hexdigest(), warning="; ".join(notes) or None, status=status)
    return read, members.docs, members.warnings(), skipped_lines(source, members.problems)


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


class _Binary(Exception):
    """A JSON Lines file that is not UTF-8 text: its first bytes hold a NUL, or a UTF-16 or UTF-32
    byte-order mark (:func:`not_utf8_text`); the message is the reason it is skipped for."""


def not_utf8_text(first: bytes) -> _Binary | None:
    """What to raise for a JSON Lines file whose first bytes are ``first``, or None if it may be
    UTF-8 text. A byte-order mark is looked for before a NUL byte, so that the warning names the
    encoding (and the tool that converts it), not "binary"."""
    codec = unicode_bom(first)
    if codec is not None:
        name = codec.upper()
        # (No "; ": a warning is split there into lines.)
        return _Binary(f"JSON Lines in {name} (it starts with a {name} byte-order mark), skipped: simdoc reads "
                       f"JSON Lines in UTF-8 only, so convert it first (`iconv -f {name} -t UTF-8` does)")
    if b"\x00" in first[:BINARY_SNIFF]:
        return _Binary(BINARY)
    return None


class _CutShort(Undecompressable):
    """The compressed data ends before its end-of-stream marker (the file was cut short)."""


CUT_SHORT = "the compressed data ends in this line (file cut short?); it and any lines after it are lost, skipped"
CUT_AT_LINE_END = "the compressed data ends before this line (file cut short?); any lines from here on are lost, skipped"


class _Counted:
    """A read(n) that counts the bytes it has given."""

    def __init__(self, read) -> None:
        self.read_, self.n = read, 0

    def __call__(self, n: int) -> bytes:
        got = self.read_(n)
        self.n += len(got)
        return got


def _reading(stream, kind: str | None):
    """read(n) of a file or a decompressor, a decompressor's own errors turned into Undecompressable."""
    if kind is None:
        return stream.read
    # read1: what was decompressed before the data ends is returned, and the next call raises (gzip's
    # read(n) gathers its pieces in a buffer that an EOFError loses).
    read_some = getattr(stream, "read1", stream.read)

    def read(n: int) -> bytes:
        try:
            return read_some(n)
        except EOFError as exc:  # gzip, bz2, xz and simdoc.corpus.zstd_frames: the data ends early
            raise _CutShort(str(exc)) from None
        except Exception as exc:  # every decompressor raises its own kinds of errors on bad data
            raise Undecompressable(str(exc) or type(exc).__name__) from None

    return read


def _lines(read, digest, bound: int, sniff: bool = True) -> Iterator[tuple[int, bytes | None, int, int]]:
    """(line number, bytes without the newline, byte offset, byte length) of each line read.

    The bytes are None for a line longer than ``bound``. Holds at most
    ``bound`` bytes of one line plus one chunk; every byte goes through ``digest``.
    ``sniff``: the read starts at the file's start, where a NUL byte means a binary file.
    """
    held: list[bytes] = []  # the current line's pieces so far
    size = 0
    start = 0  # where the current line starts
    skipping = False  # the current line is too long: drop it as it comes
    lineno = 1
    first = True
    while chunk := read(_CHUNK):
        if first and sniff and (binary := not_utf8_text(chunk)) is not None:
            digest.update(chunk)
            raise binary
        first = False
        digest.update(chunk)
        pieces = chunk.split(b"\n")
        for i, piece in enumerate(pieces):
            size += len(piece)
            if not skipping:
                if size > bound:
                    skipping, held = True, []
                else:
                    held.append(piece)
            if i == len(pieces) - 1:
                break  # the line goes on in the next chunk
            yield lineno, (None if skipping else b"".join(held)), start, size
            start += size + 1
            lineno, held, size, skipping = lineno + 1, [], 0, False
    if skipping or size:
        yield lineno, (None if skipping else b"".join(held)), start, size


def add_line(members, replaced: list[int], lineno: int, line: bytes | None, begin: int, offset: int, length: int, bound: int) -> None:
    """A line the Python path takes (``line`` None: longer than ``bound``, skipped with a note):
    the BOM of a file's first line dropped, then given to ``members``, which says what is wrong
    with it; a line that is not UTF-8 is decoded with each such byte kept as itself
    (:data:`~simdoc.corpus.encodings.UNDECODABLE`) and its number noted."""
    if line is None:
        what = f"longer than {_size_text(bound)}, skipped (a JSON Lines document is parsed whole)"
        members.note(what, lineno, what)
        return
    if lineno == 1 and begin == 0 and line.startswith(codecs.BOM_UTF8):
        line = line[len(codecs.BOM_UTF8) :]
    text, bad = kept_decode(line)
    if bad is not None:
        replaced.append(lineno)
    members.add(lineno, text, offset, length)

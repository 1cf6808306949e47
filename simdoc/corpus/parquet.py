"""Documents inside Parquet files: one document per row (needs pyarrow, the ``parquet`` extra).

A file whose name ends in ``.parquet`` holds one document per row: the
string column ``text_field`` (``--text-field``, default ``text``) is its
text (a binary column's values are read as UTF-8, as a file's bytes are: a
byte that is not UTF-8 is kept as itself, with one warning for all such rows), and the column ``id_field`` (``--id-field``), when named, its key. A
member's id is ``PATH/#KEY`` as for JSON Lines (:mod:`simdoc.corpus.formats`):
KEY is the id column's value, else the row number counted from 1 over the
whole file, as JSON Lines counts lines; a key taken twice gets ``@ROW``
appended. A row whose text is null is skipped, with one warning for all such
rows; a text column that is not of a string type skips the file's rows, with
a warning naming its type (a binary one is text, read as UTF-8).

The file is read one row group at a time, only the text and id columns. A
member's place is its row group and its row within it, stored in the docs
table's ``offset`` and ``length`` columns (a JSON Lines member keeps a byte
offset and length there), so verification and ``simdoc show`` read that one
row group again, and take the row (:func:`texts_at`). The file's digest is
that of its bytes, read before it is parsed.

Tasks are row groups (issue 29): a file of several row groups, of
:data:`CUT_BYTES` or more, is cut by :func:`cut` into spans of consecutive
row groups holding about :data:`TASK_BYTES` of text each (the text column's
size in the file's footer), each read by a task of its own
(:func:`read_groups`), as a big JSON Lines file is cut into byte ranges
(:mod:`simdoc.corpus.jsonl_ranges`). A span numbers its rows from its own
first row; :func:`joined_read` joins the spans as that module joins ranges
(rows offset by those of the spans before, ``--id-field`` keys taken in the
whole file's row order, the first span's digest of the whole file), and one
task reading the whole file is the join of one span (:func:`read_parquet`),
so a file gives the same documents, warnings and digest however it is cut.
The last span reaches past the last row group: a file that gained row
groups since it was planned has them read too; spans past its end read
nothing. Spans that saw different files (their stats differ) are told as a
file changed while it was read.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field

from simdoc.corpus.encodings import NOT_UTF8, kept_decode, whole_chars
from simdoc.corpus.files import ReadResult, as_file, handle_stat, open_regular
from simdoc.corpus.objects import is_url
from simdoc.corpus.formats import _summarise, cut_utf8, member_id, skipped_lines
from simdoc.corpus.jsonl_ranges import Piece, _take_keys, first_lines, joined_problems, renumber

PARQUET_SUFFIXES = (".parquet",)
# Not `pip install 'simdoc[parquet]'`: the package index's "simdoc" is another project.
PARQUET_EXTRA = "pyarrow: pip install pyarrow (or, in simdoc's source folder, pip install '.[parquet]')"
TASK_BYTES = 4 << 20  # text of a Parquet file per reading task (as simdoc.corpus.jsonl_ranges.RANGE_BYTES)
HELD_BYTES = 64 << 20  # an object up to this size is read once for its digest and its rows (see _open)
CUT_BYTES = 1 << 20  # a smaller file is one task, planned without reading its footer
_LAST = 1 << 62  # the end of a file's last span: past any row group
REPEATS = "an id that repeats gets @ROW appended"


def is_parquet(path: str) -> bool:
    """A Parquet file by its name (``.parquet``)."""
    return path.lower().endswith(PARQUET_SUFFIXES)


def pyarrow_findable() -> bool:
    """Whether pyarrow is installed, asked of the import system without importing it (a
    fraction of a millisecond; the import takes a good part of a second). A pyarrow found but
    broken is still told when a Parquet file is read (:func:`simdoc.corpus.read.no_pyarrow`)."""
    import importlib.util

    try:
        return importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):
        return False


def have_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class ParquetRead:
    """What reading a Parquet file gave: its read result (its warning tells of its rows), its
    documents as (id, text, row group, row in group), and its rows skipped (id, why: a null text)."""

    result: ReadResult
    docs: list[tuple[str, str, int, int]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Groups(Piece):
    """What one span of row groups gave (a :class:`~simdoc.corpus.jsonl_ranges.Piece` whose lines
    are rows: ``docs`` are (id, text, row group, row in group), rows counted from the span's first)."""

    how: str = "parquet"
    warnings: list[str] = field(default_factory=list)  # of the file's columns: every span says them, the first is told
    seen: tuple = ()  # the file's stat as the span opened it
    max_bytes: int | None = None  # what a text was cut to (``cut``)


def _is_text_type(typ) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return (
        pa.types.is_string(typ) or pa.types.is_large_string(typ) or getattr(pa.types, "is_string_view", lambda t: False)(typ)
        or pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or getattr(pa.types, "is_binary_view", lambda t: False)(typ)
    )


def _bytes_text(raw: bytes, max_bytes: int | None) -> tuple[str, bool, bool]:
    """A binary text column's value as its text, read as a file's bytes are (UTF-8, a byte that
    is not kept as itself; cut at ``max_bytes`` before a character the cut splits): (text, cut,
    whether it is UTF-8)."""
    cut = max_bytes is not None and len(raw) > max_bytes
    text, bad = kept_decode(whole_chars(raw[:max_bytes]) if cut else raw)
    return text, cut, bad is None


def _digest(fileobj) -> str:
    digest = hashlib.blake2b(digest_size=16)
    fileobj.seek(0)
    while chunk := fileobj.read(1 << 24):
        digest.update(chunk)
    fileobj.seek(0)
    return digest.hexdigest()


class _Held(io.BytesIO):
    """An object's bytes, read once for its digest and kept for its rows; ``stat``: as it was opened."""

    def __init__(self, data: bytes, st) -> None:
        super().__init__(data)
        self.stat = st


def _open(path: str, follow_symlinks: bool, digest: bool = True):
    """(Python file, its stat before, digest of its bytes or "") or the ReadResult saying why not.

    An object (a URL) is read by ranged requests, the footer and each column
    chunk by one of its own (no read-ahead past them: that read the whole
    object again for every span and every verification); one to be digested,
    up to HELD_BYTES, is read once, whole, and its rows read from memory."""
    opened = open_regular(path, follow_symlinks, ranged=True)
    if isinstance(opened, ReadResult):
        return opened
    fd, before = opened
    fileobj = as_file(fd)  # a descriptor's file owns it; an object (a URL) is its own file
    try:
        if digest and is_url(path) and before.st_size <= HELD_BYTES:
            data = fileobj.read()
            fileobj.close()
            fileobj = _Held(data, before)
        hexdigest = _digest(fileobj) if digest else ""
    except OSError as exc:
        fileobj.close()
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    return fileobj, before, hexdigest


def cut(path: str, size: int, text_field: str = "text", follow_symlinks: bool = False) -> list[tuple[int, int]] | None:
    """The spans ``[first, end)`` of row groups a Parquet file is read by, one task each (see the
    module docstring); None: one task reads it (a small file, a single span, or a footer that
    cannot be read: that task tells why). The last span's end is past any row group.

    Consecutive row groups go together until their text column (uncompressed, as the footer
    has it) reaches :data:`TASK_BYTES`; a row group of that size or more goes alone.
    """
    if size < CUT_BYTES:
        return None
    try:
        import pyarrow.parquet as pq

        opened = open_regular(path, follow_symlinks, ranged=True)  # an object: its footer alone
        if isinstance(opened, ReadResult):
            return None
        with as_file(opened[0]) as f:
            meta = pq.ParquetFile(f).metadata
            volumes = [_volume(meta.row_group(g), text_field) for g in range(meta.num_row_groups)]
    except Exception:  # not Parquet, damaged, gone: the one task says so
        return None
    spans, first, volume = [], 0, 0
    for g, v in enumerate(volumes):
        if v >= TASK_BYTES and g > first:
            spans.append((first, g))
            first, volume = g, 0
        volume += v
        if volume >= TASK_BYTES:
            spans.append((first, g + 1))
            first, volume = g + 1, 0
    if first < len(volumes):
        spans.append((first, len(volumes)))
    if len(spans) < 2:
        return None
    return spans[:-1] + [(spans[-1][0], _LAST)]


def _volume(group, text_field: str) -> int:
    """The bytes of a row group's text column, uncompressed (all its columns if none is the text's)."""
    for c in range(group.num_columns):
        column = group.column(c)
        if column.path_in_schema == text_field:
            return column.total_uncompressed_size
    return group.total_byte_size


def read_parquet(
    path: str, source: str, text_field: str = "text", id_field: str | None = None, max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> ParquetRead:
    """Every document of a Parquet file, sorted by id (see the module docstring): the join of one
    span of all its row groups.

    Raises
    ------
    ImportError
        pyarrow is not installed (the ``parquet`` extra).
    """
    piece = read_groups(path, source, 0, _LAST, text_field, id_field, max_bytes, follow_symlinks)
    res, ids = joined_read([piece])
    if res.text is None:
        return ParquetRead(res)
    docs = sorted((renumber(i, source, 0, ids[0]), t, g, r) for i, t, g, r in piece.docs)
    return ParquetRead(res, docs, skipped_lines(source, piece.problems, "row"))  # one span: its rows are the file's


def read_groups(
    path: str, source: str, first: int, end: int, text_field: str = "text", id_field: str | None = None,
    max_bytes: int | None = None, follow_symlinks: bool = False,
) -> Groups:
    """The documents of row groups ``[first, end)`` of a Parquet file, rows counted from the span's
    first (see the module docstring). The first span (``first`` 0) digests the whole file.

    Raises
    ------
    ImportError
        pyarrow is not installed (the ``parquet`` extra).
    """
    import pyarrow.parquet as pq

    piece = Groups([], source=source, last=end >= _LAST, max_bytes=max_bytes)
    opened = _open(path, follow_symlinks, digest=first == 0)
    if isinstance(opened, ReadResult):
        piece.failed = opened
        return piece
    fileobj, before, digest = opened
    piece.digest, piece.seen = digest, (before.st_size, before.st_mtime_ns, before.st_ctime_ns, before.st_ino)
    try:
        try:
            pf = pq.ParquetFile(fileobj)
        except Exception as exc:  # pyarrow's own errors for a file that is not Parquet
            piece.failed = ReadResult(None, digest, warning=f"not a readable Parquet file: {exc}", status="unreadable")
            return piece
        names = pf.schema_arrow.names
        if text_field not in names:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            piece.warnings.append(f"no column {text_field!r}; the columns are {shown}: name the one with the text with --text-field")
        elif not _is_text_type(typ := pf.schema_arrow.field(text_field).type):
            piece.warnings.append(f"column {text_field!r} is of type {typ}, not text: its rows are skipped")
        else:
            use_id = id_field is not None and id_field in names
            if id_field is not None and not use_id:
                piece.warnings.append(f"no column {id_field!r}: the ids are row numbers")
            _read_rows(piece, pf, first, end, text_field, id_field if use_id else None, max_bytes, not is_url(path))
        after = handle_stat(fileobj)
    except OSError as exc:
        piece.failed = ReadResult(None, digest, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
        return piece
    except Exception as exc:  # a damaged row group: pyarrow raises its own kinds
        piece.failed = ReadResult(None, digest, warning=f"not a readable Parquet file: {exc}", status="unreadable")
        return piece
    finally:
        fileobj.close()
    piece.changed = (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
    piece.n_docs = len(piece.docs)
    return piece


def damaged_data(exc: BaseException) -> bool:
    """Whether pyarrow's error reading a row group says its data is damaged (a page that does not
    decompress, a bad page header: its own kinds, an OSError with no errno), not that the file
    could not be read (an I/O error has an errno) nor that memory ran out."""
    return isinstance(exc, Exception) and not isinstance(exc, MemoryError) and not (isinstance(exc, OSError) and exc.errno is not None)


def _read_rows(
    piece: Groups, pf, first: int, end: int, text_field: str, id_field: str | None, max_bytes: int | None, local: bool = True,
) -> None:
    """Add the rows of row groups ``[first, end)`` to ``piece``.

    A row group of a ``local`` file that pyarrow cannot read (its data damaged: a page that does
    not decompress, a bad page header) is skipped with its rows, each listed, and the file's
    other groups are read. Anything else (an I/O error, an object's failed request, which the
    next run retries) leaves the file unreadable, as before."""
    columns = [text_field] + ([id_field] if id_field is not None and id_field != text_field else [])
    if id_field is not None:
        piece.keys = []
    problems = piece.problems
    row_number = 0  # counted from the span's first row
    for group in range(first, min(end, pf.num_row_groups)):
        try:
            table = pf.read_row_group(group, columns=columns)
        except Exception as exc:
            if not local or not damaged_data(exc):
                raise
            n = pf.metadata.row_group(group).num_rows
            what = f"row group {group} (numbered from 0) cannot be read ({str(exc).strip() or type(exc).__name__}), skipped"
            problems.setdefault(what, []).extend((row_number + i, what) for i in range(1, n + 1))
            row_number += n
            continue
        texts = table.column(text_field).to_pylist()
        ids = table.column(id_field).to_pylist() if id_field is not None else None
        for row, text in enumerate(texts):
            row_number += 1
            if text is None:
                problems.setdefault("null text, skipped", []).append((row_number, "null text, skipped"))
                continue
            if ids is not None:
                key = ids[row]
                if isinstance(key, bytes):  # a binary id column: its bytes as a text column's are read
                    key = kept_decode(key)[0]
                if key is None or "\0" in str(key):
                    what = f"null or NUL-holding {id_field!r}, its id is the row number"
                    problems.setdefault(what, []).append((row_number, what))
                    key = None
                piece.keys.append((row_number, None if key is None else str(key)))
            if isinstance(text, bytes):
                text, cut, utf8 = _bytes_text(text, max_bytes)
                piece.cut = piece.cut or cut
                if not utf8:
                    piece.replaced.append(row_number)  # (of a binary column)
            elif max_bytes is not None and len(text) > max_bytes // 4 and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
                text, piece.cut = cut_utf8(text, max_bytes), True
            piece.docs.append((member_id(piece.source, str(row_number)), text, group, row))
    piece.n_lines = row_number


def joined_read(pieces: list[Groups]) -> tuple[ReadResult, list[dict[int, str] | None]]:
    """The read result one task reading the whole file would give (its warning tells of its rows),
    and each span's ids by row when they are not row numbers (see
    :func:`simdoc.corpus.jsonl_ranges.renumber`)."""
    for p in pieces:
        if p.failed is not None:
            f = p.failed
            return ReadResult(None, f.digest or pieces[0].digest, warning=f.warning, status=f.status), [None] * len(pieces)
    befores = first_lines(pieces)
    ids, said = _take_keys(pieces, befores, "row")
    problems = joined_problems(pieces, befores)
    if said:  # in the order one task notes them: by first row, a repeat last on its row
        problems[REPEATS] = said
        problems = dict(sorted(problems.items(), key=lambda kv: (kv[1][0][0], kv[0] == REPEATS)))
    notes, status = [], "ok"
    if any(p.cut for p in pieces):
        max_bytes = pieces[0].max_bytes
        notes.append(f"texts longer than --max-bytes {max_bytes} are cut to their first {max_bytes} bytes")
        status = "partial"
    if any(p.changed for p in pieces) or len({p.seen for p in pieces}) > 1:
        notes.append("changed while being read; indexed as read (run again to pick up the final version)")
    bad = [before + row for p, before in zip(pieces, befores) for row in p.replaced[:1]]
    if bad:
        n = sum(len(p.replaced) for p in pieces)
        notes.append(f"invalid UTF-8 in {n} row(s), the first row {bad[0]} ({NOT_UTF8})")
        status = "replaced"
    notes += pieces[0].warnings
    notes += [_summarise(kind, seen, "row") for kind, seen in problems.items()]
    return ReadResult("", pieces[0].digest, warning="; ".join(notes) or None, status=status), ids


def texts_at(
    path: str, wanted: dict[tuple[int, int], bytes | None], text_field: str = "text", max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> dict[tuple[int, int], str | None]:
    """The texts at some (row group, row) places of a Parquet file, each row group read once;
    None where there is no such row, or its text is null or not a string.

    Raises
    ------
    ImportError
        pyarrow is not installed (the ``parquet`` extra).
    """
    import pyarrow.parquet as pq

    out: dict[tuple[int, int], str | None] = dict.fromkeys(wanted)
    opened = _open(path, follow_symlinks, digest=False)  # (the rows' texts have their own digests)
    if isinstance(opened, ReadResult):
        return out
    fileobj = opened[0]
    try:
        pf = pq.ParquetFile(fileobj)
        if text_field not in pf.schema_arrow.names or not _is_text_type(pf.schema_arrow.field(text_field).type):
            return out
        by_group: dict[int, list[int]] = {}
        for group, row in wanted:
            if 0 <= group < pf.num_row_groups:
                by_group.setdefault(group, []).append(row)
        for group, rows in by_group.items():
            column = pf.read_row_group(group, columns=[text_field]).column(text_field)
            for row in rows:
                if 0 <= row < len(column):
                    text = column[row].as_py()
                    if isinstance(text, bytes):
                        text = _bytes_text(text, max_bytes)[0]
                    elif isinstance(text, str) and max_bytes is not None and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
                        text = cut_utf8(text, max_bytes)
                    out[(group, row)] = text if isinstance(text, str) else None
    except OSError:
        return out
    except Exception:  # a file that is no longer Parquet: its rows are gone
        return out
    finally:
        fileobj.close()
    return out

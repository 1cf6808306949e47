"""Documents inside Parquet files: one document per row (needs pyarrow, the ``parquet`` extra).

A file whose name ends in ``.parquet`` holds one document per row: the
string column ``text_field`` (``--text-field``, default ``text``) is its
text, and the column ``id_field`` (``--id-field``), when named, its key. A
member's id is ``PATH/#KEY`` as for JSON Lines (:mod:`simdoc.corpus.formats`):
KEY is the id column's value, else the row number counted from 1 over the
whole file, as JSON Lines counts lines; a key taken twice gets ``@ROW``
appended. A row whose text is null is skipped, with one warning for all such
rows; a text column that is not of a string type skips the file's rows, with
a warning naming its type.

The file is read one row group at a time, only the text and id columns. A
member's place is its row group and its row within it, stored in the docs
table's ``offset`` and ``length`` columns (a JSON Lines member keeps a byte
offset and length there), so verification and ``simdoc show`` read that one
row again (:func:`texts_at`). The file's digest is that of its bytes, read
before it is parsed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from simdoc.corpus.files import ReadResult, as_file, handle_stat, open_regular
from simdoc.corpus.formats import MemberKeys, _summarise, cut_utf8

PARQUET_SUFFIXES = (".parquet",)
# Not `pip install 'simdoc[parquet]'`: the package index's "simdoc" is another project.
PARQUET_EXTRA = "pyarrow: pip install pyarrow (or, in simdoc's source folder, pip install '.[parquet]')"


def is_parquet(path: str) -> bool:
    """A Parquet file by its name (``.parquet``)."""
    return path.lower().endswith(PARQUET_SUFFIXES)


def have_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class ParquetRead:
    """What reading a Parquet file gave: its read result, its documents as
    (id, text, row group, row in group), and warnings about its rows."""

    result: ReadResult
    docs: list[tuple[str, str, int, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _is_text_type(typ) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or getattr(pa.types, "is_string_view", lambda t: False)(typ)


def _digest(fileobj) -> str:
    digest = hashlib.blake2b(digest_size=16)
    fileobj.seek(0)
    while chunk := fileobj.read(1 << 24):
        digest.update(chunk)
    fileobj.seek(0)
    return digest.hexdigest()


def _open(path: str, follow_symlinks: bool):
    """(Python file, its stat before, digest of its bytes) or the ReadResult saying why not."""
    opened = open_regular(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return opened
    fd, before = opened
    fileobj = as_file(fd)  # a descriptor's file owns it; an object (a URL) is its own file
    try:
        digest = _digest(fileobj)
    except OSError as exc:
        fileobj.close()
        return ReadResult(None, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
    return fileobj, before, digest


def read_parquet(
    path: str, source: str, text_field: str = "text", id_field: str | None = None, max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> ParquetRead:
    """Every document of a Parquet file, sorted by id (see the module docstring).

    Raises
    ------
    ImportError
        pyarrow is not installed (the ``parquet`` extra).
    """
    import pyarrow.parquet as pq

    opened = _open(path, follow_symlinks)
    if isinstance(opened, ReadResult):
        return ParquetRead(opened)
    fileobj, before, digest = opened
    out = ParquetRead(ReadResult("", digest))
    problems: dict[str, list[tuple[int, str]]] = {}
    cut = False
    try:
        try:
            pf = pq.ParquetFile(fileobj)
        except Exception as exc:  # pyarrow's own errors for a file that is not Parquet
            out.result = ReadResult(None, digest, warning=f"not a readable Parquet file: {exc}", status="unreadable")
            return out
        names = pf.schema_arrow.names
        if text_field not in names:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            out.warnings.append(f"no column {text_field!r}; the columns are {shown}: name the one with the text with --text-field")
            return out
        typ = pf.schema_arrow.field(text_field).type
        if not _is_text_type(typ):
            out.warnings.append(f"column {text_field!r} is of type {typ}, not text: its rows are skipped")
            return out
        use_id = id_field is not None and id_field in names
        if id_field is not None and not use_id:
            out.warnings.append(f"no column {id_field!r}: the ids are row numbers")
        columns = [text_field] + ([id_field] if use_id and id_field != text_field else [])
        keys = MemberKeys(source)
        row_number = 0
        for group in range(pf.num_row_groups):
            table = pf.read_row_group(group, columns=columns)
            texts = table.column(text_field).to_pylist()
            ids = table.column(id_field).to_pylist() if use_id else None
            for row, text in enumerate(texts):
                row_number += 1
                if text is None:
                    problems.setdefault("null text, skipped", []).append((row_number, "null text, skipped"))
                    continue
                key = str(row_number)
                if ids is not None:
                    if ids[row] is None or "\0" in str(ids[row]):
                        what = f"null or NUL-holding {id_field!r}, its id is the row number"
                        problems.setdefault(what, []).append((row_number, what))
                    else:
                        key = str(ids[row])
                if max_bytes is not None and len(text) > max_bytes // 4 and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
                    text, cut = cut_utf8(text, max_bytes), True
                doc_id, said = keys.take(key, row_number, "row")
                if said:
                    problems.setdefault("an id that repeats gets @ROW appended", []).append((row_number, said))
                out.docs.append((doc_id, text, group, row))
        after = handle_stat(fileobj)
    except OSError as exc:
        out.result = ReadResult(None, digest, warning=f"cannot read: {exc.strerror or exc}", status="unreadable")
        return out
    except Exception as exc:  # a damaged row group: pyarrow raises its own kinds
        out.result = ReadResult(None, digest, warning=f"not a readable Parquet file: {exc}", status="unreadable")
        out.docs = []
        return out
    finally:
        fileobj.close()
    out.warnings.extend(_summarise(kind, seen).replace("line", "row") for kind, seen in problems.items())
    notes = []
    if cut:
        notes.append(f"texts longer than --max-bytes {max_bytes} are cut to their first {max_bytes} bytes")
        out.result.status = "partial"
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        notes.append("changed while being read; indexed as read (run again to pick up the final version)")
    out.result.warning = "; ".join(notes) or None
    out.docs.sort()
    return out


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
    opened = _open(path, follow_symlinks)
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
                    if isinstance(text, str) and max_bytes is not None and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
                        text = cut_utf8(text, max_bytes)
                    out[(group, row)] = text if isinstance(text, str) else None
    except OSError:
        return out
    except Exception:  # a file that is no longer Parquet: its rows are gone
        return out
    finally:
        fileobj.close()
    return out

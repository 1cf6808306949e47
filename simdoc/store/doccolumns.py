"""Documents as columns: what a reading task hands the docs table, without one object per document (issue 29).

A reading task (:mod:`simdoc.stages.scan`) gives its documents back as one
:class:`DocColumns`: numpy arrays of the docs-table columns that reading
decides (see :mod:`simdoc.store.doctable` for their meanings), the ids and
sources as UTF-8 blobs with offsets (the table keeps a member's key and its file once:
:mod:`simdoc.store.docnames`). The main
process slices, reorders and appends these arrays
(:class:`simdoc.store.doctable.TableBuilder`); it never turns a document
into a Python object on that path. A Dask part stores the same arrays as
arrays (:func:`simdoc.stages.scan_results.write_part`): on a cluster the client
reads them from the part, and the worker sends none back.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from simdoc.store.docnames import Names, blob_slice, concat_strings, run_starts, strip_sources, take_strings
from simdoc.store.doctable import (
    _BYTE_COLUMNS,
    _DIGEST_COLUMNS,
    _INT_COLUMNS,
    HOW,
    ROLES,
    STAT_COLUMNS,
    STATUSES,
    DocsTable,
    Strings,
    _blob,
)

if TYPE_CHECKING:
    from simdoc.store.directory import IndexStore

_INTS = ("offset", "length", "size", "n_shingles")
# The docs-table columns a new row takes from its file (and the update that added it), not from reading it.
FILE_COLUMNS = (*STAT_COLUMNS, "file_digest", "added")
_TABLE_COLUMNS = (
    [(c, np.int64, ()) for c in _INT_COLUMNS] + [(c, np.uint8, ()) for c in _BYTE_COLUMNS]
    + [(c, np.uint8, (16,)) for c in _DIGEST_COLUMNS]
)
_CODES = ("how", "status")
_HOW = {name: i for i, name in enumerate(HOW)}  # a name's position: its code in the table
_STATUS = {name: i for i, name in enumerate(STATUSES)}
_DIGESTS = ("digest", "identity")


@dataclass(eq=False)
class DocColumns:
    """``n`` documents, in order, as columns (see the module)."""

    id_blob: np.ndarray  # uint8: the ids, UTF-8 (file names' raw bytes kept), one after the other
    id_offsets: np.ndarray  # int64 (n + 1,): id i is id_blob[id_offsets[i]:id_offsets[i + 1]]
    source_blob: np.ndarray  # the same for the sources ("" for a file)
    source_offsets: np.ndarray
    offset: np.ndarray  # int64 (n,) each
    length: np.ndarray
    size: np.ndarray
    n_shingles: np.ndarray
    how: np.ndarray  # uint8 (n,): position in simdoc.store.doctable.HOW
    status: np.ndarray  # uint8 (n,): position in STATUSES
    digest: np.ndarray  # uint8 (n, 16) each
    identity: np.ndarray

    def __len__(self) -> int:
        return len(self.id_offsets) - 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DocColumns):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    @classmethod
    def build(
        cls, ids: Sequence[str], sources: Sequence[str], offset: Sequence[int], length: Sequence[int], size: Sequence[int],
        n_shingles: Sequence[int], how: Sequence[str], status: Sequence[str], digest: Sequence[bytes], identity: Sequence[bytes] | np.ndarray,
    ) -> DocColumns:
        """From one list (or tuple) per column (a worker's documents)."""
        n = len(ids)
        id_blob, id_offsets = _blob(ids)
        source_blob, source_offsets = _blob(sources)
        ints = [np.asarray(v, dtype=np.int64).reshape(n) for v in (offset, length, size, n_shingles)]
        codes = [np.fromiter(map(code.__getitem__, v), dtype=np.uint8, count=n) for v, code in ((how, _HOW), (status, _STATUS))]
        digests = [v if isinstance(v, np.ndarray) else np.frombuffer(b"".join(v), dtype=np.uint8).reshape(n, 16).copy() for v in (digest, identity)]
        return cls(id_blob, id_offsets, source_blob, source_offsets, *ints, *codes, *digests)

    @classmethod
    def empty(cls) -> DocColumns:
        return cls.build([], [], [], [], [], [], [], [], [], [])

    def ids(self) -> Strings:
        """The ids, each decoded when it is asked for."""
        return Strings(self.id_blob, self.id_offsets)

    def sources(self) -> Strings:
        return Strings(self.source_blob, self.source_offsets)

    def hows(self) -> list[str]:
        return [HOW[c] for c in self.how.tolist()]

    def slice(self, a: int, b: int) -> DocColumns:
        """Documents ``a`` to ``b`` (views of these arrays where they can be)."""
        return DocColumns(
            *blob_slice(self.id_blob, self.id_offsets, a, b), *blob_slice(self.source_blob, self.source_offsets, a, b),
            *(getattr(self, c)[a:b] for c in _INTS + _CODES + _DIGESTS),
        )

    def take(self, order: np.ndarray) -> DocColumns:
        """The documents in ``order`` (their positions here)."""
        order = np.asarray(order, dtype=np.int64)
        return DocColumns(
            *take_strings(self.id_blob, self.id_offsets, order), *take_strings(self.source_blob, self.source_offsets, order),
            *(getattr(self, c)[order] for c in _INTS + _CODES + _DIGESTS),
        )

    def with_ids(self, blob: np.ndarray, offsets: np.ndarray) -> DocColumns:
        """These documents with other ids (the same number)."""
        if len(offsets) != len(self.id_offsets):
            raise ValueError("ids for another number of documents")
        out = DocColumns(**{f.name: getattr(self, f.name) for f in fields(self)})
        out.id_blob, out.id_offsets = blob, offsets
        return out

    @classmethod
    def concatenate(cls, parts: list[DocColumns]) -> DocColumns:
        if not parts:
            return cls.empty()
        return DocColumns(
            *concat_strings([(p.id_blob, p.id_offsets) for p in parts]),
            *concat_strings([(p.source_blob, p.source_offsets) for p in parts]),
            *(np.concatenate([getattr(p, c) for p in parts]) for c in _INTS + _CODES + _DIGESTS),
        )

    def arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Every column by name (for a part file)."""
        return {prefix + f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "") -> DocColumns:
        """The columns :meth:`arrays` gave, checked: ValueError if they do not fit together."""
        cols = {f.name: np.asarray(arrays[prefix + f.name]) for f in fields(cls)}
        kinds = {"id_blob": (np.uint8, 1), "source_blob": (np.uint8, 1), "id_offsets": (np.int64, 1), "source_offsets": (np.int64, 1)}
        kinds.update({c: (np.int64, 1) for c in _INTS}, **{c: (np.uint8, 1) for c in _CODES}, **{c: (np.uint8, 2) for c in _DIGESTS})
        for name, (dtype, ndim) in kinds.items():
            if cols[name].dtype != dtype or cols[name].ndim != ndim:
                raise ValueError(f"column {name} is not {np.dtype(dtype)} of {ndim} dimension(s)")
        n = len(cols["id_offsets"]) - 1
        for blob, offsets in (("id_blob", "id_offsets"), ("source_blob", "source_offsets")):
            off = cols[offsets]
            if len(off) != n + 1 or off[0] != 0 or off[-1] != len(cols[blob]) or (np.diff(off) < 0).any():
                raise ValueError(f"column {offsets} does not cut its blob")
        for c in _INTS + _CODES + _DIGESTS:
            if len(cols[c]) != n or (c in _DIGESTS and cols[c].shape[1:] != (16,)):
                raise ValueError(f"column {c} has the wrong shape")
        if n and (cols["how"].max() >= len(HOW) or cols["status"].max() >= len(STATUSES)):
            raise ValueError("an unknown reading or status code")
        return cls(**cols)


class TableBuilder:
    """Builds the next docs table in id order from rows kept from the current one and new documents.

    Both come in chunks: rows kept as arrays of their rows in the current table,
    new documents as :class:`DocColumns` with the columns of the file they were
    read from. Every :data:`TABLE_CHUNK_ROWS` rows, the rows so far are gathered
    column by column and appended to the table's files (``sink``: a
    :class:`TableFiles` of the index), so that the builder holds one chunk, not
    the table (issue 29: 10^7 records); no row becomes a Python object.
    Without a sink the columns are held and joined at the end (tests).
    """

    def __init__(self, old: DocsTable | None, sink: TableFiles | None = None) -> None:
        self.old = old
        self.sink = sink if sink is not None else _Held()
        self.src: list[np.ndarray] = []  # per chunk: the rows' rows in the old table, or -1 for new ones
        self.new: list[DocColumns] = []
        self.file_columns: list[dict[str, np.ndarray]] = []  # per new chunk: FILE_COLUMNS, one value each or n
        self.stat: list[tuple[int, int, tuple[int, ...]]] = []  # (first, end, STAT_COLUMNS) of kept rows re-read
        self.pending = 0  # rows not yet written
        self.n = 0
        self.n_empty = 0  # rows with no shingles
        self.written = 0  # rows given to the sink
        self.last_source: bytes | None = None  # the source of the last of them

    def __len__(self) -> int:
        return self.n

    def add_old(self, rows, stat: tuple[int, ...] | None = None) -> None:
        """Rows of the current table (``stat``: their file's new stat, if it was read again)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        for a in range(0, len(rows), TABLE_CHUNK_ROWS):
            part = rows[a : a + TABLE_CHUNK_ROWS]
            if stat is not None:
                self.stat.append((self.pending, self.pending + len(part), stat))
            self.src.append(part)
            self._added(len(part))

    def add_new(self, docs: DocColumns, file_columns: dict[str, object]) -> None:
        """New documents, with the values of FILE_COLUMNS (the file's stat and digest; ``added``)."""
        if set(file_columns) != set(FILE_COLUMNS):
            raise ValueError(f"new rows need the columns {FILE_COLUMNS}")
        n = len(docs)
        for a in range(0, max(n, 1), TABLE_CHUNK_ROWS):
            b = min(a + TABLE_CHUNK_ROWS, n)
            part = docs if (a, b) == (0, n) else docs.slice(a, b)
            self.src.append(np.full(b - a, -1, dtype=np.int64))
            self.new.append(part)
            self.file_columns.append({c: _rows_of(v, a, b, n) for c, v in file_columns.items()})
            self._added(b - a)
        if n > TABLE_CHUNK_ROWS and self.pending:  # its last slice is a view of it all: not kept
            self._write()

    def _added(self, n: int) -> None:
        self.n += n
        self.pending += n
        if self.pending >= TABLE_CHUNK_ROWS:
            self._write()

    def _write(self) -> None:
        """The rows so far, gathered column by column, to the sink."""
        src = np.concatenate(self.src) if self.src else np.zeros(0, np.int64)
        kept = src >= 0
        any_kept = bool(kept.any())
        fresh = DocColumns.concatenate(self.new)
        cols: dict[str, np.ndarray] = {}
        for c, dtype, tail in _TABLE_COLUMNS:
            col = np.empty((len(src),) + tail, dtype=dtype)
            if any_kept:
                col[kept] = self.old.columns[c][src[kept]]
            if c in FILE_COLUMNS:
                col[~kept] = _file_column(c, dtype, tail, self.new, self.file_columns)
            else:
                col[~kept] = getattr(fresh, c)
            cols[c] = col
        for first, end, values in self.stat:
            for c, v in zip(STAT_COLUMNS, values):
                cols[c][first:end] = v
        # Each row's source and key (simdoc.store.docnames): the new rows' from their ids and sources,
        # the kept rows' gathered from the current table (this chunk's only), put back in the chunk's order.
        sources, keys = (fresh.source_blob, fresh.source_offsets), strip_sources(fresh.id_blob, fresh.id_offsets, fresh.source_blob, fresh.source_offsets)
        if any_kept:
            old_sources, old_keys = self.old.names.gather(src[kept])
            where = np.empty(len(src), dtype=np.int64)
            n_kept = int(np.count_nonzero(kept))
            where[kept] = np.arange(n_kept, dtype=np.int64)
            where[~kept] = n_kept + np.arange(len(src) - n_kept, dtype=np.int64)
            sources = take_strings(*concat_strings([old_sources, sources]), where)
            keys = take_strings(*concat_strings([old_keys, keys]), where)
        # A run of rows with one source starts where the source differs from the row before (that
        # of the last chunk's last row, for the first): the runs are the rows', whatever the chunks.
        first = np.flatnonzero(run_starts(*sources, self.last_source))
        if len(src):
            self.last_source = sources[0][sources[1][-2] : sources[1][-1]].tobytes()
        names = {"key": keys, "files": take_strings(*sources, first), "rows": first + self.written}
        self.written += len(src)
        self.n_empty += int(np.count_nonzero(cols["n_shingles"] == 0))
        self.sink.append(names, cols)
        self.src, self.new, self.file_columns, self.stat, self.pending = [], [], [], [], 0

    def finish(self) -> DocsTable:
        """The table, every row written (from the sink's files: memory-mapped)."""
        if self.pending or not self.n:
            self._write()
        return self.sink.finish()

    def abort(self) -> None:
        self.sink.abort()


PUBLISH_THREADS = 8  # the table's column files fsynced at once (TableFiles.finish)
TABLE_CHUNK_ROWS = 1 << 16  # rows the builder gathers before appending them to the table's files


def _rows_of(value, a: int, b: int, n: int):
    """Rows ``a`` to ``b`` of a FILE_COLUMNS value: one value for all, or one a row."""
    return value[a:b] if isinstance(value, np.ndarray) and value.ndim and len(value) == n and (a, b) != (0, n) else value


_BLOB_ROLES = (("key", "docs.key", "docs.key.offsets"), ("files", "docs.files", "docs.files.offsets"))


class TableFiles:
    """The docs table's column files, appended a chunk at a time under temporary names and
    published (each atomically, as :meth:`finish` does) under ``docs.<column>.<build>.npy``:
    the roles and manifest entries of the shingle stage are in ``roles`` and ``files`` then."""

    def __init__(self, store: IndexStore, build: str) -> None:
        self.store = store
        self.writers: dict[str, object] = {}
        self.roles: dict[str, str] = {}
        self.files: dict[str, dict] = {}
        self.ends = {"key": 0, "files": 0}
        self.n = 0
        try:
            for role, dtype, tail in _STORED:
                self.writers[role] = store.array_writer(f"{role}.{build}.npy", dtype, tail)
            for _, _, offsets in _BLOB_ROLES:
                self.writers[offsets].append(np.zeros(1, np.int64))
        except BaseException:
            self.abort()
            raise

    def append(self, names: dict[str, object], cols: dict[str, np.ndarray]) -> None:
        """A chunk of rows: ``names`` their keys, and the runs of files that start in it
        (``files``: their sources, ``rows``: their first rows in the table)."""
        for name, blob_role, offsets_role in _BLOB_ROLES:
            blob, offsets = names[name]
            self.writers[blob_role].append(blob)
            offsets = np.asarray(offsets, dtype=np.int64)
            self.writers[offsets_role].append(offsets[1:] - offsets[0] + self.ends[name])
            self.ends[name] += int(offsets[-1] - offsets[0])
        self.writers["docs.files.rows"].append(np.asarray(names["rows"], dtype=np.int64))
        self.n += len(names["key"][1]) - 1
        for c, _, _ in _TABLE_COLUMNS:
            self.writers[f"docs.{c}"].append(cols[c])

    def finish(self) -> DocsTable:
        self.writers["docs.files.rows"].append(np.array([self.n], dtype=np.int64))  # where the last run ends
        # Each file fsynced and renamed as before, but all at once: one after the other, the
        # main process waited for ~20 journal commits in a row (10^6 records: 0.34 s, the workers
        # done and idle). Nothing names them until the manifest, written after all have returned.
        writers = list(self.writers.items())
        with ThreadPoolExecutor(min(PUBLISH_THREADS, max(1, len(writers))), thread_name_prefix="simdoc-publish") as pool:
            infos = list(pool.map(lambda w: w[1].finish(), writers))
        for (role, writer), info in zip(writers, infos):
            self.roles[role] = writer.name
            self.files[writer.name] = info
        self.writers = {}
        arrays = {role: self.store.load_array(name, self.files[name]) for role, name in self.roles.items()}
        return _table_of(arrays)

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()
        self.writers = {}


class _Held:
    """The sink of a builder with no index: the chunks held, joined at the end."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {role: [] for role, _, _ in _STORED}
        self.blobs: dict[str, list] = {"key": [], "files": []}
        self.n = 0

    def append(self, names, cols) -> None:
        for name in self.blobs:
            self.blobs[name].append(names[name])
        self.chunks["docs.files.rows"].append(np.asarray(names["rows"], dtype=np.int64))
        self.n += len(names["key"][1]) - 1
        for c, _, _ in _TABLE_COLUMNS:
            self.chunks[f"docs.{c}"].append(cols[c])

    def finish(self) -> DocsTable:
        self.chunks["docs.files.rows"].append(np.array([self.n], dtype=np.int64))
        arrays = {role: np.concatenate(parts) for role, parts in self.chunks.items() if parts}
        for name, blob_role, offsets_role in _BLOB_ROLES:
            arrays[blob_role], arrays[offsets_role] = concat_strings(self.blobs[name])
        return _table_of(arrays)

    def abort(self) -> None:
        pass


def _table_of(arrays: dict[str, np.ndarray]) -> DocsTable:
    names = Names(
        (arrays["docs.key"], arrays["docs.key.offsets"]), (arrays["docs.files"], arrays["docs.files.offsets"]),
        arrays["docs.files.rows"],
    )
    return DocsTable(names, {c: arrays[f"docs.{c}"] for c, _, _ in _TABLE_COLUMNS})


# The roles in the order DocsTable.arrays() gives them (and the manifest lists them).
_STORED = [
    ("docs.key", np.uint8, ()), ("docs.key.offsets", np.int64, ()), ("docs.files", np.uint8, ()),
    ("docs.files.offsets", np.int64, ()), ("docs.files.rows", np.int64, ()),
] + [(f"docs.{c}", dtype, tail) for c, dtype, tail in _TABLE_COLUMNS]
assert [role for role, _, _ in _STORED] == list(ROLES)


def _file_column(c: str, dtype, tail: tuple, docs: list[DocColumns], values: list[dict]) -> np.ndarray:
    """Column ``c`` of the new rows: each chunk's value, repeated for its documents (or its array)."""
    out = np.empty((sum(len(d) for d in docs),) + tail, dtype=dtype)
    at = 0
    for d, v in zip(docs, values):
        x = v[c]
        out[at : at + len(d)] = np.frombuffer(x, dtype=np.uint8) if isinstance(x, bytes) else x
        at += len(d)
    return out


def added_by_id(
    docs: DocColumns, old: DocsTable | None, old_pos: dict[str, int], prev: DocsTable | None, prev_pos: dict[str, int],
    generation: int,
) -> tuple[np.ndarray, int, int]:
    """The update that added each of ``docs`` (the one recorded in ``prev`` for its id if its digest
    is the one recorded there, else ``generation``), how many are new or changed against ``old``,
    and how many have an id of ``old`` (``*_pos``: a table's row by id).

    A first build has no table to look in: no id is turned into a string. An update looks up
    the ids of these documents only (one file's).
    """
    n = len(docs)
    if not old_pos and not prev_pos:
        return np.full(n, generation, dtype=np.int64), n, 0
    ids = list(docs.ids())
    j = np.fromiter((old_pos.get(i, -1) for i in ids), dtype=np.int64, count=n)
    p = np.fromiter((prev_pos.get(i, -1) for i in ids), dtype=np.int64, count=n)
    n_changed = n - int(np.count_nonzero(_same_digest(old, j, docs.digest)))
    same = _same_digest(prev, p, docs.digest)
    added = np.full(n, generation, dtype=np.int64)
    added[same] = prev.added[p[same]] if same.any() else 0
    return added, n_changed, int(np.count_nonzero(j >= 0))


def _same_digest(table: DocsTable | None, rows: np.ndarray, digests: np.ndarray) -> np.ndarray:
    """Whether each row (-1: none) of ``table`` has that digest."""
    out = np.zeros(len(rows), dtype=bool)
    has = rows >= 0
    if table is not None and has.any():
        out[has] = (np.asarray(table.digest[rows[has]]) == digests[has]).all(axis=1)
    return out

"""The docs table: one row per document, stored as columns of .npy files (index format 5).

Like a web archive's CDX index, the table says where each document lives
rather than holding it: verification re-reads a candidate from its file
(a JSON Lines line or a WARC record by its offset and length), and the
digest says whether the text is still the one that was indexed.

Columns (``n`` documents, in id order):

===============  =====================  ==========================================================
column           dtype, shape           meaning
===============  =====================  ==========================================================
``id``           see below              the document id (UTF-8, file names' raw bytes kept)
``source``       see below              the id of the JSON Lines or WARC file holding a member; "" for a file
``offset``       int64 (n,)             a member's byte offset in its file (decompressed for
                                        JSON Lines, the record's offset for WARC), a Parquet
                                        row's row group; -1 for a file
``length``       int64 (n,)             a member's length in bytes there, a Parquet row's row
                                        number in its row group; -1 for a file
``size``         int64 (n,)             the document's size in bytes: a file's, or a member's text
``file_size``    int64 (n,)             size of the file it was read from (the scan compares it)
``mtime_ns``     int64 (n,)             modification time of that file
``ctime_ns``     int64 (n,)             its change time (set by the file system on every write
                                        or time change; a user cannot set it back)
``ino``          int64 (n,)             its inode number
``dev``          int64 (n,)             the device (file system) it is on
``digest``       uint8 (n, 16)          BLAKE2b-128 of a file's bytes, or of a member's text
``file_digest``  uint8 (n, 16)          BLAKE2b-128 of the bytes of the file it was read from
``identity``     uint8 (n, 16)          the identity of its text (below), computed once when it is read
``how``          uint8 (n,)             how it was read: see :data:`HOW`
``status``       uint8 (n,)             a file's: ok, replaced (bytes not UTF-8), partial (--max-bytes): :data:`STATUSES`;
                                        a member's: ok (its file's warning names the lines or records)
``n_shingles``   int64 (n,)             shingles with repeats (the bag's size); 0: never a candidate
``added``        int64 (n,)             the update (generation) that added this text (for ``--new``)
===============  =====================  ==========================================================

Format 5 stores a member's id as its file plus its key, the file's name once
for all its members (:mod:`simdoc.store.docnames`); format 4 stored both
strings for every row, and is read as it is (:meth:`DocsTable.from_arrays`).

``ctime_ns``, ``ino`` and ``dev`` came with index format 4 (see
:data:`STAT_COLUMNS`); a table of format 3 has none, and is read with -1 in
them: "unknown", which no file's stat equals, so every file is read once more.

The *identity* of a document's text (:meth:`DocsTable.identities`) is a
BLAKE2b-128 of its digest and of how it was read: equal identities mean
identical text read the same way, so identical shingles. Exact copies and
the verified-pairs table are keyed by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simdoc.errors import CorruptIndex
from simdoc.store.docnames import Column, Names, decode, encode

HOW = ("whole", "streamed", "html", "jsonl", "warc", "parquet")  # stored by position: append only
STATUSES = ("ok", "replaced", "partial")
_INT_COLUMNS = ("offset", "length", "size", "file_size", "mtime_ns", "ctime_ns", "ino", "dev", "n_shingles", "added")
# The stat of a file that tells it unchanged, as git's index keeps it; the last three are
# format 4's (FORMAT_3_MISSING): a format-3 table is read with -1 ("unknown") there.
STAT_COLUMNS = ("file_size", "mtime_ns", "ctime_ns", "ino", "dev")
FORMAT_3_MISSING = ("docs.ctime_ns", "docs.ino", "docs.dev")
UNKNOWN = -1
_BYTE_COLUMNS = ("how", "status")
_DIGEST_COLUMNS = ("digest", "file_digest", "identity")
# The ids and sources as format 5 stores them (simdoc.store.docnames), and as format 4 did: every row's.
NAME_ROLES = ("docs.key", "docs.key.offsets", "docs.files", "docs.files.offsets", "docs.files.rows")
FORMAT_4_NAMES = ("docs.id", "docs.id.offsets", "docs.source", "docs.source.offsets")
COLUMN_ROLES = tuple(f"docs.{c}" for c in _INT_COLUMNS + _BYTE_COLUMNS + _DIGEST_COLUMNS)
ROLES = NAME_ROLES + COLUMN_ROLES  # what this simdoc writes, in the order DocsTable.arrays() gives them
_blob = encode  # (the name the other modules and the tests know)


def is_safe_relative(path: str) -> bool:
    """True for a relative path that stays inside the folder it is joined to.

    No NUL, not absolute, and no empty, ``.`` or ``..`` part: joined to a
    root and normalised, it is still below that root.
    """
    if not path or "\0" in path or path[0] == "/":
        return False
    parts = path.split("/")  # (three scans in C: verification checks every path it opens)
    return "" not in parts and "." not in parts and ".." not in parts


def name_problem(doc_id: str, source: str) -> str | None:
    """What is wrong with a docs-table row's id and source as a place in the corpus, or None.

    A file's id is its path relative to the corpus; a member's source is
    such a path and its id is ``SOURCE/#KEY`` (the key may hold anything
    but a NUL: as a path it names nothing, since SOURCE is a file).
    """
    if not source:
        return None if is_safe_relative(doc_id) else f"an id that is not a path inside the corpus: {doc_id!r}"
    if not is_safe_relative(source):
        return f"a source file that is not a path inside the corpus: {source!r}"
    if not doc_id.startswith(source + "/#") or "\0" in doc_id:
        return f"a member id that is not SOURCE/#KEY of its source file {source!r}: {doc_id!r}"
    return None


_CHECK_ROWS = 1 << 16  # rows of a blob column checked at once


def _suspects(blob: np.ndarray, offsets: np.ndarray, allow_empty: bool = False) -> np.ndarray:
    """Rows of a blob column that may hold an unsafe path (see :func:`_suspects_of`), a chunk of
    rows at a time: its temporaries are a chunk's, not the column's (10^7 ids: ~50 bytes a row)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    out = [np.zeros(0, np.int64)]
    step = _CHECK_ROWS
    for a in range(0, n, step):
        # A pair '//' or '/.' across two rows is flagged anyway: the first row ends with '/'.
        b = min(a + step, n)
        lo, hi = int(offsets[a]), int(offsets[b])
        out.append(_suspects_of(blob[lo:hi], offsets[a : b + 1] - lo, allow_empty) + a)
    return np.concatenate(out)


def _suspects_of(blob: np.ndarray, offsets: np.ndarray, allow_empty: bool = False) -> np.ndarray:
    """Rows of a blob column that may hold an unsafe path (a superset; checked one by one after).

    Vectorised, so that a clean table of a million ids costs no Python loop:
    a row is suspect if it is empty (unless ``allow_empty``), starts with '/'
    or '.', ends with '/' or '.', or holds a NUL, '//' or '/.'.
    """
    blob = np.asarray(blob, dtype=np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    empty = ends <= starts
    bad = np.zeros(len(starts), dtype=bool) if allow_empty else empty.copy()
    full = ~empty
    slash, dot = ord("/"), ord(".")
    if full.any():
        first, last = blob[starts[full]], blob[ends[full] - 1]
        bad[full] = (first == slash) | (first == dot) | (last == slash) | (last == dot)
    if len(blob):
        hits = [np.flatnonzero(blob == 0)]
        if len(blob) > 1:
            hits.append(np.flatnonzero((blob[:-1] == slash) & ((blob[1:] == slash) | (blob[1:] == dot))))
        where = np.concatenate(hits)
        if len(where):
            bad[np.searchsorted(offsets, where, side="right") - 1] = True
    return np.flatnonzero(bad)


def _not_source_keys(id_blob, id_offsets, source_blob, source_offsets) -> int | None:
    """The first member (a row with a source) whose id is not ``SOURCE/#KEY`` of its source, or None.

    Compared as bytes, by arrays, a chunk of rows at a time: the byte after the source is an ASCII
    ``/``, so the id's first bytes decode as the source does (UTF-8 resynchronises on it).
    """
    id_blob, source_blob = np.asarray(id_blob), np.asarray(source_blob)
    id_offsets = np.asarray(id_offsets, dtype=np.int64)
    source_offsets = np.asarray(source_offsets, dtype=np.int64)
    src_len = np.diff(source_offsets)
    members = np.flatnonzero(src_len > 0)
    step = max(1, _CHECK_ROWS >> 4)  # a row's source is copied 8 bytes a byte
    for a in range(0, len(members), step):
        rows = members[a : a + step]
        wrong = id_offsets[rows + 1] - id_offsets[rows] < src_len[rows] + 2  # too short to hold it
        fit = np.flatnonzero(~wrong)
        sl, s0, i0 = src_len[rows[fit]], source_offsets[rows[fit]], id_offsets[rows[fit]]
        which = np.repeat(np.arange(len(fit), dtype=np.int64), sl)
        k = np.arange(len(which), dtype=np.int64) - np.repeat(np.cumsum(sl) - sl, sl)
        differs = id_blob[i0[which] + k] != source_blob[s0[which] + k]
        wrong[fit[which[differs]]] = True
        wrong[fit] |= (id_blob[i0 + sl] != ord("/")) | (id_blob[i0 + sl + 1] != ord("#"))
        if wrong.any():
            return int(rows[np.flatnonzero(wrong)[0]])
    return None


class Strings(Sequence):
    """The strings of a blob column (UTF-8 blob + int64 offsets), each decoded when it is asked for.

    For a process that needs a few rows of a large table (a scoring task on
    a Dask worker): the memory-mapped blob stays in the page cache, shared
    by the workers of a host, instead of becoming a Python string per row.
    """

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i = int(i) % n
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return bytes(self.blob[a:b]).decode("utf-8", "surrogateescape")

    def take(self, rows: np.ndarray) -> list[str]:
        """The strings of ``rows``, their bytes gathered from the blob in one go (not a
        memory-mapped slice each: verification asks for tens of thousands at a time)."""
        rows = np.asarray(rows, dtype=np.int64)
        offsets = np.asarray(self.offsets)
        starts, lens = offsets[rows], offsets[rows + 1] - offsets[rows]
        ends = np.cumsum(lens)
        at = np.arange(int(ends[-1]) if len(rows) else 0, dtype=np.int64) + np.repeat(starts - (ends - lens), lens)
        raw = np.asarray(self.blob)[at].tobytes()
        return [raw[a:b].decode("utf-8", "surrogateescape") for a, b in zip((ends - lens).tolist(), ends.tolist())]

    def __iter__(self):
        step = 1 << 16  # decoded a chunk at a time: a pass over all of them holds one chunk
        for a in range(0, len(self), step):
            b = min(a + step, len(self))
            lo = int(self.offsets[a])
            yield from decode(self.blob[lo : int(self.offsets[b])], np.asarray(self.offsets[a : b + 1]) - lo)


@dataclass(slots=True)
class DocRow:
    """One document's row, as the shingle stage builds the table."""

    id: str
    source: str
    offset: int
    length: int
    size: int
    file_size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int
    digest: bytes
    file_digest: bytes
    how: str
    status: str
    n_shingles: int
    added: int
    identity: bytes  # see simdoc.corpus.read.identity


@dataclass
class DocsTable:
    """The docs table in memory: the ids and sources as :class:`simdoc.store.docnames.Names`
    (each string made when it is asked for), numpy arrays for the rest."""

    names: Names
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.names)

    def __getattr__(self, name: str) -> np.ndarray:
        columns = self.__dict__.get("columns", {})
        if name in columns:
            return columns[name]
        raise AttributeError(name)

    @property
    def ids(self) -> Column:
        return self.names.column("id")

    @property
    def sources(self) -> Column:
        return self.names.column("source")

    @classmethod
    def from_rows(cls, rows: list[DocRow]) -> DocsTable:
        n = len(rows)
        cols: dict[str, np.ndarray] = {}
        for c in _INT_COLUMNS:
            cols[c] = np.fromiter((getattr(r, c) for r in rows), dtype=np.int64, count=n)
        cols["how"] = np.fromiter((HOW.index(r.how) for r in rows), dtype=np.uint8, count=n)
        cols["status"] = np.fromiter((STATUSES.index(r.status) for r in rows), dtype=np.uint8, count=n)
        for c in _DIGEST_COLUMNS:
            raw = b"".join(getattr(r, c) for r in rows)
            cols[c] = np.frombuffer(raw, dtype=np.uint8).reshape(n, 16).copy() if n else np.zeros((0, 16), np.uint8)
        return cls(Names.of([r.id for r in rows], [r.source for r in rows]), cols)

    def row(self, i: int) -> DocRow:
        c = self.columns
        return DocRow(
            self.ids[i], self.sources[i], int(c["offset"][i]), int(c["length"][i]), int(c["size"][i]),
            int(c["file_size"][i]), int(c["mtime_ns"][i]), int(c["ctime_ns"][i]), int(c["ino"][i]), int(c["dev"][i]),
            bytes(c["digest"][i]), bytes(c["file_digest"][i]),
            HOW[int(c["how"][i])], STATUSES[int(c["status"][i])], int(c["n_shingles"][i]), int(c["added"][i]),
            bytes(c["identity"][i]),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Every column as the array stored under its role (:data:`ROLES`)."""
        names = self.names
        out = {
            "docs.key": np.ascontiguousarray(names.keys[0]), "docs.key.offsets": np.asarray(names.keys[1]),
            "docs.files": np.ascontiguousarray(names.files[0]), "docs.files.offsets": np.asarray(names.files[1]),
            "docs.files.rows": np.asarray(names.rows),
        }
        for c in _INT_COLUMNS + _BYTE_COLUMNS + _DIGEST_COLUMNS:
            out[f"docs.{c}"] = np.ascontiguousarray(self.columns[c])
        return out

    def blob(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Every row's id (``name`` "id") or source ("source") as one UTF-8 blob and int64 offsets
        (made: format 5 stores a member's id as its file plus its key)."""
        return self.names.full(name)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], where: str, lazy: bool = False) -> DocsTable:
        """The table from its stored columns, checked for agreeing lengths (``where`` names the index).

        The ids and sources of format 5 (:data:`NAME_ROLES`), or of format 4 (every row's, as
        blobs: :data:`FORMAT_4_NAMES`, made into format 5's here). ``lazy``: the rows are not
        checked as paths (for a process that reads a few rows and opens nothing but through
        :class:`simdoc.stages.reread.DocumentReader`, which checks each path).
        """
        if "docs.key" in arrays:
            names = _stored_names(arrays, where, lazy)
        else:
            ids = (arrays["docs.id"], np.asarray(arrays["docs.id.offsets"]))
            sources = (arrays["docs.source"], np.asarray(arrays["docs.source.offsets"]))
            if len(sources[1]) != len(ids[1]):
                raise CorruptIndex(where, f"docs column source has {len(sources[1]) - 1} rows, the ids {len(ids[1]) - 1}")
            if not lazy:
                _check_paths(*ids, *sources, where)
            bad = _not_source_keys(*ids, *sources)
            if bad is not None:  # a member's id is SOURCE/#KEY: else it has no key to keep
                problem = name_problem(Strings(*ids)[bad], Strings(*sources)[bad])
                raise CorruptIndex(where, f"the docs table holds {problem}")
            names = Names.from_full(ids, sources)
        n = len(names)
        cols = {
            c: np.asarray(arrays[f"docs.{c}"]) if f"docs.{c}" in arrays else np.full(n, UNKNOWN, np.int64)
            for c in _INT_COLUMNS + _BYTE_COLUMNS + _DIGEST_COLUMNS
        }
        for c, arr in cols.items():
            if len(arr) != n:
                raise CorruptIndex(where, f"docs column {c} has {len(arr)} rows, the ids {n}")
        if n and (cols["how"].max() >= len(HOW) or cols["status"].max() >= len(STATUSES)):
            raise CorruptIndex(where, "docs table holds an unknown reading or status code")
        return cls(names, cols)

    def places(self, docs: np.ndarray) -> list[str]:
        """Where each of ``docs`` lives, relative to the corpus: a member's file (its source),
        else the document's own id. Not checked as paths: the reader checks what it opens."""
        docs = np.asarray(docs, dtype=np.int64)
        return [s or i for s, i in zip(self.sources.take(docs), self.ids.take(docs))]

    def identities(self) -> np.ndarray:
        """(n, 16) uint8: BLAKE2b-128 of each document's digest and how it was read (see module doc)."""
        return self.columns["identity"]


def _check_paths(id_blob, id_offsets, source_blob, source_offsets, where: str) -> None:
    """Every id and source of format 4 is a place inside the corpus (CorruptIndex if not)."""
    # Every path simdoc opens or prints is built from these: a damaged or crafted table must
    # not name anything outside the corpus (`../`, an absolute path, a NUL).
    ids, sources = Strings(id_blob, id_offsets), Strings(source_blob, source_offsets)
    suspects = np.union1d(_suspects(id_blob, id_offsets), _suspects(source_blob, source_offsets, allow_empty=True))
    for i in suspects.tolist():
        problem = name_problem(ids[i], sources[i])
        if problem is not None:
            raise CorruptIndex(where, f"the docs table holds {problem}")


def _stored_names(arrays: dict[str, np.ndarray], where: str, lazy: bool) -> Names:
    """The ids and sources of format 5, checked: the runs cut the rows, the offsets their blobs
    and (unless ``lazy``) every run's source and every file's id is a path inside the corpus,
    and no key holds a NUL."""
    keys = (arrays["docs.key"], np.asarray(arrays["docs.key.offsets"]))
    files = (arrays["docs.files"], np.asarray(arrays["docs.files.offsets"]))
    rows = np.asarray(arrays["docs.files.rows"])
    n = len(keys[1]) - 1
    if len(rows) != len(files[1]) or not len(rows) or rows[0] != 0 or rows[-1] != n or (len(rows) > 1 and (np.diff(rows) <= 0).any()):
        raise CorruptIndex(where, "the docs table's runs of files do not cut its rows")
    names = Names(keys, files, rows)
    if lazy:
        return names
    for what, (blob, offsets) in (("key", keys), ("files", files)):
        if not len(offsets) or offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
            raise CorruptIndex(where, f"the docs table's docs.{what}.offsets do not cut its blob")
    for r in _suspects(*files, allow_empty=True).tolist():
        if not is_safe_relative(names.file(r)) and names.file(r):
            raise CorruptIndex(where, f"the docs table holds a source file that is not a path inside the corpus: {names.file(r)!r}")
    # A file's key is its id, a path; a member's key may hold anything but a NUL.
    suspects = _suspects(*keys)
    runs = names.run_of(suspects)
    is_file = np.diff(files[1])[runs] == 0 if len(suspects) else np.zeros(0, bool)
    nul = np.searchsorted(keys[1], np.flatnonzero(np.asarray(keys[0]) == 0), side="right") - 1
    # (np.union1d would import numpy.ma, ~0.015 s of a run that finds nothing changed: the few suspects as a set)
    for i in sorted(set(suspects[is_file].tolist()).union(nul.tolist())):
        problem = name_problem(names.column("id")[i], names.column("source")[i])
        if problem is not None:
            raise CorruptIndex(where, f"the docs table holds {problem}")
    return names

"""A docs table's ids and sources as index format 5 stores them: a member is its file plus its key (issue 29).

A member of a JSON Lines, WARC or Parquet file has the id ``SOURCE/#KEY``
and the source SOURCE; a file has its path as id and "" as source. Format 4
stored both strings for every row, so 10^6 records of one file held its
name 2 x 10^6 times. Format 5 stores each row's *key* (a member's KEY, a
file's whole id) and the *runs*: consecutive rows of the table that share a
source, with that source once ("" for a run of files, whose ids are their
keys) and the row each run starts at. A file of many documents sorts as a
folder (:func:`simdoc.corpus.names.walk_key`), so its members are one run.

Stored (roles of the shingle stage; ``n`` rows, ``r`` runs)::

    docs.key, docs.key.offsets        uint8 blob, int64 (n + 1,): each row's key
    docs.files, docs.files.offsets    uint8 blob, int64 (r + 1,): each run's source
    docs.files.rows                   int64 (r + 1,): the first row of each run, then n

The runs are a function of the rows alone (a run starts where the source
differs from the row before), so an update writes the arrays a rebuild does.
:class:`Names` gives the ids and sources back as strings, each made when it
is asked for; nothing here holds a Python object per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

MEMBER = b"/#"  # between a file's id and a member's key (simdoc.corpus.names.MEMBER_SEPARATOR)
_ROWS = 1 << 16  # rows compared or gathered at once: temporaries cost ~8 bytes a byte of them
_SLICE_EVERY = 8  # gather_bytes copies runs of strings as slices when a run holds this many on average


def encode(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as a UTF-8 blob (file names' raw bytes kept) and int64 offsets."""
    raw = [s.encode("utf-8", "surrogateescape") for s in strings]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)), out=offsets[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8).copy(), offsets


def decode(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    raw = np.asarray(blob).tobytes()
    bounds = np.asarray(offsets).tolist()
    if raw.isascii():  # (most names) a byte is a character: one decode, then slices of the text
        text = raw.decode("ascii")
        return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return [raw[a:b].decode("utf-8", "surrogateescape") for a, b in zip(bounds[:-1], bounds[1:])]


def gather_bytes(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte strings ``blob[starts[i]:starts[i] + lengths[i]]``, one after the other, with their offsets."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out_offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    blob = np.asarray(blob)
    # Strings that follow each other in the blob are copied as one slice: a table's rows kept by an
    # update come in a few long runs, and 10^5 keys gathered a byte at a time were ~0.15 CPU-s of a
    # nightly update (issue 29). Many short runs (rows in another order) are gathered as below.
    cuts = np.flatnonzero(starts[1:] != starts[:-1] + lengths[:-1]) + 1
    if len(starts) and len(cuts) * _SLICE_EVERY <= len(starts):
        bounds = [0, *cuts.tolist(), len(starts)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            lo, hi, at = int(out_offsets[a]), int(out_offsets[b]), int(starts[a])
            out[lo:hi] = blob[at : at + hi - lo]
        return out, out_offsets
    for a in range(0, len(starts), _ROWS):  # by chunks: the byte positions cost 8 bytes a byte
        b = min(a + _ROWS, len(starts))
        lo, hi = int(out_offsets[a]), int(out_offsets[b])
        # byte k of the output comes from starts[i] + (k - out_offsets[i]) of the string i it falls
        # in: k plus its string's shift, repeated over the string's bytes (one array a byte, not
        # the string's number and then two lookups by it)
        where = np.repeat(starts[a:b] - out_offsets[a:b], lengths[a:b])
        where += np.arange(lo, hi, dtype=np.int64)
        out[lo:hi] = blob[where]
    return out, out_offsets


def take_strings(blob: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strings of a blob column at positions ``order``, as a new blob and offsets (no Python string made)."""
    order = np.asarray(order, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    starts = offsets[:-1][order]
    return gather_bytes(blob, starts, offsets[1:][order] - starts)


def concat_strings(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Blob columns one after the other, as one."""
    if not parts:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    blob = np.concatenate([np.asarray(b, dtype=np.uint8) for b, _ in parts])
    offsets = [np.zeros(1, np.int64)]
    at = 0
    for b, off in parts:
        offsets.append(np.asarray(off[1:], dtype=np.int64) - int(off[0]) + at)
        at += int(off[-1]) - int(off[0])
    return blob, np.concatenate(offsets)


def blob_slice(blob: np.ndarray, offsets: np.ndarray, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Strings ``a`` to ``b`` of a blob column (views)."""
    lo, hi = int(offsets[a]), int(offsets[b])
    return blob[lo:hi], np.asarray(offsets[a : b + 1]) - lo


def equal_strings(blob: np.ndarray, offsets: np.ndarray, lo: int, hi: int, target: bytes) -> np.ndarray:
    """The positions in [``lo``, ``hi``) of a blob column whose string is ``target`` (bytes), in order;
    the strings of its length compared a chunk at a time, as rows of bytes."""
    offsets = np.asarray(offsets, dtype=np.int64)
    same = lo + np.flatnonzero(np.diff(offsets[lo : hi + 1]) == len(target))
    if not len(target) or not len(same):
        return same
    want = np.frombuffer(target, dtype=np.uint8)
    blob = np.asarray(blob)
    step = max(1, _ROWS // len(target))  # the bytes compared at once: about _ROWS
    hits = [c[(blob[offsets[c][:, None] + np.arange(len(target))] == want).all(axis=1)] for c in (same[a : a + step] for a in range(0, len(same), step))]
    return np.concatenate(hits)


def strip_sources(id_blob, id_offsets, source_blob, source_offsets) -> tuple[np.ndarray, np.ndarray]:
    """Each row's key: its id without ``SOURCE/#`` for a member (a row with a source), its id for a file.

    The ids are taken to be ``SOURCE/#KEY`` (see
    :func:`simdoc.store.doctable._not_source_keys`, which a stored table is checked with).
    """
    id_offsets = np.asarray(id_offsets, dtype=np.int64)
    src_len = np.diff(np.asarray(source_offsets, dtype=np.int64))
    starts = id_offsets[:-1] + np.where(src_len > 0, src_len + len(MEMBER), 0)
    return gather_bytes(id_blob, starts, id_offsets[1:] - starts)


def run_starts(blob: np.ndarray, offsets: np.ndarray, before: bytes | None) -> np.ndarray:
    """bool (n,): whether each string differs from the one before it (``before``: the string
    before the first; None if there is none), compared as bytes."""
    blob = np.asarray(blob)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    out = np.ones(n, dtype=bool)
    if n and before is not None:
        out[0] = blob[offsets[0] : offsets[1]].tobytes() != before
    lens = np.diff(offsets)
    for a in range(0, n - 1, _ROWS):
        b = min(a + _ROWS, n - 1)
        length = int(lens[a])
        if (lens[a : b + 1] == length).all():
            # Strings of one length (a shard's name on each of its members): rows of a 2-D view,
            # compared a row at a time, not a byte at a time through index arrays (10^6: ~6x).
            rows = blob[offsets[a] : offsets[b + 1]].reshape(b + 1 - a, length)
            out[a + 1 : b + 1] = (rows[1:] != rows[:-1]).any(axis=1) if length else False
            continue
        # string j + 1 against string j, for j in a..b-1 of the same length (others differ)
        j = a + np.flatnonzero(lens[a + 1 : b + 1] == lens[a:b])
        same = np.ones(len(j), dtype=bool)
        ln = lens[j]
        which = np.repeat(np.arange(len(j), dtype=np.int64), ln)
        k = np.arange(len(which), dtype=np.int64) - np.repeat(np.cumsum(ln) - ln, ln)
        same[which[blob[offsets[j + 1][which] + k] != blob[offsets[j][which] + k]]] = False
        out[a + 1 : b + 1] = True
        out[j[same] + 1] = False
    return out


class Names:
    """The ids and sources of ``n`` rows: each row's key, and the runs of rows that share a source.

    ``keys`` and ``files`` are (blob, offsets) pairs; ``rows`` (int64, runs + 1) the
    first row of each run, then ``n``. Checked by the caller
    (:meth:`simdoc.store.doctable.DocsTable.from_arrays`).
    """

    def __init__(self, keys: tuple[np.ndarray, np.ndarray], files: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> None:
        self.keys, self.files, self.rows = keys, files, rows
        self._file: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.keys[1]) - 1

    @classmethod
    def from_full(cls, ids: tuple[np.ndarray, np.ndarray], sources: tuple[np.ndarray, np.ndarray]) -> Names:
        """From every row's id and source (the columns of format 4, or of new documents)."""
        keys = strip_sources(*ids, *sources)
        n = len(keys[1]) - 1
        starts, before = [np.zeros(0, np.int64)], None
        for a in range(0, n, _ROWS):
            b = min(a + _ROWS, n)
            blob, offsets = blob_slice(*sources, a, b)
            starts.append(a + np.flatnonzero(run_starts(blob, offsets, before)))
            before = blob[offsets[-2] : offsets[-1]].tobytes()
        first = np.concatenate(starts)
        return cls(keys, take_strings(*sources, first), np.append(first, n).astype(np.int64))

    @classmethod
    def of(cls, ids: Sequence[str], sources: Sequence[str]) -> Names:
        return cls.from_full(encode(list(ids)), encode(list(sources)))

    def run_of(self, rows) -> np.ndarray:
        """The run of each of ``rows``."""
        return np.searchsorted(np.asarray(self.rows), rows, side="right") - 1

    def file(self, run: int) -> str:
        """The source of ``run`` ("" for a run of files)."""
        name = self._file.get(run)
        if name is None:
            blob, offsets = self.files
            name = self._file[run] = bytes(blob[int(offsets[run]) : int(offsets[run + 1])]).decode("utf-8", "surrogateescape")
        return name

    def prefix(self, run: int) -> str:
        name = self.file(run)
        return name + "/#" if name else ""

    def key(self, i: int) -> str:
        blob, offsets = self.keys
        return bytes(blob[int(offsets[i]) : int(offsets[i + 1])]).decode("utf-8", "surrogateescape")

    def gather(self, rows: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """The sources and keys of ``rows``, one per row, as (blob, offsets) each."""
        rows = np.asarray(rows, dtype=np.int64)
        return take_strings(*self.files, self.run_of(rows)), take_strings(*self.keys, rows)

    def full(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Every row's id (``name`` "id") or source ("source"), as format 4 stored them: blob and offsets."""
        n = len(self)
        runs = self.run_of(np.arange(n, dtype=np.int64))
        if name == "source":
            return take_strings(*self.files, runs)
        prefixes = encode([self.prefix(r) for r in range(len(self.rows) - 1)])
        blob, offsets = concat_strings([prefixes, self.keys])
        order = np.empty(2 * n, dtype=np.int64)
        order[0::2], order[1::2] = runs, len(self.rows) - 1 + np.arange(n, dtype=np.int64)
        blob, offsets = take_strings(blob, offsets, order)
        return blob, offsets[0::2].copy()

    def column(self, name: str) -> Column:
        return Column(self, name == "id")

    def find(self, doc_id: str) -> int | None:
        """The row whose id is ``doc_id``, or None, with no string made a row: ``doc_id`` is a
        file's id (a row of a run with no source, its key the whole id) or ``SOURCE/#KEY`` (split
        at any ``/#`` it holds), and each such key is looked for in the runs of its source."""
        raw = doc_id.encode("utf-8", "surrogateescape")
        splits = [(b"", raw)]
        at = raw.find(MEMBER, 1)  # (a member's source is never "": a run with none is of files)
        while at >= 0:
            splits.append((raw[:at], raw[at + len(MEMBER) :]))
            at = raw.find(MEMBER, at + 1)
        rows = np.asarray(self.rows)
        for source, key in splits:
            for run in equal_strings(*self.files, 0, len(rows) - 1, source).tolist():
                hits = equal_strings(*self.keys, int(rows[run]), int(rows[run + 1]), key)
                if len(hits):
                    return int(hits[0])
        return None


class Column(Sequence):
    """The ids or the sources of a :class:`Names`, each made when it is asked for (a process that
    needs a few rows of a large table makes a few strings; the arrays stay memory-mapped)."""

    def __init__(self, names: Names, ids: bool) -> None:
        self.names, self.ids = names, ids

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self)), dtype=np.int64))
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i = int(i) % n
        run = int(self.names.run_of(i))
        return self.names.prefix(run) + self.names.key(i) if self.ids else self.names.file(run)

    def index(self, value, start: int = 0, stop: int | None = None) -> int:
        """The row of the id (or source) ``value``; the ids are looked up in the arrays
        (:meth:`Names.find`), not made one by one (a 10^6-row table: ~0.6 s)."""
        if not self.ids or start or stop is not None or not isinstance(value, str):
            return super().index(value, start, len(self) if stop is None else stop)
        row = self.names.find(value)
        if row is None:
            raise ValueError(f"{value!r} is not an id of the table")
        return row

    def __contains__(self, value) -> bool:
        if not self.ids or not isinstance(value, str):
            return super().__contains__(value)
        return self.names.find(value) is not None

    def take(self, rows) -> list[str]:
        """The strings of ``rows`` (their keys gathered in one go: verification asks for tens of thousands)."""
        rows = np.asarray(rows, dtype=np.int64)
        runs = self.names.run_of(rows).tolist()
        if not self.ids:
            return [self.names.file(r) for r in runs]
        keys = decode(*take_strings(*self.names.keys, rows))
        prefixes = {r: self.names.prefix(r) for r in set(runs)}  # a run of files has none
        if not any(prefixes.values()):
            return keys
        return [prefixes[r] + k for r, k in zip(runs, keys)]

    def __iter__(self) -> Iterator[str]:
        names = self.names
        rows = np.asarray(names.rows)
        for a in range(0, len(self), _ROWS):  # a chunk at a time: a pass over all of them holds one chunk
            b = min(a + _ROWS, len(self))
            keys = decode(*blob_slice(*names.keys, a, b)) if self.ids else None
            # the runs the chunk meets, each a slice of it (a file of many members: one run)
            first = int(names.run_of(a))
            last = int(names.run_of(b - 1))
            for r in range(first, last + 1):
                lo, hi = max(int(rows[r]), a) - a, min(int(rows[r + 1]), b) - a
                if not self.ids:
                    yield from [names.file(r)] * (hi - lo)
                    continue
                prefix = names.prefix(r)
                yield from (keys[lo:hi] if not prefix else [prefix + k for k in keys[lo:hi]])

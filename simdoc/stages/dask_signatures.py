"""Signature rows on a Dask cluster: the workers write the matrix, the client only says where.

The fused shingle stage of `simdoc pairs` makes the next signature matrix
in document order from two kinds of rows: rows kept from the current
matrix (files that did not change) and rows the reading tasks computed.
With the local engine the main process writes them all
(:class:`simdoc.stages.signature.SignatureRows`). On a cluster every
reading task already writes its rows into its part file
(:func:`simdoc.stages.scan_results.write_part`), with its docs-table columns,
and sends back only where the part is (the client reads the columns from
it, :func:`simdoc.stages.resume.read_back`); the client records where each row of the new matrix comes from
(:class:`PlacedRows`: a few integers per batch, per run of kept rows),
and once it knows the number of documents it makes the matrix file
(:class:`simdoc.store.npyfiles.PieceWriter`) and hands the copying to the
workers: each :class:`PlaceTask` fills a contiguous block of about
:data:`PLACE_TASK_BYTES` of rows from the parts and the current matrix and
sends back the block's CRC-32. No signature row passes through the client.

A big file read by several tasks, one range each (:mod:`simdoc.stages.ranges`),
has its rows in the ranges' parts in line order, while its documents take
their place in the matrix in id order: the client registers them as
:class:`Gathered` rows (the ranges' parts and, for each document, its row in
line order), and a copying task takes from each part only the rows its block
needs, from the part's mapped pages (:func:`part_rows`).

A task's rows come from files of the index only (the current matrix, the
parts), found by absolute path, and go to the new matrix's temporary file,
opened without following a link. Rows a worker could not write to a part
(it had no room) come back with its result; the client writes those
itself.
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass

import numpy as np

from simdoc.engines import Engine
from simdoc.store.directory import IndexStore
from simdoc.store.npyfiles import PieceWriter, write_piece

PLACE_TASK_BYTES = 64 << 20  # rows of the new matrix one copying task writes: 131,072 rows of 128 permutations


@dataclass(frozen=True)
class Gathered:
    """Rows of the reading tasks' parts ``parts`` ((part, its rows) each, in order), taken in
    the order ``rows`` says: numbers of rows of all the parts one after the other."""

    parts: tuple[tuple[str, int], ...]
    rows: np.ndarray


@dataclass(frozen=True)
class PlaceTask:
    """Rows [start, start + n) of the matrix at ``target``, from ``sources`` in order.

    Each source is (file, first row, rows): the current signature matrix
    (a .npy file) or a reading task's part (a .npz file, its ``signatures``);
    or :class:`Gathered` rows of the parts of one file's ranges.
    """

    target: str
    start: int
    num_perm: int
    sources: tuple[tuple[str, int, int] | Gathered, ...]


def place_rows(task: PlaceTask) -> tuple[int, int, int]:
    """Copy one block of rows into the new matrix (worker); (first element, elements, CRC-32) of the piece."""
    opened: dict[str, np.ndarray] = {}  # each file once: an update interleaves many runs of the current matrix

    def rows_of(path: str, last: int) -> np.ndarray:
        rows = opened.get(path)
        if rows is None:
            rows = opened[path] = part_rows(path) if path.endswith(".npz") else np.load(path, mmap_mode="r", allow_pickle=False)
        if rows.ndim != 2 or rows.shape[1] != task.num_perm or rows.dtype != np.uint32 or last > len(rows):
            raise ValueError(f"{path}: holds {rows.dtype} {list(rows.shape)}, not rows up to {last} of {task.num_perm}")
        return rows

    blocks = []
    for source in task.sources:
        if isinstance(source, Gathered):
            blocks.append(_gathered(source, task.num_perm, rows_of))
            continue
        path, first, n = source
        blocks.append(rows_of(path, first + n)[first : first + n])
    block = np.concatenate(blocks) if len(blocks) != 1 else np.asarray(blocks[0])
    start = task.start * task.num_perm
    return start, block.size, write_piece(task.target, start, block, np.uint32)


def _gathered(source: Gathered, num_perm: int, rows_of) -> np.ndarray:
    """The rows ``source`` names, each part opened once and only its rows needed read."""
    sizes = np.array([n for _, n in source.parts], dtype=np.int64)
    ends = np.cumsum(sizes)
    if len(source.rows) and (source.rows.min() < 0 or source.rows.max() >= (ends[-1] if len(ends) else 0)):
        raise ValueError(f"rows {source.rows.min()}..{source.rows.max()} of parts holding {int(sizes.sum())}")
    which = np.searchsorted(ends, source.rows, side="right")  # the part of each row
    out = np.empty((len(source.rows), num_perm), dtype=np.uint32)
    for k in np.unique(which).tolist():
        at = np.flatnonzero(which == k)
        local = source.rows[at] - (ends[k] - sizes[k])
        order = np.argsort(local, kind="stable")  # in file order: the mapped pages read forwards
        out[at[order]] = rows_of(source.parts[k][0], int(sizes[k]))[local[order]]
    return out


def part_rows(path: str) -> np.ndarray:
    """The signatures of a reading task's part (.npz), mapped where they are stored as they are
    (np.savez stores, it does not compress), else read whole; a copying task reads only the
    pages of the rows it takes."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("signatures.npy")
    if info.compress_type == zipfile.ZIP_STORED:
        with open(path, "rb") as f:
            f.seek(info.header_offset)
            head = f.read(30)  # the local file header: its name and extra field lengths at 26..30
            if len(head) == 30 and head[:4] == b"PK\x03\x04":
                name_len, extra_len = struct.unpack("<HH", head[26:30])
                f.seek(info.header_offset + 30 + name_len + extra_len)
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                if not fortran and dtype == np.uint32 and len(shape) == 2:
                    return np.memmap(path, dtype=np.uint32, mode="r", offset=f.tell(), shape=shape)
    with np.load(path, allow_pickle=False) as z:
        return np.asarray(z["signatures"])


class PlacedRows:
    """Where each row of the next signature matrix comes from; the matrix written by the engine's workers.

    The interface of :class:`simdoc.stages.signature.SignatureRows` (keep,
    add) plus :meth:`add_part`, for rows a reading task left in its part.
    """

    def __init__(self, store: IndexStore, num_perm: int, old_path: str | None) -> None:
        self.store = store
        self.num_perm = num_perm
        self.old_path = old_path
        # (file, rows held here or Gathered rows; first row, rows)
        self.sources: list[tuple[str | np.ndarray | Gathered, int, int]] = []
        self.rows = 0
        self.writer: PieceWriter | None = None

    def _append(self, source: str | np.ndarray, first: int, n: int) -> None:
        last = self.sources[-1] if self.sources else (None, 0, 0)
        if isinstance(source, str) and isinstance(last[0], str) and last[0] == source and last[1] + last[2] == first:
            self.sources[-1] = (source, last[1], last[2] + n)  # a run of kept rows: one source
        else:
            self.sources.append((source, first, n))
        self.rows += n

    def keep(self, j: int) -> None:
        """Row ``j`` of the current matrix."""
        self._append(self.old_path, j, 1)

    def keep_rows(self, rows: np.ndarray) -> None:
        """These rows of the current matrix, in order: one source a run of consecutive rows."""
        rows = np.asarray(rows, dtype=np.int64)
        cuts = [0, *(np.flatnonzero(np.diff(rows) != 1) + 1).tolist(), len(rows)] if len(rows) else [0]
        for a, b in zip(cuts[:-1], cuts[1:]):
            self._append(self.old_path, int(rows[a]), b - a)

    def add_part(self, part: str, first: int, n: int) -> None:
        """Rows [first, first + n) of the signatures a reading task wrote to ``part``."""
        if n:
            self._append(part, first, n)

    def add_gathered(self, parts: list[tuple[str, int]], rows: np.ndarray) -> None:
        """Rows of the parts of one file's ranges ((part, its rows) each, in line order), taken
        in the order ``rows`` says (numbers of rows of all the parts one after the other)."""
        if len(rows):
            self._append(Gathered(tuple(parts), np.asarray(rows, dtype=np.int64)), 0, len(rows))

    def add(self, rows: np.ndarray) -> None:
        """Rows a worker could not leave in a part: written by this process."""
        if len(rows):
            self._append(np.array(rows, dtype=np.uint32), 0, len(rows))

    def add_slices(self, slices) -> None:
        """Rows a worker could not leave in a part, a slice at a time (:meth:`add` each)."""
        for rows in slices:
            self.add(rows)

    def tasks(self, target: str) -> list[PlaceTask]:
        """The copying tasks: contiguous blocks of at most PLACE_TASK_BYTES of the new matrix.

        Rows held here (see :meth:`add`) are not in any block: they end one.
        """
        per_task = max(1, PLACE_TASK_BYTES // (4 * self.num_perm))
        tasks: list[PlaceTask] = []
        block: list[tuple[str, int, int]] = []
        at = block_start = 0
        for source, first, n in self.sources:
            if isinstance(source, np.ndarray):
                if block:
                    tasks.append(PlaceTask(target, block_start, self.num_perm, tuple(block)))
                    block = []
                at += n
                continue
            while n:
                if not block:
                    block_start = at
                take = min(n, block_start + per_task - at)
                block.append((source, first, take) if isinstance(source, str) else Gathered(source.parts, source.rows[first : first + take]))
                at, first, n = at + take, first + take, n - take
                if at - block_start == per_task:
                    tasks.append(PlaceTask(target, block_start, self.num_perm, tuple(block)))
                    block = []
        if block:
            tasks.append(PlaceTask(target, block_start, self.num_perm, tuple(block)))
        return tasks

    def written(self, engine: Engine) -> PieceWriter:
        """The new matrix, every row in place: copied by the workers of ``engine``, the rows held here written here."""
        self.writer = PieceWriter(self.store.path, "signatures.tmp.npy", np.uint32, (self.rows, self.num_perm))
        at = 0
        for source, first, n in self.sources:
            if isinstance(source, np.ndarray):
                self.writer.write(at * self.num_perm, source)
            at += n
        for piece in engine.map(place_rows, self.tasks(os.path.abspath(self.writer.tmp))):
            self.writer.written(*piece)
        return self.writer

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()

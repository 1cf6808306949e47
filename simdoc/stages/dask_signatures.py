"""Signature rows on a Dask cluster: the workers write the matrix, the client only says where.

The fused shingle stage of `simdoc pairs` makes the next signature matrix
in document order from two kinds of rows: rows kept from the current
matrix (files that did not change) and rows the reading tasks computed.
With the local engine the main process writes them all
(:class:`simdoc.stages.signature.SignatureRows`). On a cluster every
reading task already writes its rows into its part file
(:func:`simdoc.stages.scan_results.write_part`) and sends back only its docs-table
rows; the client records where each row of the new matrix comes from
(:class:`PlacedRows`: a few integers per batch, per run of kept rows),
and once it knows the number of documents it makes the matrix file
(:class:`simdoc.store.npyfiles.PieceWriter`) and hands the copying to the
workers: each :class:`PlaceTask` fills a contiguous block of about
:data:`PLACE_TASK_BYTES` of rows from the parts and the current matrix and
sends back the block's CRC-32. No signature row passes through the client.

A task's rows come from files of the index only (the current matrix, the
parts), found by absolute path, and go to the new matrix's temporary file,
opened without following a link. Rows a worker could not write to a part
(it had no room) come back with its result; the client writes those
itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from simdoc.engines import Engine
from simdoc.store.directory import IndexStore
from simdoc.store.npyfiles import PieceWriter, write_piece

PLACE_TASK_BYTES = 64 << 20  # rows of the new matrix one copying task writes: 131,072 rows of 128 permutations


@dataclass(frozen=True)
class PlaceTask:
    """Rows [start, start + n) of the matrix at ``target``, from ``sources`` in order.

    Each source is (file, first row, rows): the current signature matrix
    (a .npy file) or a reading task's part (a .npz file, its ``signatures``).
    """

    target: str
    start: int
    num_perm: int
    sources: tuple[tuple[str, int, int], ...]


def place_rows(task: PlaceTask) -> tuple[int, int, int]:
    """Copy one block of rows into the new matrix (worker); (first element, elements, CRC-32) of the piece."""
    opened: dict[str, np.ndarray] = {}  # each file once: an update interleaves many runs of the current matrix
    blocks = []
    for path, first, n in task.sources:
        rows = opened.get(path)
        if rows is None:
            rows = opened[path] = _signature_rows(path)
        if rows.ndim != 2 or rows.shape[1] != task.num_perm or rows.dtype != np.uint32 or first + n > len(rows):
            raise ValueError(f"{path}: holds {rows.dtype} {list(rows.shape)}, not rows {first}..{first + n} of {task.num_perm}")
        blocks.append(rows[first : first + n])
    block = np.concatenate(blocks) if len(blocks) != 1 else np.asarray(blocks[0])
    start = task.start * task.num_perm
    return start, block.size, write_piece(task.target, start, block, np.uint32)


def _signature_rows(path: str) -> np.ndarray:
    """The signatures of a reading task's part (.npz: at most a batch, read whole), or the current matrix (mapped)."""
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return np.asarray(z["signatures"])
    return np.load(path, mmap_mode="r", allow_pickle=False)


class PlacedRows:
    """Where each row of the next signature matrix comes from; the matrix written by the engine's workers.

    The interface of :class:`simdoc.stages.signature.SignatureRows` (keep,
    add) plus :meth:`add_part`, for rows a reading task left in its part.
    """

    def __init__(self, store: IndexStore, num_perm: int, old_path: str | None) -> None:
        self.store = store
        self.num_perm = num_perm
        self.old_path = old_path
        self.sources: list[tuple[str | np.ndarray, int, int]] = []  # (file or rows held here, first row, rows)
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

    def add(self, rows: np.ndarray) -> None:
        """Rows a worker could not leave in a part: written by this process."""
        if len(rows):
            self._append(np.array(rows, dtype=np.uint32), 0, len(rows))

    def tasks(self, target: str) -> list[PlaceTask]:
        """The copying tasks: contiguous blocks of at most PLACE_TASK_BYTES of the new matrix.

        Rows held here (see :meth:`add`) are not in any block: they end one.
        """
        per_task = max(1, PLACE_TASK_BYTES // (4 * self.num_perm))
        tasks: list[PlaceTask] = []
        block: list[tuple[str, int, int]] = []
        at = block_start = 0
        for source, first, n in self.sources:
            if not isinstance(source, str):
                if block:
                    tasks.append(PlaceTask(target, block_start, self.num_perm, tuple(block)))
                    block = []
                at += n
                continue
            while n:
                if not block:
                    block_start = at
                take = min(n, block_start + per_task - at)
                block.append((source, first, take))
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
            if not isinstance(source, str):
                self.writer.write(at * self.num_perm, source)
            at += n
        for piece in engine.map(place_rows, self.tasks(os.path.abspath(self.writer.tmp))):
            self.writer.written(*piece)
        return self.writer

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()

"""A range's signature rows left by its worker in a file of the index, not sent through the pool (issue 29).

With the local engine, a big JSON Lines, Parquet or WARC file is read by
one task a range (:mod:`simdoc.stages.ranges`), and each task signs its
documents: 10^6 records are 512 MB of signature rows. Sent back with the
result, they were pickled by the worker, copied through the pool's pipe,
unpickled into fresh pages of the main process and written again to a
spill file there: about a third of the main process's CPU at 10^6 records,
on cores the workers need. Here a range's task (:class:`StagedTask`, run by
:func:`scan_staged`) writes its rows to a staging file of its own in the
index folder instead (:func:`write_staged`) and sends back only its path;
the main process maps it (:func:`open_staged`), unlinks it at once (the
mapping stays valid), and the join gathers the file's rows from the
ranges' mappings in id order (:class:`StackedRows`) into one buffer, a
slice at a time, for the signature matrix.

A staging file is a plain ``.npy`` (shape and dtype in its header, checked
against the result before use) under a temporary name of the signature
matrix (``.signatures.tmp.npy.<random>.tmp``): a run killed before its main
process took it leaves a file that no manifest names and that
:mod:`simdoc.store.names` counts as a temporary, removed by the next run
that fails or publishes; it is never mistaken for a finished array. A worker
that cannot write it (no room) unlinks what it wrote and sends the rows back
as before, so that a full disk is reported by the main process, once.

A task run in the main process itself (one job, or a single task) sends
nothing through a pipe: it keeps its rows. On a Dask cluster the ranges'
rows stay in their parts (:mod:`simdoc.stages.dask_signatures`), not here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from simdoc.memory import discard, release
from simdoc.stages.scan import ScanTask, scan_batch
from simdoc.stages.scan_results import BatchResult

STAGED_PREFIX = ".signatures.tmp.npy."  # a temporary of the signature matrix (simdoc.store.names.OWN_TEMPORARY)


@dataclass(frozen=True)
class StagedTask:
    """A reading task whose signature rows, if it reads a range, go to a staging file in ``folder``
    (the index's, absolute) when it runs in another process than ``parent``."""

    task: ScanTask
    folder: str
    parent: int


def staged(tasks: Iterable[ScanTask], folder: str | os.PathLike) -> Iterator[StagedTask]:
    """``tasks`` as :class:`StagedTask` s of this process, staging in ``folder``."""
    folder, parent = os.path.abspath(folder), os.getpid()
    for task in tasks:
        yield StagedTask(task, folder, parent)


def scan_staged(staged_task: StagedTask) -> BatchResult:
    """:func:`simdoc.stages.scan.scan_batch`, a range's signature rows left in a staging file (worker)."""
    task = staged_task.task
    result = scan_batch(task)
    rows = result.signatures
    if task.span is None or result.piece is None or rows is None or not len(rows) or _here(staged_task.parent):
        return result
    try:
        path = write_staged(staged_task.folder, rows)
    except OSError:  # no room: the rows travel back, and the main process says so if it has none either
        return result
    result.signatures, result.rows_file = None, path
    return result


def _here(parent: int) -> bool:
    """Whether this is the process that made the task: its result goes through no pipe."""
    return os.getpid() == parent


def write_staged(folder: str, rows: np.ndarray) -> str:
    """Write ``rows`` to a new staging file in ``folder``; its path. Nothing is left if it fails."""
    fd, path = tempfile.mkstemp(prefix=STAGED_PREFIX, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.lib.format.write_array(f, np.ascontiguousarray(rows, dtype=np.uint32), allow_pickle=False)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path


def open_staged(path: str, n: int) -> np.ndarray:
    """The ``n`` rows a worker left at ``path``, mapped, and the file unlinked (the mapping
    stays). A file that does not hold ``n`` uint32 rows is an error: it is not the one written."""
    try:
        # Shared and writable: once its rows are gathered, the file's pages can be freed (StackedRows).
        rows = np.load(path, mmap_mode="r+", allow_pickle=False)
    finally:
        remove_staged(path)
    if rows.ndim != 2 or rows.dtype != np.uint32 or len(rows) != n:
        raise RuntimeError(f"{path}: holds {rows.dtype} {list(rows.shape)}, not the {n} signature rows of its task")
    return rows


def remove_staged(path: str) -> None:
    with contextlib.suppress(OSError):  # where a mapped file cannot be unlinked, the next run's clean-up does it
        os.unlink(path)


class StackedRows:
    """One file's signature rows in line order: its ranges' arrays (mapped staging files, or rows
    held) one after the other, gathered without being joined into one array.

    Each row is gathered once (the join's order is a permutation): a block all of whose rows have
    been gathered is let go, and a staging file's pages and blocks are freed
    (:func:`simdoc.memory.discard`); gathering a row of it again is an error, never zeros."""

    def __init__(self, blocks: list[np.ndarray], num_perm: int) -> None:
        self.blocks: list[np.ndarray | None] = blocks
        self.num_perm = num_perm
        lengths = [len(b) for b in blocks]
        self.ends = np.cumsum(lengths, dtype=np.int64)
        self.starts = self.ends - np.asarray(lengths, dtype=np.int64)
        self.shape = (int(self.ends[-1]) if len(blocks) else 0, num_perm)
        self.scratch: np.ndarray | None = None
        self.left = lengths  # each block's rows not gathered yet (a row is gathered once)

    def __len__(self) -> int:
        return self.shape[0]

    def gather(self, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out`` (len(rows), num_perm) filled with row ``rows[i]`` of them all, each block's in one take."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"rows {rows.min()}..{rows.max()} of {len(self)}")
        if self.scratch is None or len(self.scratch) < len(rows):
            self.scratch = np.empty((len(rows), self.num_perm), dtype=np.uint32)  # one, reused: no fresh pages a block
        which = np.searchsorted(self.ends, rows, side="right")  # the block of each row
        by_block = np.argsort(which, kind="stable")
        cuts = np.flatnonzero(np.diff(which[by_block])) + 1
        groups = np.split(by_block, cuts) if len(rows) else []
        for group in groups:
            k = int(which[group[0]])
            block = self.blocks[k]
            if block is None:
                raise RuntimeError(f"rows of block {k} gathered again, after all of them were")
            local = rows[group] - self.starts[k]
            # "clip" takes straight into the scratch rows ("raise" copies first); checked above.
            out[group] = np.take(block, local, axis=0, out=self.scratch[: len(local)], mode="clip")
            self.left[k] -= len(group)
            if self.left[k] <= 0:
                discard(block)
                self.blocks[k] = None
        return out

    def release(self) -> None:
        """Let this process's mapped pages of the blocks go (simdoc.memory.release)."""
        release(*(b for b in self.blocks if b is not None))

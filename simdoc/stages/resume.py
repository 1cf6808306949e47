"""Resumable reading on a Dask cluster: each reading task's result kept as a part, reused by the next run.

On a :class:`~simdoc.engines.DaskEngine` every reading task writes what it
computed as a part file of the index (:func:`simdoc.stages.scan_results.write_part`,
under ``dask-parts/scan``), keyed by everything its result depends on (the
files' ids, paths, sizes, mtimes and indexed digests, every parameter, the
version). A client killed mid-stage loses nothing that finished: the next
run draws the same tasks, takes the result of each task whose part is
there (:func:`resumed`) and submits only the rest, and publishes the same
files as an uninterrupted run. A task of one range of a big file (see
:mod:`simdoc.stages.ranges`) has a part of its own, which holds what the
join needs of the range (:mod:`simdoc.corpus.pieces`) besides its rows.
Once the stage is published (or found up to date) the parts are used or
stale, and go (:func:`remove_scan_parts`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
from collections.abc import Iterator

from simdoc.engines import Engine
from simdoc.stages.scan import ScanTask, scan_batch, whole_file_task
from simdoc.stages.scan_results import BatchResult, PartWritten, read_part
from simdoc.store.directory import IndexStore
from simdoc.store.names import PARTS, parts_folder, remove_parts

SCAN_PARTS = "scan"  # the folder of PARTS where the reading tasks write theirs


def scan_parts_folder(store: IndexStore) -> str | None:
    """The folder (absolute) where the reading tasks write their parts; None where none can be
    (a read-only index, a link on the way: see parts_folder): the run is not resumable then."""
    folder = parts_folder(store.path, SCAN_PARTS)
    return None if folder is None else str(folder)


def resumed(engine: Engine, tasks: Iterator[ScanTask]) -> Iterator[BatchResult]:
    """The tasks' results in task order: from its part, for a task that left one; else run on ``engine``.

    Only whether a part is there is asked as the tasks are drawn; it is read
    when its turn comes, so the parts a killed run left are not all in memory
    at once. A part that cannot be read after all is run again, on its own.
    A task run now sends back only where its part is (:class:`PartWritten`):
    its outcomes and docs-table columns are read from the part when its turn
    comes too (:func:`read_back`).
    """
    order: collections.deque[ScanTask | None] = collections.deque()  # each task drawn: itself if its part is there
    sent: collections.deque[ScanTask] = collections.deque()  # tasks submitted, their results not yet drawn

    def to_run() -> Iterator[ScanTask]:
        for task in tasks:
            there = task.part is not None and os.path.isfile(task.part)
            order.append(task if there else None)
            if not there:
                sent.append(task)
                yield task

    # (task, what it sent back): results come in task order, so each is the first task not yet drawn.
    results = ((sent.popleft(), got) for got in engine.map(scan_batch, to_run()))
    ran: collections.deque[tuple[ScanTask, BatchResult | PartWritten]] = collections.deque()  # drawn to learn the next tasks
    try:
        while True:
            if not order:
                try:
                    ran.append(next(results))  # draws tasks, parts and not, up to the next that runs
                except StopIteration:
                    if not order:
                        return
            task = order.popleft()
            if task is None:
                yield read_back(engine, *(ran.popleft() if ran else next(results)))
                continue
            done = read_part(task.part, rows=False)  # the signature rows stay in the part (simdoc.stages.dask_signatures)
            if done is None or len(done.files) != len(task.files) or (done.piece is None) != (task.span is None):
                done = read_back(engine, task, next(iter(engine.map(scan_batch, [task]))))
            else:
                _as_run(done, task)
            yield done
    finally:
        results.close()


def read_back(engine: Engine, task: ScanTask, got: BatchResult | PartWritten) -> BatchResult:
    """The result of ``task``, which sent back ``got``: itself, or read from the part it names.

    A part that is not the writing the task sent back (another attempt of the
    same task wrote it since: a worker taken for dead, then not) or cannot be
    read is not used: the task runs again without a part, and sends back its
    whole result, its signature rows too.
    """
    if not isinstance(got, PartWritten):
        return got
    done = read_part(got.part, rows=False, token=got.token)
    if done is None or len(done.files) != got.n_files or len(done.docs) != got.n_docs:
        return next(iter(engine.map(scan_batch, [dataclasses.replace(task, part=None, reusable=False)])))
    return _as_run(done, task)


def _as_run(done: BatchResult, task: ScanTask) -> BatchResult:
    """A result read from ``task``'s part, with what the part does not hold: a WARC range's task,
    as the range's task sets it (simdoc.stages.ranges reads the file whole with it if need be)."""
    if done.piece is not None and done.piece.how == "warc":
        done.piece.task = whole_file_task(task)
    return done


def remove_scan_parts(store: IndexStore) -> None:
    """The reading tasks' parts, once the stage is published (or up to date): all used or stale."""
    folder = store.path / PARTS
    if folder.is_dir():
        remove_parts(folder / SCAN_PARTS)
        with contextlib.suppress(OSError):
            folder.rmdir()  # unless the scoring stage's parts are in it

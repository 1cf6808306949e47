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
import os
from collections.abc import Iterator

from simdoc.engines import Engine
from simdoc.stages.scan import ScanTask, scan_batch, whole_file_task
from simdoc.stages.scan_results import BatchResult, read_part
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
    """
    order: collections.deque[ScanTask | None] = collections.deque()  # each task drawn: itself if its part is there

    def to_run() -> Iterator[ScanTask]:
        for task in tasks:
            there = task.part is not None and os.path.isfile(task.part)
            order.append(task if there else None)
            if not there:
                yield task

    results = engine.map(scan_batch, to_run())
    ran: collections.deque[BatchResult] = collections.deque()  # results drawn to learn the next tasks
    while True:
        if not order:
            try:
                ran.append(next(results))  # draws tasks, parts and not, up to the next that runs
            except StopIteration:
                if not order:
                    return
        task = order.popleft()
        if task is None:
            yield ran.popleft() if ran else next(results)
            continue
        done = read_part(task.part, rows=False)  # the signature rows stay in the part (simdoc.stages.dask_signatures)
        if done is None or len(done.files) != len(task.files) or (done.piece is None) != (task.span is None):
            done = next(iter(engine.map(scan_batch, [task])))
        elif done.piece is not None and done.piece.how == "warc":  # as the range's task would have set it
            done.piece.task = whole_file_task(task)
        yield done


def remove_scan_parts(store: IndexStore) -> None:
    """The reading tasks' parts, once the stage is published (or up to date): all used or stale."""
    folder = store.path / PARTS
    if folder.is_dir():
        remove_parts(folder / SCAN_PARTS)
        with contextlib.suppress(OSError):
            folder.rmdir()  # unless the scoring stage's parts are in it

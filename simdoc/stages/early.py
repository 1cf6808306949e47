"""A first build's reading tasks handed to the pool while the walk still lists the corpus (issue 32).

When no row of the current build can be kept (a first build, --rebuild, other
parameters), every file listed is read, in walk order, and a reading task
needs nothing of the listing but its own files. On a pool of several
processes, the workers then read the first files while this process walks the
rest, instead of waiting for the whole walk (Python's own sources: ~1 s of
8,702 folders; 10^5 files: ~0.3 s), and :func:`simdoc.stages.plan.scan_of`
makes the :class:`~simdoc.stages.plan.Scan` once the walk ends; the results
wait in the pool until the collector takes them.

The walk and the making of the tasks run in this process's main thread, one
after the other, and only the pool's own threads run beside them (they send a
task or receive a result, and wait on their pipes). A walk in a thread of its
own beside a thread that makes tasks (stages/ahead.py, removed) lost the
interpreter lock at each folder's system calls for a switch interval of the
other's work: 10^6 files in 1,000 folders took 18 s longer.

While the walk goes on, at most ``jobs - 1`` tasks run at once: the walk is
what the build waits for, and a worker more than the cores left to it slowed
it down by as much as it read (Python's sources on 2 shared cores: the walk
1.0 -> 2.0 s, all files read by its end, nothing gained). At most :data:`EARLY_FILES`
files are made into tasks before the walk ends (their results are held until
then); the tasks of the rest are made afterwards by
the pool's thread, as :func:`simdoc.stages.scan.scan_tasks` makes them for
any build. The tasks are the same in every case: the same files, in the same
order, cut by the same rule, with no digest indexed. A walk that gives fewer
tasks than the pool has processes starts no pool: its build reads as any
other.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from simdoc.corpus.entries import EntriesBuilder
from simdoc.corpus.folders import compiled_now
from simdoc.corpus.objects import is_url
from simdoc.corpus.walk import Skipped, resolve_sources, walk_runs
from simdoc.engines.local import LocalEngine, Started
from simdoc.stages.collector import Settings
from simdoc.stages.plan import FileToRead, Scan, scan_of
from simdoc.stages.racy import index_clock
from simdoc.stages.scan import scan_tasks
from simdoc.stages.staged_rows import StagedTask, scan_staged, staged
from simdoc.store.directory import IndexStore

EARLY_FILES = 1 << 15  # files handed to the pool before the walk ends (a result held is ~0.6 KB a file)


def read_early(corpus, index: Path, engine: object, settings: Settings) -> Early | None:
    """The reading of ``corpus`` to start as it is walked, when that can be (see the module): every
    file read, signed as it is read (not shingle sets), on a pool of several processes, from one
    local folder; None: walk it first."""
    if EARLY_FILES <= 0 or settings.same_params or settings.signer is None or not isinstance(engine, LocalEngine) or engine.jobs < 2:
        return None  # (EARLY_FILES = 0: every build walks first)
    if not isinstance(corpus, (str, os.PathLike)) or is_url(corpus):
        return None
    base, sources = resolve_sources(corpus)
    if len(sources) != 1 or sources[0][1] != "" or is_url(base):
        return None
    return Early(sources[0][0], index, engine, settings)


class Early:
    """The walk of one folder, whose first files' tasks go to a pool as they are made
    (:meth:`scan`), and the pool's results (:attr:`results`). Close it: the pool stops."""

    def __init__(self, root: str, index: Path, engine: LocalEngine, settings: Settings) -> None:
        self.engine = engine
        self.index = index
        shingle = settings.shingle
        compiled_now()  # every file is read and signed: numba is imported anyway, its walk is quicker
        self.clock = index_clock(index)  # before the listing: see simdoc.stages.racy
        self.skipped: list[Skipped] = []
        self.runs = walk_runs(
            root, [index], bool(shingle.follow_symlinks), shingle.include or (), shingle.exclude or (), self.skipped,
        )  # a root that is not a folder raises here, at once
        self.builder = EntriesBuilder()
        self.tasks = staged(scan_tasks(self._files(), shingle, settings.signer, None, lambda e: True, os.path.abspath(index)), index)
        self.results: Started | None = None  # None: no pool started (fewer tasks than processes)

    def scan(self, store: IndexStore, manifest: dict, corpus, stored: dict | None) -> Scan:
        """Walk to the end, the tasks of its first files run as they are made, on one process fewer
        than the pool has (this one walks: the build waits for the walk); then
        :func:`simdoc.stages.plan.scan_corpus`'s scan of what it listed."""
        jobs = self.engine.jobs
        waiting: deque[StagedTask] = deque()  # made, not handed to the pool yet
        made = 0
        for task in self.tasks:  # each next task walks as far as it needs
            waiting.append(task)
            made += len(task.task.files)
            if self.results is None:
                if len(waiting) < jobs:
                    continue
                self.results = self.engine.started(scan_staged)
            self._hand(waiting, jobs - 1)
            if made >= EARLY_FILES:
                break
        for run in self.runs:  # the rest of the walk: its tasks are made by the pool's thread afterwards
            self.builder.add(*run)
            if self.results is not None:
                self._hand(waiting, jobs - 1)
        if self.results is not None:
            self._hand(waiting, None)
            self.results.then(self.tasks)
        return scan_of(store, manifest, corpus, self.builder.finish(), self.skipped, self.clock, stored, False)

    def _hand(self, waiting: deque, most: int | None) -> None:
        """Tasks waiting handed to the pool while fewer than ``most`` run (None: all of them)."""
        while waiting and (most is None or self.results.running() < most):
            self.results.submit(waiting.popleft())

    def _files(self) -> Iterator[tuple[FileToRead, None, bool]]:
        """(file, no digest, not kept) of each file listed, a run at a time, walking further when it
        runs out (in this thread while the walk goes on, in the pool's once it has ended)."""
        builder = self.builder
        taken = at = 0  # runs and files taken
        while True:
            if taken == len(builder.blocks):
                run = next(self.runs, None)
                if run is None:
                    return
                builder.add(*run)
                continue
            sizes = builder.blocks[taken][:, 0].tolist()
            taken += 1
            ids, path = builder.ids, builder.path
            for i, size in zip(range(at, at + len(sizes)), sizes):
                yield FileToRead(ids[i], path(i), size), None, False
            at += len(sizes)

    def close(self) -> None:
        if self.results is not None:
            self.results.close()

    def __enter__(self) -> Early:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

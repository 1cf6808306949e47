"""A first build's files handed to reading tasks while the corpus is still being walked.

When no row of the current build can be kept (a first build, --rebuild, other
parameters), every file listed is read, in walk order, and a reading task
needs nothing of the listing but its own files. On a pool of several
processes, the walk (~0.45 s at 10^5 files, ten times that at 10^6) then runs
in a thread of its own while the workers read what it has found so far,
instead of before the first task while they wait (issue 32: the serial time
is what kept ``--jobs 2`` from twice as fast). The main process waits for the
walk's end to make the :class:`~simdoc.stages.plan.Scan` (its id, the racy
window, the current table), then collects the results, which have waited in
the pool for it.

The tasks are the ones :func:`simdoc.stages.plan.reading_plan` would give: the
same files, in the same order, cut by the same rule
(:func:`simdoc.stages.scan.scan_tasks`), with no digest indexed. A walk that
fails raises in the main process, as it would have before any task.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

from simdoc.corpus.entries import EntriesBuilder
from simdoc.corpus.objects import is_url
from simdoc.corpus.walk import Skipped, discover_runs, resolve_sources
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.plan import FileToRead, Scan, scan_of
from simdoc.stages.racy import index_clock
from simdoc.stages.scan import scan_tasks
from simdoc.stages.scan_results import BatchResult
from simdoc.stages.staged_rows import scan_staged, staged
from simdoc.store.directory import IndexStore

_END = object()
_TELL_FILES = 256  # files listed before the thread that makes the tasks is woken


def walk_ahead(corpus, store: IndexStore, engine: object, shingle: ShingleParams, signer: SignatureParams | None, reuse: bool) -> ReadAhead | None:
    """The reading of ``corpus`` started as it is walked, when that can be (see the module): a pool
    of several processes, one local folder, and signatures made as it is read (not shingle
    sets, which a build of the same parameters keeps); None: walk it first."""
    if reuse or signer is None or not isinstance(engine, LocalEngine) or engine.jobs < 2:
        return None
    if not isinstance(corpus, (str, os.PathLike)) or is_url(corpus):
        return None
    base, sources = resolve_sources(corpus)
    if len(sources) != 1 or sources[0][1] != "" or is_url(base):
        return None
    return ReadAhead(sources[0][0], store, engine, shingle, signer)


class ReadAhead:
    """The walk in a thread (:meth:`files`: its files as found), the engine's results of the tasks
    made of them (:meth:`scan`, then :meth:`results`). Close it (it is a context manager): the
    walk stops, then the pool."""

    def __init__(self, root: str, store: IndexStore, engine: LocalEngine, shingle: ShingleParams, signer: SignatureParams) -> None:
        index = store.path
        self.clock = index_clock(index)  # before the listing: see simdoc.stages.racy
        self.skipped: list[Skipped] = []
        runs = discover_runs(
            root, [index], bool(shingle.follow_symlinks), shingle.include or (), shingle.exclude or (), self.skipped,
        )  # a root that is not a folder raises here, at once
        store.ensure_dir()  # now, not after the walk: a range's rows are staged in it (simdoc.stages.staged_rows)
        self.builder = EntriesBuilder()
        self.sizes: list[int] = []
        self.found = 0  # files listed so far (under the condition)
        self.done = self.stop = False
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._walk, args=(runs,), name="simdoc-walk", daemon=True)
        self.thread.start()
        tasks = scan_tasks(self.files(), shingle, signer)
        self.ran = engine.map(scan_staged, staged(tasks, index))
        self.first: object = _END

    def _walk(self, runs: Iterator[tuple]) -> None:
        listed: list[int] = []  # sizes of the files listed since the last told
        try:
            for run in runs:
                if self.stop:
                    return
                listed += self.builder.add(*run)[:, 0].tolist()
                if len(listed) >= _TELL_FILES:
                    self._tell(listed)
                    listed = []
        except BaseException as exc:  # raised again in the main process (scan)
            self.error = exc
        finally:
            self._tell(listed, done=True)

    def _tell(self, listed: list[int], done: bool = False) -> None:
        """The files listed, to :meth:`files`: a few hundred at a time, not a folder at a time (a
        source tree has a folder for every few files; each wake-up of the thread that makes the
        tasks takes the interpreter lock from the walk)."""
        with self.cond:
            self.sizes += listed
            self.found = len(self.sizes)
            self.done = done
            self.cond.notify_all()

    def files(self) -> Iterator[tuple[FileToRead, None, bool]]:
        """(file, no digest, not kept) of each file, as the walk lists it (the tasks' plan; run by
        the pool's thread that hands out tasks)."""
        at = 0
        while True:
            with self.cond:
                while self.found == at and not self.done:
                    self.cond.wait()
                found = self.found
            if found == at:  # done
                return
            ids, path, sizes = self.builder.ids, self.builder.path, self.sizes
            for i in range(at, found):
                yield FileToRead(ids[i], path(i), sizes[i]), None, False
            at = found

    def scan(self, store: IndexStore, manifest: dict, corpus, stored: dict | None, same_params: bool) -> Scan:
        """:func:`simdoc.stages.plan.scan_corpus`, once the walk is over: the pool is started first
        (its first result waited for), so that its workers read while the walk goes on."""
        self.first = next(self.ran, _END)  # a range's piece: joined with the others later (simdoc.stages.ranges)
        self.thread.join()
        if self.error is not None:
            raise self.error
        return scan_of(store, manifest, corpus, self.builder.finish(), self.skipped, self.clock, stored, same_params)

    def results(self) -> Iterator[BatchResult]:
        """The tasks' results, in task order (closing it stops the pool)."""
        try:
            if self.first is not _END:
                yield self.first
            yield from self.ran
        finally:
            self.ran.close()

    def close(self) -> None:
        with self.cond:
            self.stop = True
        self.thread.join()
        self.ran.close()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

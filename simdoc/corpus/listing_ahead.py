"""Folders listed ahead of a depth-first walk, on threads of their own.

A walk of a folder corpus lists and stats every folder one after another
before the first file can be read: 0.3 s for the 100 folders of 10^5 files,
0.9 s for the 8,702 folders of Python's own sources, on one core while the
other waits. Most of that time is spent outside Python's lock: the listing
(``os.listdir``), and the stat of each name in the compiled loop
(:mod:`simdoc.kernels_walk`, which releases it). So :class:`ListingAhead`
lists the folders the walk will enter next on ``threads - 1`` background
threads while the walk's own thread takes the listings it needs in order.

The walk stays the one that decides: it asks for each folder's listing when
it enters the folder, exactly as it would list it itself, and a folder whose
turn comes before a thread has started it is listed by the walk's thread at
once (so the walk never waits behind a thread that is waiting for it). A
thread takes the folder nearest in the walk's order: a folder's key is the
tuple of its position among its siblings at each level, which sorts as the
depth-first walk enters them. At most :data:`AHEAD` listings wait, done,
for the walk to take them, so memory stays that of a few folders. Each
listing has its own list of paths passed over, which the walk adds to its
own only when it enters the folder (a folder listed ahead and then not
entered, the second link to one already walked, reports nothing).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from typing import Any

AHEAD = 16  # listings done and not yet taken, at most: a thread waits beyond that

_PENDING, _RUNNING, _DONE, _TAKEN = range(4)


class _Job:
    __slots__ = ("key", "args", "state", "items", "skipped", "error")

    def __init__(self, key: tuple, args: tuple) -> None:
        self.key, self.args = key, args
        self.state = _PENDING
        self.items: list = []
        self.skipped: list = []
        self.error: BaseException | None = None

    def __lt__(self, other: _Job) -> bool:
        return self.key < other.key


class ListingAhead:
    """Runs ``list_folder(*args, skipped)`` for folders given by :meth:`ahead`, on ``threads - 1``
    background threads, nearest in walk order first; :meth:`take` gives a folder's listing and
    the paths its listing passed over. Use as a context manager: the threads stop on exit."""

    def __init__(self, list_folder: Callable[..., list], threads: int) -> None:
        self._list = list_folder
        self._heap: list[_Job] = []
        self._done = 0
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._run, name="simdoc-listing", daemon=True) for _ in range(max(threads - 1, 0))]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> ListingAhead:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ahead(self, key: tuple, *args: Any) -> _Job:
        """A folder the walk may enter later, at ``key`` in its order (see the module)."""
        job = _Job(key, args)
        if self._threads:
            with self._cond:
                heapq.heappush(self._heap, job)
                self._cond.notify()
        return job

    def take(self, job: _Job) -> tuple[list, list]:
        """The folder's listing and what it passed over, listed here if no thread has begun it."""
        with self._cond:
            mine = job.state == _PENDING  # a thread that pops it then finds it taken, and passes over it
            if not mine:
                while job.state == _RUNNING:
                    self._cond.wait()
                self._done -= 1
                self._cond.notify()
            job.state = _TAKEN
        if mine:
            job.items = self._list(*job.args, job.skipped)
        if job.error is not None:
            raise job.error
        return job.items, job.skipped

    def drop(self, job: _Job) -> None:
        """A folder the walk will not enter after all (a second link to one walked already)."""
        with self._cond:
            if job.state != _PENDING:
                while job.state == _RUNNING:
                    self._cond.wait()
                self._done -= 1
                self._cond.notify()
            job.state = _TAKEN

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._done >= AHEAD):
                    self._cond.wait()
                if self._closed:
                    return
                job = heapq.heappop(self._heap)
                if job.state != _PENDING:  # the walk took it first
                    continue
                job.state = _RUNNING
            try:
                items = self._list(*job.args, job.skipped)
            except BaseException as exc:  # noqa: BLE001 - raised again in the walk's thread, where it belongs
                items, job.error = [], exc
            with self._cond:
                job.items = items
                job.state = _DONE
                self._done += 1
                self._cond.notify_all()

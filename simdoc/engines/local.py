"""The local engine: the stages' tasks on a pool of processes of this machine.

:class:`LocalEngine` maps a top-level task function over tasks, in task
order, on ``jobs`` processes (1: in this process, with no pool at all). It
knows nothing of the tasks: a stage that needs its workers to hold some state
before the first task (the pairs being verified) hands an ``initializer``,
as :class:`multiprocessing.pool.Pool` takes one, so the engine never imports
the stages.

On Linux the workers are forked: they inherit the compiled kernels (warmed
up once, here) and the initializer's arguments without pickling them.
Elsewhere they are spawned (fork is unsafe with some system libraries),
except for a pool whose initializer's arguments must be shared, not copied.

The workers leave Ctrl-C and SIGTERM to the main process, which stops the
pool, and die with it (:func:`simdoc.interrupts.quiet_worker`): a killed
run's workers never print a traceback.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from simdoc.kernel_choice import wanted
from simdoc.corpus import objects
from simdoc.errors import UsageError
from simdoc.interrupts import held_while_forking, quiet_worker
from simdoc.memory import reuse_freed_blocks

if TYPE_CHECKING:
    import multiprocessing.context


def default_jobs() -> int:
    """The cores this process may run on (all cores where that is not known)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


def check_jobs(jobs: int | None) -> int:
    """``--jobs`` as given, or all cores; below 1 is a usage error."""
    if jobs is None:
        return default_jobs()
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def can_fork() -> bool:
    """Whether workers can be forked here, sharing this process's memory at the start."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def pool_context(share: bool = False) -> multiprocessing.context.BaseContext:
    """Fork on Linux, else spawn; fork wherever it exists when the workers must ``share`` this process's memory."""
    import multiprocessing

    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") or (share and can_fork()) else "spawn")


class LocalEngine:
    """Runs tasks on ``jobs`` processes of this machine; ``jobs`` also sizes the stages' threads.

    Parameters
    ----------
    jobs : int or None
        Worker processes (and threads for sorting bands and verifying). None:
        all cores. Results never depend on it.
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = check_jobs(jobs)

    def __repr__(self) -> str:
        return f"LocalEngine(jobs={self.jobs})"

    def map(
        self,
        func: Callable[[Any], Any],
        tasks: Iterable,
        *,
        initializer: Callable[..., None] | None = None,
        initargs: tuple = (),
        ordered: bool = True,
    ) -> Iterator:
        """Results of ``func`` over ``tasks`` (in task order unless not ``ordered``).

        ``func`` must be a top-level function, and the tasks picklable. ``tasks``
        may be a generator: the pool's feeder thread draws from it as workers
        take tasks, so tasks can be made while the first ones run. With fewer
        than two tasks, or one job, everything runs in this process (which
        then runs ``initializer`` itself, as a worker would). A caller that
        stops before the end closes the generator (``contextlib.closing``):
        the pool then stops in the run's flow, where a signal is raised as
        usual, not in a finalizer, where Python could only ignore it.
        """
        tasks = iter(tasks)
        head = list(itertools.islice(tasks, max(self.jobs, 1)))  # fewer than jobs: that is all of them
        if self.jobs <= 1 or len(head) <= 1:
            if initializer is not None:
                initializer(*initargs)
            for task in itertools.chain(head, tasks):
                yield func(task)
            return
        from simdoc.corpus import plain_batch
        from simdoc.engines.pool import WidePool

        if wanted():  # (not in a stage too small to load the kernels for: simdoc.kernel_choice)
            from simdoc import kernels, kernels_bytes

            kernels.warm_up()  # compiled once here; forked workers inherit the machine code
            kernels_bytes.warm_up()
        # And whether the small files' compiled read works here (its loop loaded and called once):
        # found out in each forked worker otherwise, ~20 ms of each one's start (verification at -j 2).
        plain_batch.available()
        context = pool_context(share=initializer is not None)
        # The storage options of a corpus at a URL go to each worker as it starts (spawned ones too).
        start = (os.getpid(), initializer, initargs, objects.current())
        with _forked_frozen(), held_while_forking():
            pool = WidePool(len(head), _start_worker, start, context=context)
        with pool:
            if ordered:
                yield from pool.imap(func, itertools.chain(head, tasks), chunksize=1)
            else:
                yield from pool.imap_unordered(func, itertools.chain(head, tasks), chunksize=1)


@contextlib.contextmanager
def _forked_frozen() -> Iterator[None]:
    """While the pool forks its workers, this process's objects are frozen (:func:`gc.freeze`):
    a worker's collector then never walks them. Walking them writes to each object's header,
    and so copies every page of the inherited heap that holds one (the verification of Python's
    sources at -j 2: 14,000 page faults a worker, 8,000 with the freeze; the workers' CPU time
    0.51-0.60 s, 0.38-0.48 s with it). This process unfreezes them once the workers are forked."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _start_worker(parent: int, initializer: Callable[..., None] | None, initargs: tuple, options: dict) -> None:
    """A worker's start: signals left to the main process (simdoc.interrupts), the client's storage
    options, then the stage's initializer."""
    quiet_worker(parent)
    reuse_freed_blocks()  # a task's arrays: the heap's again, not fresh pages (simdoc.memory)
    objects.configure(options)
    if initializer is not None:
        initializer(*initargs)

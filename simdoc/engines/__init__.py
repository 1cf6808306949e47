"""Engines run the stages' tasks: on this machine's processes, or on a Dask cluster.

An engine is an object the caller makes and hands to the stages (the CLI
makes one per command, from ``--jobs`` and ``--scheduler``). Every engine
has ``jobs`` (threads for the work a stage does in this process: sorting
bands, verifying pairs) and ``map(func, tasks)``: the results of a
top-level, picklable task function over the tasks, in task order.

* :class:`~simdoc.engines.local.LocalEngine`: a process pool of this machine.
* :class:`DaskEngine`: the tasks on a Dask cluster (the optional extra
  ``dask``: ``pip install '.[dask]'``), streamed by
  :func:`simdoc.engines.dask.map_ordered`; the stages that have a cluster
  counterpart of their own (scoring the candidates, connected components)
  use its ``client``, a :class:`~simdoc.engines.dask_checked.CheckedClient`: every
  task it submits runs only on a worker that has met the run's contract.

:func:`open_engine` makes the one a command asks for. Engines import no stage.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from simdoc.engines.local import LocalEngine

ENV = "SIMDOC_SCHEDULER"  # the scheduler's address when --scheduler is not given


class Engine(Protocol):
    """What the stages ask of an engine."""

    jobs: int

    def map(self, func: Callable[[Any], Any], tasks: Iterable) -> Iterator: ...


class DaskEngine:
    """The tasks on the Dask cluster of ``client``, whose contract was checked (see :func:`open_engine`),
    and is checked again by every task on its worker (a CheckedClient).

    ``jobs`` sizes the threads of the work that stays in this process.
    """

    def __init__(self, client: Any, jobs: int | None = None) -> None:
        self.client = client
        self.jobs = LocalEngine(jobs).jobs

    def __repr__(self) -> str:
        return f"DaskEngine({self.client!r}, jobs={self.jobs})"

    def map(self, func: Callable[[Any], Any], tasks: Iterable) -> Iterator:
        """Results of ``func`` over ``tasks``, in task order, submitted as a bounded stream."""
        from simdoc.engines.dask import map_ordered

        return map_ordered(self.client, func, tasks)


@contextlib.contextmanager
def open_engine(
    jobs: int | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
    *,
    index: str | os.PathLike | None = None,
    corpus: str | os.PathLike | list | None = None,
    needs_corpus: bool = True,
) -> Iterator[LocalEngine | DaskEngine]:
    """The engine for ``scheduler`` (host:port, local[N]; default ``$SIMDOC_SCHEDULER``), else a LocalEngine.

    A cluster is connected to and its contract checked here, before any work
    (:func:`simdoc.engines.dask.connect`: every worker runs this simdoc and sees
    ``index`` and ``corpus``, the latter only if ``needs_corpus``), waiting up
    to ``wait_workers`` seconds for a first worker; a worker that joins later
    is checked before its first task. ``jobs`` is checked first.
    """
    local = LocalEngine(jobs)
    scheduler = scheduler or os.environ.get(ENV) or None
    if scheduler is None:
        yield local
        return
    # (The Dask modules, and dask itself, are imported only for a cluster: ~8 ms of every local run.)
    from simdoc.engines.dask import connect

    with connect(scheduler, wait_workers, index, corpus, needs_corpus) as client:
        yield DaskEngine(client, local.jobs)

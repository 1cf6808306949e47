"""Results of a Dask run waited for while the cluster has a worker to compute them.

Dask keeps a task whose workers all died waiting for the next worker that
joins, without end: a client that waited on its future with no timeout hung
for good (a run from cron never ended). So the client waits a second at a
time (:data:`POLL_SECONDS`) and, each time the result is not there, asks
the scheduler how many workers it has: once it has had none for the run's
``--wait-workers`` (the same patience as for a first worker at the start,
default 30 s), the run stops with a :class:`ClusterError` (exit 7) naming
the scheduler. A worker that dies while others live changes nothing here:
Dask runs its tasks again on the others, and so does a worker that joins
within the wait.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from simdoc.errors import ClusterError

DEFAULT_WAIT_WORKERS = 30.0  # seconds to wait for a first worker, or for one after all left (--wait-workers)
POLL_SECONDS = 1.0  # a result not there after this long: the scheduler is asked whether it has a worker


def result_of(client: Any, future: Any) -> Any:
    """``future.result()``, or a ClusterError once the scheduler of ``client`` has had no worker
    for ``client.wait_workers`` seconds (:data:`DEFAULT_WAIT_WORKERS` on a plain Dask client)."""
    empty_since: float | None = None
    while True:
        try:
            return future.result(timeout=POLL_SECONDS)
        except TimeoutError:
            if future.done():  # a task of its own that raised TimeoutError, or done just now
                return future.result()
        if client.nthreads():  # the scheduler's workers, asked now (not the client's cached view)
            empty_since = None
            continue
        now = time.monotonic()
        if empty_since is None:
            empty_since = now
        elif now - empty_since >= _wait(client):
            raise no_workers_error(client)


def results_of(client: Any, futures: Sequence) -> list:
    """:func:`result_of` each of ``futures``, in order."""
    return [result_of(client, f) for f in futures]


def scatter(client: Any, data: list) -> list:
    """``client.scatter(data)`` (not hashed), or the ClusterError of :func:`result_of` when no worker
    is there to take it within the wait (Dask's own answer: a TimeoutError after its timeout)."""
    try:
        return client.scatter(data, hash=False, timeout=max(_wait(client), POLL_SECONDS))
    except TimeoutError:
        if client.nthreads():
            raise
        raise no_workers_error(client) from None


def lost_with_a_worker(client: Any, exc: BaseException) -> bool:
    """Whether ``exc``, a task cancelled (CancelledError), was cancelled by a scheduler that is
    still there: its inputs died with a worker, data the client sent (scattered), which Dask
    cannot compute again. Not a scheduler lost (its reason says so, or it does not answer)."""
    if client.status not in ("running", "newly-created") or "scheduler-connection-lost" in str(exc):
        return False
    try:
        client.nthreads()
    except Exception:
        return False
    return True


def no_workers_error(client: Any) -> ClusterError:
    address = getattr(client, "address", None) or client.scheduler.address
    return ClusterError(
        f"every Dask worker left the scheduler at {address} during the run, and none joined within {_wait(client):g} s",
        hint=f"start workers (`dask worker {address}`) and run the same command (the stages that finished are kept "
        "in the index), or wait longer with --wait-workers SECONDS",
    )


def _wait(client: Any) -> float:
    wait = getattr(client, "wait_workers", None)
    return DEFAULT_WAIT_WORKERS if wait is None else float(wait)

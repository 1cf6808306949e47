"""Run simdoc's stages on a Dask cluster: the same functions, the same answers.

* The contract (:func:`connect`): before any work, the client waits for
  workers and checks that every worker imports the same simdoc version and
  sees the corpus and the index at the client's absolute paths
  (:mod:`simdoc.engines.dask_contract`). Then every task is checked where it
  runs: the client hands out a CheckedClient, whose tasks run on a worker
  only once that worker process has met the same terms, so a worker that
  joins later runs nothing unchecked (:mod:`simdoc.engines.dask_checked`).
  Any breach, a scheduler lost later, or a task that kept killing its
  workers is a :class:`ClusterError` (here); so is a scheduler left without
  any worker, for ``--wait-workers``, while results are awaited
  (:mod:`simdoc.engines.dask_waiting`).
* Reading and signatures: the batches the local engine gives to its
  process pool (and the ranges of a big file, simdoc.stages.ranges) are Dask tasks instead, submitted as a bounded stream
  (:func:`map_ordered`). Workers read the documents, leave the docs-table
  columns and the signature rows in part files of the index and send back
  where they are; the client reads the columns from the parts, and workers
  copy the rows into the new matrix (simdoc.stages.dask_signatures).
  The corpus and the index must be on a file system every worker sees.
* Banding (simdoc.stages.dask_index): workers compute the band keys by
  row range and merge the buckets by key range, writing both in place.
* Candidates (simdoc.stages.dask_pairs): each band is cut into key ranges,
  one task each, as many as the data volume asks for; a task reads its
  range's slice of the sorted bands, keeps a pair only in the first band
  where its documents share a key, expands folded exact copies, and scores
  its pairs on the worker, verifying them against the documents, re-read
  from the shared file system (simdoc.stages.verify). Only the pairs that
  are printed, and what verification learnt, travel back.
* Clusters (simdoc.stages.dask_components): ``clusters`` and ``dedup``
  find the connected components of the verified pairs there, the edges
  cut into hash partitions passed from task to task as futures.

The client sorts the pairs exactly as the local engine does, so the output
is byte-identical whatever the number of workers or partitions.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator

from simdoc.engines.dask_checked import CheckedClient, Contract
from simdoc.engines.dask_contract import BROKEN, _fault, _version, check_contract
from simdoc.engines.dask_waiting import DEFAULT_WAIT_WORKERS, lost_with_a_worker, result_of
from simdoc.errors import ClusterError, SimdocError, UsageError

_LOCAL = re.compile(r"^local(?:\[(\d+)\])?$")


@contextlib.contextmanager
def connect(address: str, wait_workers: float | None = None, index=None, corpus=None, needs_corpus: bool = True):
    """A :class:`CheckedClient` of ``address`` (host:port), or of ``local[N]``: an in-process LocalCluster of N workers.

    The cluster's contract is checked here, before the client is handed out
    (:func:`check_contract`), and again by every task on its worker before
    it runs (:class:`CheckedClient`); errors of the cluster met while the
    client is in use become :class:`ClusterError`.
    """
    try:
        import distributed  # noqa: F401 (said here, before anything, if it is missing)
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask", hint="pip install 'dask[distributed]' (or, in simdoc's source folder, pip install '.[dask]')"
        ) from None
    wait = DEFAULT_WAIT_WORKERS if wait_workers is None else wait_workers
    # Dask logs its own bookkeeping (shuffle start/stop) as warnings, and a lost scheduler as
    # errors of the client; stderr is for ours (a lost scheduler is a ClusterError).
    logging.getLogger("distributed").setLevel(logging.ERROR)
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    with _no_message_log():
        yield from _connected(address, wait, index, corpus, needs_corpus)


MESSAGE_LOG = 10  # messages Dask's comms made here keep for its developers (its default: 1,000)


@contextlib.contextmanager
def _no_message_log() -> Iterator[None]:
    """Dask's comms keep the last 1,000 messages they sent, for its developers
    (``distributed.admin.low-level-log-length``): on the client, every task it submitted,
    ~80 bytes a file of a reading task (8 MB at 10^5 files, 80 MB at 10^6), held to
    the end. A few for the comms made here (the client's; local[N]'s scheduler's)."""
    import dask

    with dask.config.set({"distributed.admin.low-level-log-length": MESSAGE_LOG}):
        yield


def _connected(address: str, wait: float, index, corpus, needs_corpus: bool) -> Iterator[CheckedClient]:
    from distributed import Client, LocalCluster

    m = _LOCAL.match(address)
    if m:
        n = int(m.group(1) or os.cpu_count() or 1)
        if n < 1:
            # A cluster of no worker would wait --wait-workers for one that never comes, then
            # hint at starting `dask worker local[0]`.
            raise UsageError(
                f"--scheduler {address}: an in-process cluster needs at least 1 worker",
                hint="use local[N] with N >= 1, or local for one per core",
            )
        try:
            cluster = LocalCluster(
                # CRITICAL: a worker's heartbeat meeting the scheduler as it closes logs an ERROR
                # traceback at the end of a run; a real failure reaches the client as ClusterError.
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.CRITICAL,
                # No dashboard, but the scheduler still serves its HTTP routes, by default on :8787,
                # with a UserWarning on stderr when that port is taken (another cluster): any free port
                # of this host, which is never taken.
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            )
        except Exception as exc:  # e.g. distributed's IO-loop thread not started within its 10 s: a bare AssertionError
            raise ClusterError(
                f"could not start the local Dask cluster {address}: {type(exc).__name__} {exc}".rstrip(),
                hint="run the command again, or without --scheduler",
            ) from exc
        with cluster, Client(cluster) as client, _checked(client, address, wait, index, corpus, needs_corpus) as checked:
            yield checked
        return
    try:
        _handshake(address)
        client = Client(address, timeout=f"{CONNECT_SECONDS}s")
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the Dask scheduler at {address}: {exc}",
            hint="give host:port of a running `dask scheduler` (e.g. tcp://10.0.0.5:8786), or local[N]",
        ) from None
    with client, _checked(client, address, wait, index, corpus, needs_corpus) as checked:
        yield checked


CONNECT_SECONDS = 5  # to reach the scheduler's port, and again for its answer to Dask's handshake


def _handshake(address: str) -> None:
    """Dask's handshake with ``address``, within 2 x CONNECT_SECONDS, or an OSError saying what is there.

    distributed's Client bounds the TCP connect by its timeout, not the handshake
    after it: at a port where something else listens (a web server, the dashboard's
    :8787, a tunnel with nothing behind it) it waits for good for an answer that
    never comes, or reads another protocol's bytes as a frame length and fails in
    numpy (an allocation of exabytes). So the handshake is made once first, bounded,
    on a loop of its own (in a thread: the caller's may be running one).
    """
    import asyncio

    from distributed.comm import connect

    async def hello() -> None:
        comm = await asyncio.wait_for(connect(address, timeout=CONNECT_SECONDS), 2 * CONNECT_SECONDS)
        await comm.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, hello()).result()
        except asyncio.TimeoutError:  # the connect's own timeout is a plain OSError: this is the handshake's
            raise OSError(f"no answer to Dask's handshake within {2 * CONNECT_SECONDS} s: is it a Dask scheduler's port?") from None
        except (OSError, ValueError):
            raise  # unreachable, or no address: as the Client would say it
        except Exception as exc:  # another protocol's bytes, read as Dask's frames
            raise OSError(f"what answers there is no Dask scheduler ({type(exc).__name__} reading its handshake)") from None


@contextlib.contextmanager
def _checked(client, address: str, wait: float, index, corpus, needs_corpus: bool) -> Iterator[CheckedClient]:
    """The contract checked on the workers there are, then the client whose tasks check theirs."""
    with _cluster_errors(client, address):
        checks = check_contract(client, address, wait, index, corpus, needs_corpus)
        with Contract(index, checks) as contract:
            yield CheckedClient(client, contract, address, wait)


# ---------------------------------------------------------------- a cluster lost while in use


@contextlib.contextmanager
def _cluster_errors(client, address: str) -> Iterator[None]:
    """Errors of the cluster itself, met while the client is in use, as ClusterError."""
    try:
        yield
    except (SimdocError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # asyncio.CancelledError is no Exception
        error = _as_cluster_error(client, address, exc)
        if error is None:
            raise
        raise error from None


def _as_cluster_error(client, address: str, exc: BaseException) -> ClusterError | None:
    try:
        from distributed import KilledWorker
        from distributed.comm.core import CommClosedError
    except ImportError:  # pragma: no cover - distributed is there: the client exists
        return None
    if isinstance(exc, RuntimeError) and len(exc.args) == 3 and exc.args[0] == BROKEN:
        worker, out = exc.args[1:]  # what the task found on its worker (see CheckedClient)
        fault = _fault(worker, out, _version())
        if fault is not None:
            where, problem, hint, _ = fault
            return ClusterError(f"Dask worker {where} {problem}", hint=hint)
    first = (str(exc).splitlines() or [""])[0] or type(exc).__name__
    if isinstance(exc, KilledWorker):
        return ClusterError(
            f"a task killed every Dask worker that ran it: {first}",
            hint="see the workers' logs (out of memory?); give workers more memory, or run without --scheduler",
        )
    import asyncio  # imported by distributed already: a run without a cluster does without it

    cancelled = isinstance(exc, (concurrent.futures.CancelledError, asyncio.CancelledError))
    lost = client.status not in ("running", "newly-created") or isinstance(exc, CommClosedError)
    if cancelled and not lost and lost_with_a_worker(client, exc):
        # The scheduler is there: it cancelled tasks whose inputs died with a worker, data the client
        # sent (scattered: the edges of clusters' components), which Dask cannot compute again.
        return ClusterError(
            f"a Dask worker of the scheduler at {address} left with data of the run that only the client had ({first})",
            hint=f"run the same command again with workers up (`dask worker {address}`): the stages that finished "
            "are kept in the index",
        )
    if lost or cancelled:
        # A cancelled task says "cancelled for reason: scheduler-connection-lost" and its key: nothing to add.
        detail = "" if cancelled else f" ({type(exc).__name__}: {first})"
        return ClusterError(
            f"lost the Dask scheduler at {address} during the run{detail}",
            hint="the stages that finished are kept in the index: start the scheduler and workers again, "
            "and run the same command",
        )
    return None


TASKS_PER_THREAD = 4  # tasks in flight per worker thread: a queue for each, and no more


def in_flight(client) -> int:
    """How many tasks map_ordered keeps submitted at once: TASKS_PER_THREAD per worker thread."""
    workers = client.scheduler_info()["workers"].values()
    return max(TASKS_PER_THREAD * sum(w.get("nthreads", 1) for w in workers), TASKS_PER_THREAD)


def map_ordered(client, func: Callable, tasks: Iterable, window: int | None = None) -> Iterator:
    """Results of func over tasks, computed on the cluster, handed back in task order.

    A bounded stream: at most ``window`` tasks (default :func:`in_flight`)
    are submitted and not yet handed back; the next is made and submitted as
    each result is taken, and a future is released once its result is out.
    So neither the tasks nor their futures or results are all held at once,
    however many there are. A scheduler left with no worker for the run's
    ``--wait-workers`` is a ClusterError (:func:`simdoc.engines.dask_waiting.result_of`).
    """
    window = window or in_flight(client)
    tasks = iter(tasks)
    pending: collections.deque = collections.deque()
    try:
        for task in itertools.islice(tasks, window):
            pending.append(client.submit(func, task, pure=False))
        while pending:
            # The future is dropped here (Dask releases it); a cluster left without a worker ends the wait.
            result = result_of(client, pending.popleft())
            for task in itertools.islice(tasks, 1):
                pending.append(client.submit(func, task, pure=False))
            yield result
    finally:
        if pending:
            client.cancel(list(pending))

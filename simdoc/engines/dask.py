"""Run simdoc's stages on a Dask cluster: the same functions, the same answers.

* The contract first (:func:`connect`, :func:`check_contract`): before any
  work, the client waits for workers (``--wait-workers``), and checks that
  every worker imports the same simdoc version and sees the corpus and the
  index at the client's absolute paths; a worker that does not answer within
  max(--wait-workers, :data:`ANSWER_FLOOR`) seconds is named, never waited
  for. Any breach, a scheduler lost later, or a task that kept killing its
  workers is a :class:`ClusterError`.
* Reading and signatures: the batches the local engine gives to its
  process pool are Dask tasks instead, submitted as a bounded stream
  (:func:`map_ordered`). Workers read the documents and send back their
  docs-table rows and signature rows; the client writes the index. The corpus must be on a file system every worker sees.
* Banding runs on the client (a few sorts of the band keys).
* Candidates (simdoc.stages.cluster_pairs): each band is cut into key ranges,
  one task each, as many as the data volume asks for; a task reads its
  range's slice of the sorted bands, keeps a pair only in the first band
  where its documents share a key, expands folded exact copies, and scores
  its pairs on the worker, verifying them against the documents, re-read
  from the shared file system (simdoc.stages.verify). Only the pairs that
  are printed, and what verification learnt, travel back.
* Clusters (simdoc.stages.cluster_components): ``clusters`` and ``dedup``
  find the connected components of the verified pairs there, the edges
  cut into hash partitions passed from task to task as futures.

The client sorts the pairs exactly as the local engine does, so the output
is byte-identical whatever the number of workers or partitions.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import hashlib
import itertools
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from simdoc.errors import ClusterError, SimdocError, UsageError

ENV = "SIMDOC_SCHEDULER"
DEFAULT_WAIT_WORKERS = 30.0  # seconds to wait for a first worker (--wait-workers)
_LOCAL = re.compile(r"^local(?:\[(\d+)\])?$")
_SAMPLE = 8  # corpus entries each worker must see, besides the corpus folder itself
ANSWER_FLOOR = 10.0  # seconds a worker has at least to answer the contract's check (else max(--wait-workers, this))


@contextlib.contextmanager
def connect(address: str, wait_workers: float | None = None, index=None, corpus=None, needs_corpus: bool = True):
    """A Dask client for ``address`` (host:port), or ``local[N]``: an in-process LocalCluster of N workers.

    The cluster's contract is checked once, here, before the client is
    handed out (:func:`check_contract`); errors of the cluster met while
    the client is in use become :class:`ClusterError`.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask", hint="pip install 'dask[distributed]' (or, in simdoc's source folder, pip install '.[dask]')"
        ) from None
    wait = DEFAULT_WAIT_WORKERS if wait_workers is None else wait_workers
    # Dask logs its own bookkeeping (shuffle start/stop) as warnings, and a lost scheduler as
    # errors of the client; stderr is for ours (a lost scheduler is a ClusterError).
    logging.getLogger("distributed").setLevel(logging.ERROR)
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    m = _LOCAL.match(address)
    if m:
        n = int(m.group(1) or os.cpu_count() or 1)
        try:
            cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
            )
        except Exception as exc:  # e.g. distributed's IO-loop thread not started within its 10 s: a bare AssertionError
            raise ClusterError(
                f"could not start the local Dask cluster {address}: {type(exc).__name__} {exc}".rstrip(),
                hint="run the command again, or without --scheduler",
            ) from exc
        with cluster:
            with Client(cluster) as client, _cluster_errors(client, address):
                check_contract(client, address, wait, index, corpus, needs_corpus)
                yield client
        return
    try:
        client = Client(address, timeout="5s")
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the Dask scheduler at {address}: {exc}",
            hint="give host:port of a running `dask scheduler` (e.g. tcp://10.0.0.5:8786), or local[N]",
        ) from None
    with client, _cluster_errors(client, address):
        check_contract(client, address, wait, index, corpus, needs_corpus)
        yield client


# ---------------------------------------------------------------- the contract

# Run on every worker by source, not by reference: a worker that cannot import
# simdoc can still run it, and say so.
_PROBE_SOURCE = """
def _simdoc_contract_probe(checks):
    import hashlib, os, socket, stat, sys

    out = {"host": socket.gethostname(), "python": sys.executable, "version": None, "problems": []}
    try:
        import simdoc

        out["version"] = simdoc.__version__
    except BaseException as exc:
        out["import_error"] = ((type(exc).__name__ + ": " + str(exc)).splitlines() or ["?"])[0]
    for what, path, want in checks:
        try:
            st = os.stat(path) if want != "exists" else os.lstat(path)
            if want == "dir" and not stat.S_ISDIR(st.st_mode):
                problem = "not a directory"
            elif want.startswith("sha256:"):
                with open(path, "rb") as f:
                    same = hashlib.sha256(f.read()).hexdigest() == want[7:]
                problem = None if same else "other contents than the client's (another file system?)"
            else:
                problem = None
        except OSError as exc:
            problem = exc.strerror or str(exc)
        if problem:
            out["problems"].append((what, path, problem))
    return out
"""


def _probe_function() -> Callable:
    namespace: dict = {"__name__": "__main__"}  # pickled by value (cloudpickle), like a function of a script
    exec(compile(_PROBE_SOURCE, "<simdoc contract probe>", "exec"), namespace)
    return namespace["_simdoc_contract_probe"]


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def contract_checks(index, corpus, needs_corpus: bool = True) -> list[tuple[str, str, str]]:
    """(what, absolute path, test) for each path every worker must see as the client does.

    The index folder, and its manifest's bytes (the same index, not one of the
    same name); before the first run, the folder it will be made in. The
    corpus folder and a few of its entries (not an empty folder of the same
    name), or the first few files given. Without a corpus, the one the index
    was built from, when the documents are to be read again (``needs_corpus``).
    """
    from simdoc.store.directory import MANIFEST, IndexStore

    checks: list[tuple[str, str, str]] = []
    if index is not None:
        index = os.path.abspath(index)
        if os.path.isdir(index):
            checks.append(("the index", index, "dir"))
            digest = _digest(os.path.join(index, MANIFEST))
            if digest is not None:
                checks.append(("the index", os.path.join(index, MANIFEST), "sha256:" + digest))
        else:  # made by this run, in the nearest folder that is there
            folder = os.path.dirname(index)
            while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
                folder = os.path.dirname(folder)
            checks.append(("the folder of the index", folder, "dir"))
    if corpus is None and index is not None and needs_corpus:
        with contextlib.suppress(Exception):  # no index yet, or damaged: the stages say so later
            corpus = IndexStore(index).read_manifest()["stages"]["shingle"].get("corpus") or None
    if corpus is None:
        return checks
    items = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(itertools.islice(corpus, _SAMPLE))
    for item in items:
        path = os.path.abspath(os.fspath(item))
        if os.path.isdir(path):
            checks.append(("the corpus", path, "dir"))
            with contextlib.suppress(OSError), os.scandir(path) as entries:
                shown = (e for e in entries if not e.name.startswith("."))  # hidden ones are not read
                for entry in itertools.islice(shown, _SAMPLE):
                    checks.append(("the corpus", entry.path, "exists"))
        elif os.path.lexists(path):
            checks.append(("the corpus", path, "exists"))
    return checks


def _version() -> str:
    from simdoc.version import __version__

    return __version__


def check_contract(client, address: str, wait: float, index=None, corpus=None, needs_corpus: bool = True) -> None:
    """Wait up to ``wait`` seconds for a worker, then check every worker: simdoc, its version, the paths.

    Raises ClusterError naming the first worker at fault, and the path or
    the problem; the client has submitted no work yet. A worker that does not
    answer within max(``wait``, :data:`ANSWER_FLOOR`) seconds is at fault
    too. A worker that went away as it was asked, or paths that changed here
    meanwhile (a manifest another run published), are looked at again (until
    the wait is over, and at least twice).
    """
    probe = _probe_function()
    limit = max(wait, ANSWER_FLOOR)
    deadline = time.monotonic() + wait
    for attempt in itertools.count():
        checks = contract_checks(index, corpus, needs_corpus)
        answers = _ask(client, probe, checks, limit)
        faults = _faults(answers)
        gone = bool(faults) and all(transient for *_, transient in faults)
        # A manifest published by another run meanwhile, a corpus entry just deleted: look again.
        changed = bool(faults) and checks != contract_checks(index, corpus, needs_corpus)
        if answers and not gone and not changed:
            break
        if time.monotonic() >= deadline and (not answers or attempt >= 2):
            break
        time.sleep(0.2)
    if not answers:
        raise ClusterError(
            f"no Dask worker joined the scheduler at {address} within {wait:g} s",
            hint=f"start workers (`dask worker {address}`), or wait longer with --wait-workers SECONDS",
        )
    if not faults:
        return
    worker, problem, hint, _ = faults[0]
    more = f" (and {len(faults) - 1} more {'worker' if len(faults) == 2 else 'workers'})" if len(faults) > 1 else ""
    raise ClusterError(f"Dask worker {worker} {problem}{more}", hint=hint)


class _NoAnswer:
    """A worker that did not answer the check within ``limit`` seconds."""

    def __init__(self, limit: float) -> None:
        self.limit = limit


def _ask(client, probe: Callable, checks: list, limit: float) -> dict:
    """The probe's answer of each worker the scheduler knows (client.run), waiting ``limit`` seconds at most.

    Each worker is asked on its own, all at once: one that does not answer
    (stopped, its event loop stuck) is a :class:`_NoAnswer`, and the others'
    answers are kept. One the scheduler cannot reach is the exception that says so.
    """
    workers = sorted(client.scheduler_info()["workers"])

    async def one(worker: str) -> tuple[str, Any]:
        asked = client.run(probe, checks, workers=[worker], on_error="return", asynchronous=True)
        try:
            answer = await asyncio.wait_for(asked, limit)
        except asyncio.TimeoutError:
            return worker, _NoAnswer(limit)
        except Exception as exc:  # the scheduler could not reach it: gone, or going
            return worker, exc
        return worker, answer.get(worker, ConnectionError("the scheduler no longer knows it"))

    async def every() -> dict:
        return dict(await asyncio.gather(*map(one, workers)))

    return client.sync(every) if workers else {}


def _faults(answers: dict) -> list[tuple[str, str, str, bool]]:
    """(worker, what is wrong, hint, whether it may pass) for each worker that breaks the contract."""
    version = _version()
    return [fault for worker, out in sorted(answers.items()) if (fault := _fault(worker, out, version))]


def _fault(worker: str, out: Any, version: str) -> tuple[str, str, str, bool] | None:
    """(worker, what is wrong, hint, whether it may pass) if the probe's answer ``out`` breaks the contract."""
    if isinstance(out, _NoAnswer):
        return (worker, f"did not answer simdoc's check within {out.limit:g} s",
                "see the worker's log (is it stuck, or overloaded?); stop that worker, "
                "or give it longer with --wait-workers SECONDS", False)
    if isinstance(out, BaseException) or not isinstance(out, dict):
        first = (str(out).splitlines() or [""])[0]
        return (worker, f"could not run simdoc's check: {type(out).__name__}: {first}",
                "see the worker's log; its Python needs simdoc and the same Dask as this client",
                isinstance(out, OSError))  # gone: the scheduler will drop it
    where = f"{worker} (host {out['host']}, Python {out['python']})"
    if out.get("import_error"):
        return (where, f"cannot import simdoc: {out['import_error']}",
                f"install simdoc {version} in that worker's Python, or stop that worker", False)
    if out["version"] != version:
        return (where, f"runs simdoc {out['version']}, this client {version}",
                f"install simdoc {version} on every worker (the same as here), or stop that worker", False)
    if out["problems"]:
        what, path, problem = out["problems"][0]
        return (where, f"cannot see {what} at {path}: {problem}",
                "the corpus and the index must be at the same absolute paths on every worker "
                "(a shared file system); start workers that see them, or run without --scheduler", False)
    return None


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
    first = (str(exc).splitlines() or [""])[0] or type(exc).__name__
    if isinstance(exc, KilledWorker):
        return ClusterError(
            f"a task killed every Dask worker that ran it: {first}",
            hint="see the workers' logs (out of memory?); give workers more memory, or run without --scheduler",
        )
    cancelled = isinstance(exc, (concurrent.futures.CancelledError, asyncio.CancelledError))
    lost = client.status not in ("running", "newly-created") or isinstance(exc, CommClosedError)
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
    however many there are.
    """
    window = window or in_flight(client)
    tasks = iter(tasks)
    pending: collections.deque = collections.deque()
    try:
        for task in itertools.islice(tasks, window):
            pending.append(client.submit(func, task, pure=False))
        while pending:
            result = pending.popleft().result()  # the future is dropped here: Dask releases it
            for task in itertools.islice(tasks, 1):
                pending.append(client.submit(func, task, pure=False))
            yield result
    finally:
        if pending:
            client.cancel(list(pending))

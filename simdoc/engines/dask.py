"""Run simdoc's stages on a Dask cluster: the same functions, the same answers.

* The contract (:func:`connect`): before any work, the client waits for
  workers (``--wait-workers``), and checks that every worker imports the same
  simdoc version and sees the corpus and the index at the client's absolute
  paths (:func:`check_contract`; a worker that does not answer within
  max(--wait-workers, :data:`ANSWER_FLOOR`) seconds is named, never waited
  for). Then every task is checked where it runs: the client hands out a
  :class:`CheckedClient`, whose tasks run on a worker only once that worker
  process has met the same terms (:class:`Contract`), so a worker that joins
  later runs nothing unchecked. The wrapper each task travels in is sent by
  value and needs no simdoc to be unpickled: a worker without simdoc, or with
  another version, says so instead of dying on the task. For the index, the
  terms hold a token file the client writes into it (``dask-parts/``) for the
  run, which stays the same while the client publishes new manifests. Any
  breach, a scheduler lost later, or a task that kept killing its workers is
  a :class:`ClusterError`.
* Reading and signatures: the batches the local engine gives to its
  process pool are Dask tasks instead, submitted as a bounded stream
  (:func:`map_ordered`). Workers read the documents, leave the signature
  rows in part files of the index and send back the docs-table rows; then
  workers copy the rows into the new matrix (simdoc.stages.dask_signatures).
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

import asyncio
import collections
import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import logging
import os
import pickle
import re
import secrets
import socket
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from simdoc.corpus.objects import is_url
from simdoc.errors import ClusterError, SimdocError, UsageError

ENV = "SIMDOC_SCHEDULER"
DEFAULT_WAIT_WORKERS = 30.0  # seconds to wait for a first worker (--wait-workers)
ANSWER_FLOOR = 10.0  # seconds a worker has at least to answer the contract's check (else max(--wait-workers, this))
_LOCAL = re.compile(r"^local(?:\[(\d+)\])?$")
_SAMPLE = 8  # corpus entries each worker must see, besides the corpus folder itself


@contextlib.contextmanager
def connect(address: str, wait_workers: float | None = None, index=None, corpus=None, needs_corpus: bool = True):
    """A :class:`CheckedClient` of ``address`` (host:port), or of ``local[N]``: an in-process LocalCluster of N workers.

    The cluster's contract is checked here, before the client is handed out
    (:func:`check_contract`), and again by every task on its worker before
    it runs (:class:`CheckedClient`); errors of the cluster met while the
    client is in use become :class:`ClusterError`.
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
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR,
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
        client = Client(address, timeout="5s")
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the Dask scheduler at {address}: {exc}",
            hint="give host:port of a running `dask scheduler` (e.g. tcp://10.0.0.5:8786), or local[N]",
        ) from None
    with client, _checked(client, address, wait, index, corpus, needs_corpus) as checked:
        yield checked


@contextlib.contextmanager
def _checked(client, address: str, wait: float, index, corpus, needs_corpus: bool) -> Iterator[CheckedClient]:
    """The contract checked on the workers there are, then the client whose tasks check theirs."""
    with _cluster_errors(client, address):
        checks = check_contract(client, address, wait, index, corpus, needs_corpus)
        with Contract(index, checks) as contract:
            yield CheckedClient(client, contract)


# ---------------------------------------------------------------- the contract

# Run on the workers by source, not by reference (pickled by value, as functions of a
# script are): a worker that cannot import simdoc, or has another version of it, can
# still run these, and say so. _simdoc_contract_probe answers the check of
# check_contract (client.run); _simdoc_task is what every task of a CheckedClient runs.
_WORKER_SOURCE = '''
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


def _simdoc_task(terms, payload, spots, *values, **kwargs):
    try:
        from simdoc.version import __version__ as version
    except BaseException as exc:
        version, error = None, ((type(exc).__name__ + ": " + str(exc)).splitlines() or ["?"])[0]
    if version != terms[1]:  # no simdoc here, or another: nothing of it is unpickled, nor run
        import socket, sys

        out = {"host": socket.gethostname(), "python": sys.executable, "version": version, "problems": []}
        if version is None:
            out["import_error"] = error
        try:
            from distributed import get_worker

            worker = get_worker().address
        except BaseException:
            worker = "?"
        raise RuntimeError(_SIMDOC_BROKEN, worker, out)
    from simdoc.engines.dask import run_checked  # this simdoc is the client's

    return run_checked(terms, payload, spots, values, kwargs)
'''

# What a task raises (a RuntimeError, which a worker without simdoc can make too) on a
# worker that breaks the contract: (BROKEN, worker address, what the probe found there).
BROKEN = "simdoc: this Dask worker breaks the contract of the run"


@functools.lru_cache(maxsize=None)
def _worker_functions() -> dict:
    namespace: dict = {"__name__": "__main__", "_SIMDOC_BROKEN": BROKEN}  # pickled by value (cloudpickle)
    exec(compile(_WORKER_SOURCE, "<simdoc contract>", "exec"), namespace)
    return namespace


def _probe_function() -> Callable:
    return _worker_functions()["_simdoc_contract_probe"]


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
    if is_url(corpus):  # the workers would need the store's options and credentials: not yet
        raise UsageError(
            f"a corpus at a URL ({corpus}) is read on this machine only, not on a Dask cluster yet",
            hint="run without --scheduler (and without $SIMDOC_SCHEDULER), or copy the corpus to a shared file system",
        )
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


def check_contract(
    client, address: str, wait: float, index=None, corpus=None, needs_corpus: bool = True
) -> list[tuple[str, str, str]]:
    """Wait up to ``wait`` seconds for a worker, then check every worker: simdoc, its version, the paths.

    Raises ClusterError naming the first worker at fault, and the path or
    the problem; the client has submitted no work yet. A worker that does not
    answer within max(``wait``, :data:`ANSWER_FLOOR`) seconds is at fault
    too. A worker that went away as it was asked, or paths that changed here
    meanwhile (a manifest another run published), are looked at again (until
    the wait is over, and at least twice). Returns the checks the workers met.
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
        return checks
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


# ---------------------------------------------------------------- every task checks its worker

TOKEN = re.compile(r"^contract\.[0-9a-f]{32}$")  # the client's token in the index's PARTS folder


def _terms(checks: Iterable[tuple[str, str, str]]) -> tuple[str, str, tuple]:
    """(key, simdoc version, checks): what a worker must meet, in plain tuples (a worker without
    simdoc unpickles them). The key names them in the workers' memory of what they passed."""
    checks = tuple(tuple(c) for c in checks)
    version = _version()
    return hashlib.sha256(json.dumps([version, checks]).encode()).hexdigest()[:32], version, checks


class Contract:
    """The terms every task's worker must meet, for one run of the client: those of the start
    (:func:`check_contract`), with a token file for the index.

    The index's manifest changes as the client publishes stages, so a worker
    that joins later cannot be asked for the manifest the others saw. It is
    asked for a file the client writes into the index's PARTS folder instead,
    ``contract.<32 hex>``, random, the same for the whole run, and removed at
    the end. It is written as soon as the index folder is there (at once, or
    when the first build has made it), locked (``flock``) while the client
    runs, so that the next client removes those of clients killed before
    their end. Without one (an index folder the client cannot write, which
    the run does not change either) the manifest's bytes stay in the terms.
    The corpus is never written to.
    """

    def __init__(self, index, checks: list[tuple[str, str, str]]) -> None:
        self.index = None if index is None else os.path.abspath(index)
        self.checks = [tuple(c) for c in checks]
        self.token: str | None = None
        self._fd: int | None = None
        self._pending = self.index is not None  # the token is still to be written, once the folder is there
        self._terms = _terms(self.checks)

    def __enter__(self) -> Contract:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def terms(self) -> tuple[str, str, tuple]:
        """The terms for the next task: (key, version, checks)."""
        if self._pending and os.path.isdir(self.index):
            self._pending = False
            digest = self._write_token()
            if digest is not None:
                rest = [c for c in self.checks if c[0] not in ("the index", "the folder of the index")]
                self._terms = _terms([("the index", self.index, "dir"), ("the index", self.token, "sha256:" + digest), *rest])
        return self._terms

    def _write_token(self) -> str | None:
        """Write the token (removing those of dead clients first); its sha256, or None if it cannot be."""
        from simdoc.store.directory import MANIFEST
        from simdoc.store.names import PARTS, own_entry

        index = Path(self.index)
        folder = index / PARTS
        try:
            if not (index / MANIFEST).exists() and not all(own_entry(p) for p in index.iterdir()):
                return None  # not simdoc's folder (the stages say so): nothing is written there
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return None  # a link: never written through
            _remove_dead_tokens(folder)
        except OSError:
            return None
        for _ in range(3):  # another client may take a new token for a dead one's before it is locked: another
            digest = self._new_token(folder)
            if digest is not None:
                return digest
        with contextlib.suppress(OSError):
            folder.rmdir()  # if this made it, and nothing else is there
        return None

    def _new_token(self, folder: Path) -> str | None:
        path = folder / f"contract.{secrets.token_hex(16)}"
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError:
            return None
        data = (
            f"simdoc {_version()}: the token of a Dask run of this index (client pid {os.getpid()} on "
            f"{socket.gethostname()}); its workers compare it with the client's.\n{secrets.token_hex(16)}\n"
        ).encode()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with open(fd, "wb", closefd=False) as f:
                f.write(data)
            os.fsync(fd)  # on a network file system, the workers' hosts read it from the server
            if os.lstat(path).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError(path)  # taken for a dead client's before it was locked
        except OSError:
            with contextlib.suppress(OSError):
                if os.lstat(path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(path)
            os.close(fd)
            return None
        self.token, self._fd = str(path), fd
        return hashlib.sha256(data).hexdigest()

    def close(self) -> None:
        """Remove the token (and the PARTS folder, if that leaves it empty)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if os.lstat(self.token).st_ino == os.fstat(self._fd).st_ino:
                os.unlink(self.token)
        os.close(self._fd)
        self._fd = None
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.token))  # unless parts are left in it


def _remove_dead_tokens(folder: Path) -> None:
    """Remove the tokens of clients that are gone: no process holds their lock (the kernel, or the
    file server, releases it when the holder dies)."""
    flags = os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if not TOKEN.match(entry.name):
                continue
            try:
                fd = os.open(entry.path, flags)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its client runs
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and os.lstat(entry.path).st_ino == st.st_ino:
                    os.unlink(entry.path)
            except OSError:
                pass
            finally:
                os.close(fd)


class CheckedClient:
    """A Dask client whose tasks run on a worker only once that worker has met the run's contract.

    :meth:`submit` sends the task in a wrapper sent by value
    (``_simdoc_task``): on the worker, it checks that simdoc imports there at
    the client's version, then (:func:`run_checked`) the paths of the
    :class:`Contract`, once per worker process and terms; only then is the
    task itself (the function and its arguments, pickled by the client)
    unpickled and run. A worker that breaks the contract makes the task raise
    (:data:`BROKEN`), which ends the run as a ClusterError naming it
    (:func:`_cluster_errors`): no result of an unchecked worker is ever used,
    whenever the worker joined. Futures given as arguments stay arguments
    (Dask passes their values); everything else of the Dask client is its own.
    """

    def __init__(self, client, contract: Contract) -> None:
        self.client = client
        self.contract = contract

    def __repr__(self) -> str:
        return f"CheckedClient({self.client!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def submit(self, func: Callable, *args: Any, key: str | None = None, pure: bool = True):
        """``client.submit(func, *args)`` under ``key`` (else one made from the task, or a random one
        unless ``pure``), run once the worker has met the contract.

        No keyword arguments for ``func`` and none of Dask's other options (workers, resources,
        retries, ...): simdoc's tasks take their inputs as one task object, and the stages use
        none of those options."""
        import cloudpickle
        from dask.base import tokenize
        from dask.utils import funcname
        from distributed import Future

        spots = tuple(i for i, a in enumerate(args) if isinstance(a, Future))
        payload = cloudpickle.dumps((func, [None if i in spots else a for i, a in enumerate(args)]), protocol=5)
        futures = [args[i] for i in spots]
        if key is None:  # named after the task's function, as Dask names its tasks
            key = f"{funcname(func)}-{tokenize(payload, [f.key for f in futures]) if pure else uuid.uuid4().hex}"
        wrapper = _worker_functions()["_simdoc_task"]
        return self.client.submit(wrapper, self.contract.terms(), payload, spots, *futures, key=key)

    def _unchecked(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("simdoc's tasks go through CheckedClient.submit, which checks the worker that runs them")

    map = compute = persist = get = _unchecked


_PASSED: dict[str, tuple] = {}  # key -> checks of the terms this worker process has met


def run_checked(terms: tuple, payload: bytes, spots: tuple, values: tuple, kwargs: dict) -> Any:
    """On a worker (simdoc there at the client's version, see ``_simdoc_task``): check the paths
    of ``terms`` once per process, then unpickle the task and run it."""
    key, _, checks = terms
    if key not in _PASSED:
        out = _probe_function()(checks)
        out["problems"] = _late_problems(checks, out["problems"])
        if out["problems"]:
            from distributed import get_worker

            raise RuntimeError(BROKEN, get_worker().address, out)
        _PASSED[key] = checks
    func, args = pickle.loads(payload)
    for i, value in zip(spots, values):
        args[i] = value
    return func(*args, **kwargs)


def _late_problems(checks: tuple, problems: list) -> list:
    """The problems that break the terms. The corpus may change during the run: of the entries
    sampled in one folder, a worker must see one at least (not an empty folder of the same name)."""
    wants = {path: want for _, path, want in checks}
    failing = {path for _, path, _ in problems}
    seen = {(what, os.path.dirname(path)) for what, path, want in checks if want == "exists" and path not in failing}
    return [p for p in problems if not (wants.get(p[1]) == "exists" and (p[0], os.path.dirname(p[1])) in seen)]


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

"""The contract of a Dask run, checked once before any work: every worker runs this simdoc and sees the paths.

Before the client is handed out (:func:`simdoc.engines.dask.connect`), it
waits for workers (``--wait-workers``) and asks each one, on its own and all
at once, to run a probe (:func:`check_contract`): does simdoc import there,
at the client's version, and does it see the index and the corpus at the
client's absolute paths, or read a corpus at a URL with the run's storage options
(:func:`contract_checks`)? A worker that does not
answer within max(--wait-workers, :data:`ANSWER_FLOOR`) seconds is named,
never waited for. The probe, and the wrapper every task travels in
(``_simdoc_task``, see :mod:`simdoc.engines.dask_checked`), are sent by
value from source: they need no simdoc to be unpickled, so a worker without
simdoc, or with another version, says so instead of dying on the task.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable
from typing import Any

from simdoc.corpus import objects
from simdoc.corpus.filelists import ListedURL
from simdoc.corpus.object_lists import common_base
from simdoc.corpus.objects import is_url
from simdoc.errors import ClusterError, CorpusError

ANSWER_FLOOR = 10.0  # seconds a worker has at least to answer the contract's check (else max(--wait-workers, this))
_SAMPLE = 8  # corpus entries each worker must see, besides the corpus folder itself

# Run on the workers by source, not by reference (pickled by value, as functions of a
# script are): a worker that cannot import simdoc, or has another version of it, can
# still run these, and say so. _simdoc_contract_probe answers the check of
# check_contract (client.run); _simdoc_task is what every task of a CheckedClient runs.
_WORKER_SOURCE = '''
def _simdoc_contract_probe(checks):
    import hashlib, json, os, socket, stat, sys

    out = {"host": socket.gethostname(), "python": sys.executable, "version": None, "problems": []}
    try:
        import simdoc

        out["version"] = simdoc.__version__
    except BaseException as exc:
        out["import_error"] = ((type(exc).__name__ + ": " + str(exc)).splitlines() or ["?"])[0]
    for what, path, want in checks:
        try:
            if want.startswith("url:"):  # read by the worker itself: with the client's storage options
                from simdoc.corpus.objects import reach

                problem = reach(path, json.loads(want[4:]))
                if problem:
                    out["problems"].append((what, path, problem))
                continue
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
    from simdoc.engines.dask_checked import run_checked  # this simdoc is the client's

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
    if not isinstance(corpus, (str, os.PathLike)) and any(isinstance(c, ListedURL) for c in corpus):
        with contextlib.suppress(CorpusError):  # URLs of several buckets: the corpus stage says so
            corpus = common_base(list(corpus))  # objects from a list: the store is reached where they are
    if is_url(corpus):  # each worker reads the objects itself, with the run's storage options
        checks.append(("the corpus", str(corpus), "url:" + json.dumps(objects.current(), sort_keys=True)))
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
    import asyncio  # here: a run without a cluster does without it

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
        if is_url(path):
            return (where, f"cannot read {what} at {path}: {problem}",
                    "every worker reads the objects itself, with the storage options given here "
                    "(--storage-option): give its host access to the endpoint, or run without --scheduler", False)
        return (where, f"cannot see {what} at {path}: {problem}",
                "the corpus and the index must be at the same absolute paths on every worker "
                "(a shared file system); start workers that see them, or run without --scheduler", False)
    return None

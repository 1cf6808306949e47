"""Every task of a Dask run checks its worker first: a worker that joins late runs nothing unchecked.

The client hands out a :class:`CheckedClient`: each task is sent in a
wrapper (``_simdoc_task``, :mod:`simdoc.engines.dask_contract`) that runs it
on a worker only once that worker process has met the run's terms
(:class:`Contract`, checked once per process by :func:`run_checked`). For
the index, the terms hold a token file the client writes into it
(``dask-parts/contract.<32 hex>``) for the run, which stays the same while
the client publishes new manifests.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import re
import secrets
import socket
import stat
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simdoc.corpus import objects
from simdoc.engines.dask_contract import BROKEN, _probe_function, _version, _worker_functions

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
    ``address`` (the scheduler as the user named it) and ``wait_workers`` are
    the run's, for :mod:`simdoc.engines.dask_waiting`.
    """

    def __init__(self, client, contract: Contract, address: str | None = None, wait_workers: float | None = None) -> None:
        self.client = client
        self.contract = contract
        self.address = address
        self.wait_workers = wait_workers

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
    for _, path, want in checks:  # a corpus at a URL: the client's storage options, for this task
        if want.startswith("url:"):
            objects.configure(json.loads(want[4:]))
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

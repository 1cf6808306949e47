"""The signature stage: the MinHash matrix of the stored shingle sets (`simdoc signature`).

`simdoc pairs` signs documents as it reads them (the fused shingle stage,
:mod:`simdoc.stages.shingle`); this stage is for an index built stage by
stage, whose shingle stage kept the sorted shingle sets. Rows are signed in
tasks of SIGNATURE_TASK_DOCS on the engine, each task reading its rows of
the stored sets itself (workers run in folders of their own: the index path
is absolute) and writing its signatures into the new matrix in place
(:class:`simdoc.store.npyfiles.PieceWriter`): only each piece's place and
CRC-32 come back.

:func:`signature_params` settles the parameters of a run (asked, else the
index's, else the defaults) for this stage and for the fused one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simdoc import kernel_choice
from simdoc.engines import Engine
from simdoc.engines.local import LocalEngine
from simdoc.errors import IndexError_
from simdoc.minhash import MinHasher
from simdoc.params import SignatureParams
from simdoc.stages.common import build_id, mismatch, progress_bar
from simdoc.stages.results import StageResult
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import LoadedIndex, open_index
from simdoc.store.npyfiles import NpyWriter, PieceWriter, write_piece
from simdoc.version import __version__

if TYPE_CHECKING:
    from simdoc.stages.dask_signatures import PlacedRows

SIGNATURE_TASK_DOCS = 4096  # rows of stored shingle sets signed per task
_WRITE_ROWS = 1 << 16  # signature rows of the fused stage written at once (32 MB at 128 permutations)


@dataclass(frozen=True)
class SignatureTask:
    """Rows [start, stop) of the stored shingle sets of the index at ``index`` (an absolute path), to sign
    and write into the matrix at ``target`` (the new file, made by the stage)."""

    index: str
    start: int
    stop: int
    signature: SignatureParams
    target: str


def sign_rows(task: SignatureTask) -> tuple[int, int, int]:
    """Sign one task's rows and write them in place (worker process); (first element, elements, CRC-32)."""
    sets = open_index(task.index).shingle_sets().slice(task.start, task.stop)
    p = task.signature
    rows = MinHasher(p.num_perm, p.seed, scheme=p.scheme).signatures(sets)
    start = task.start * p.num_perm
    return start, rows.size, write_piece(task.target, start, rows, np.uint32)


def build_signatures(
    index: str | os.PathLike,
    params: SignatureParams = SignatureParams(),
    *,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
) -> StageResult:
    """Bring the signature stage up to date with the shingle stage (holding the writer lock).

    The stored shingle sets are signed by the tasks of ``engine`` (default: a
    LocalEngine on all cores). A stage the last published manifest shows up
    to date is left alone without taking the lock, so that a reader never
    waits for a writer (see :func:`signatures_up_to_date`).
    """
    loaded = open_index(index)
    if not rebuild:
        done = _nothing_to_sign(loaded, params)
        if done is not None:
            return done
    with loaded.store.writing(wait):
        return _build_signatures(index, params, engine=engine or LocalEngine(), rebuild=rebuild, progress=progress)


def signatures_up_to_date(index: str | os.PathLike, params: SignatureParams) -> StageResult | None:
    """The result of a signature stage with nothing to do, if the published manifest shows one; else None.

    Neither the lock nor an engine is needed to know it: a command can ask
    first, and connect to a cluster only when there is work for it.
    """
    return _nothing_to_sign(open_index(index), params)


def _nothing_to_sign(loaded: LoadedIndex, params: SignatureParams) -> StageResult | None:
    stored = loaded.manifest["stages"].get("signature")
    if _signatures_current(loaded, signature_params(stored, params, loaded.store.path, False)):
        return StageResult("signature", False, 0.0, "up to date")
    return None


def signature_params(stored: dict | None, asked: SignatureParams, index: str | os.PathLike, rebuild: bool) -> SignatureParams:
    """The signature parameters a run will use: those asked, else the index's (``stored``
    stage), else the defaults. One asked that differs from the index's is a
    ParameterMismatch, unless ``rebuild``."""
    if stored is not None:
        mismatch("signature", stored["params"], asked.asked(), index, rebuild)
    return asked.resolved(stored["params"] if stored else None)  # not given: the index's, --rebuild or not


def _signatures_current(loaded: LoadedIndex, params: SignatureParams) -> bool:
    stored = loaded.manifest["stages"].get("signature")
    return bool(stored) and stored["params"] == params.manifest() and stored.get("built_from") == loaded.stage("shingle")["build_id"]


def _build_signatures(index: str | os.PathLike, asked: SignatureParams, *, engine: Engine, rebuild: bool, progress: bool) -> StageResult:
    t0 = time.perf_counter()
    loaded = open_index(index)
    shingle = loaded.stage("shingle")
    params = signature_params(loaded.manifest["stages"].get("signature"), asked, index, rebuild)
    if _signatures_current(loaded, params):
        return StageResult("signature", False, time.perf_counter() - t0, "up to date")
    if not loaded.has_shingle_sets():
        raise IndexError_(
            f"the signatures of the index at {loaded.store.path} need computing again, and it keeps no shingle sets",
            hint="run `simdoc pairs CORPUS` with these options (it reads the documents), "
            "or `simdoc shingle CORPUS --index ...` first",
        )
    store = loaded.store
    n = shingle["n_docs"]
    _, names = _names(shingle["build_id"], params)
    step = SIGNATURE_TASK_DOCS
    where = os.path.abspath(store.path)  # workers run in folders of their own
    store.ensure_dir()
    writer = PieceWriter(store.path, names["signatures"], np.uint32, (n, params.num_perm))
    target = os.path.abspath(writer.tmp)
    tasks = [SignatureTask(where, a, min(a + step, n), params, target) for a in range(0, n, step)]
    try:
        bar = progress_bar(n, "signature", progress)
        # A few MB of shingles are signed by the numpy reference, numba never loaded (as a scan of
        # a few MB of documents): 2 documents signed again took 4 s, a fresh machine's compile 60 s.
        with kernel_choice.reads(int(loaded.shingle_sets().indptr[-1])):
            for piece in engine.map(sign_rows, tasks):
                writer.written(*piece)
                bar.update(piece[1] // params.num_perm)
        bar.close()
        loaded.manifest["stages"]["signature"] = finish_signatures(store, writer, params, shingle["build_id"])
    except BaseException:
        writer.abort()
        raise
    store.write_manifest(loaded.manifest)
    return StageResult("signature", True, time.perf_counter() - t0, f"{n} x {params.num_perm} signature matrix")



def _names(built_from: str, params: SignatureParams) -> tuple[str, dict[str, str]]:
    build = build_id(built_from, params.manifest(), __version__)
    return build, {"signatures": f"signatures.{build}.npy", "family": f"minhash.family.{build}.npy"}


def finish_signatures(store: IndexStore, writer: NpyWriter | PieceWriter, params: SignatureParams, built_from: str) -> dict:
    """Publish the matrix ``writer`` wrote under its build's name, with its hash family; the stage's manifest entry.

    ``built_from``: the shingle build signed. The entry goes into a manifest
    the caller writes (here, or with the fused stage's docs table).
    """
    build, names = _names(built_from, params)
    writer.name = names["signatures"]
    files = {names["signatures"]: writer.finish()}
    hasher = MinHasher(params.num_perm, params.seed, scheme=params.scheme)
    files[names["family"]] = store.save_array(names["family"], hasher.family())
    return {"params": params.manifest(), "built_from": built_from, "build_id": build, "roles": names, "files": files}


def next_signature_rows(
    store: IndexStore, manifest: dict, signer: SignatureParams | None, reuse: bool, placed: bool
) -> SignatureRows | PlacedRows | None:
    """Where the fused stage makes the next signature matrix: here (the local engine), or by the
    workers from the reading tasks' parts (``placed``: a cluster); None when shingle sets are kept
    (no ``signer``). With ``reuse``, rows are kept from the current matrix."""
    if signer is None:
        return None
    # The current matrix is checked here either way (size, dtype, shape; its CRC up to 1 GiB).
    old_sigs = LoadedIndex(store, manifest).signatures() if reuse else None
    if placed:
        from simdoc.stages.dask_signatures import PlacedRows  # (a cluster's alone)

        old = manifest["stages"]["signature"]["roles"]["signatures"] if reuse else None
        return PlacedRows(store, signer.num_perm, str(store.path.absolute() / old) if old else None)
    return SignatureRows(store, signer.num_perm, old_sigs)


class SignatureRows:
    """The next signature matrix of the fused stage, in document order: rows kept from the current one, and new rows.

    New rows given as slices (:meth:`add_slices`: a file's rows gathered from its ranges'
    mappings, 512 MB at 10^6 records) are gathered and written by a thread of their own while the
    main thread goes on with the documents' columns; every other call waits for them first, so
    that the rows stay in document order. Both cores work when the workers are done.
    """

    def __init__(self, store: IndexStore, num_perm: int, old: np.ndarray | None) -> None:
        self.writer = store.array_writer("signatures.tmp.npy", np.uint32, (num_perm,))
        self.old = old
        self.num_perm = num_perm
        # What to write next, in order: rows of the current matrix to copy (their positions, int64)
        # and new rows (uint32, num_perm wide), written together by flush (a nightly update keeps
        # and reads files in hundreds of short runs: one write each cost more than the rows).
        self.pending: list[np.ndarray] = []
        self.pending_new = 0  # new rows held in pending
        self.writing: Future | None = None  # the slices being written by the thread
        self.thread: ThreadPoolExecutor | None = None
        self.stopping = False  # the run is ending: the thread stops at its next slice

    def keep_rows(self, rows: np.ndarray) -> None:
        """These rows of the current matrix, in order."""
        self.pending.append(np.asarray(rows, dtype=np.int64).reshape(-1))

    def add(self, rows: np.ndarray) -> None:
        self.flush()
        self.writer.append(rows)

    def add_rows(self, rows: np.ndarray) -> None:
        """New rows (a few: they are copied and held until the next :meth:`flush`), in order."""
        self._wait()
        self.pending.append(np.array(rows, dtype=np.uint32, ndmin=2))
        self.pending_new += len(rows)
        if self.pending_new >= _WRITE_ROWS:
            self.flush()

    def add_slices(self, slices: Iterator[np.ndarray]) -> None:
        """The rows of ``slices``, in order, written by the thread (each slice before the next is made)."""
        self.flush()
        if self.thread is None:
            self.thread = ThreadPoolExecutor(1, thread_name_prefix="simdoc-signatures")
        self.writing = self.thread.submit(self._append_all, slices)

    def _append_all(self, slices: Iterator[np.ndarray]) -> None:
        for rows in slices:
            if self.stopping:
                return
            self.writer.append(rows)

    def _wait(self) -> None:
        """Until the thread has written what it was given (its error raised here)."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def flush(self) -> None:
        """Write what is pending: up to _WRITE_ROWS rows at a time, each block gathered in one buffer."""
        self._wait()
        pending, self.pending, self.pending_new = self.pending, [], 0
        block: list[np.ndarray] = []
        held = 0
        for part in pending:
            for a in range(0, max(len(part), 1), _WRITE_ROWS):
                piece = part[a : a + _WRITE_ROWS]
                if held + len(piece) > _WRITE_ROWS:
                    self._write_block(block, held)
                    block, held = [], 0
                block.append(piece)
                held += len(piece)
        self._write_block(block, held)

    def _write_block(self, block: list[np.ndarray], n: int) -> None:
        """Pieces of ``pending`` (``n`` rows in all) as one array: kept rows gathered, new ones copied."""
        if not n:
            return
        out = np.empty((n, self.num_perm), dtype=np.uint32)
        at = 0
        for piece in block:
            if piece.ndim == 1 and len(piece) > 1 and bool((np.diff(piece) == 1).all()):  # a run of the current matrix
                out[at : at + len(piece)] = self.old[int(piece[0]) : int(piece[-1]) + 1]
            elif piece.ndim == 1:  # positions in the current matrix
                out[at : at + len(piece)] = self.old[piece]
            else:
                out[at : at + len(piece)] = piece
            at += len(piece)
        self.writer.append(out)

    def written(self, engine: Engine | None = None) -> NpyWriter:
        """The matrix, every row written (by this process: ``engine`` is not needed)."""
        self.flush()
        self._stop()
        return self.writer

    def abort(self) -> None:
        self.stopping = True
        with contextlib.suppress(BaseException):  # the error that ended the run is the one to report
            self._wait()
        self._stop()
        self.writer.abort()

    def _stop(self) -> None:
        if self.thread is not None:
            self.thread.shutdown()
            self.thread = None

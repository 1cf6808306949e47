"""What a reading task of the shingle stage gives back, and the part file it leaves on a cluster.

:class:`BatchResult` holds one task's outcome per file (:class:`FileOutcome`),
its documents and their signature rows. The worker notes each document as a
:class:`DocOut` and sends them back as columns (:func:`doc_columns`, a
:class:`simdoc.store.doccolumns.DocColumns`): the main process never holds
one Python object per document of a task. On a Dask cluster the
task also writes it to a part file of the index (:func:`write_part`,
``dask-parts/scan/<key>.npz``, named by :func:`simdoc.stages.scan.part_key`),
atomically: a part that exists is that task's completion record, which
:func:`read_part` gives back to a later run (see :mod:`simdoc.stages.resume`).
Such a task sends back only a :class:`PartWritten` (where, which writing, how
many files and documents: a few hundred bytes, however many documents), and
the client reads the task's outcomes and docs-table columns from the part
when their turn comes (issue 29: no docs-table row crosses the wire).
Parts hold the documents' columns as arrays, the files' outcomes (and a
range's piece, :mod:`simdoc.corpus.pieces`) as JSON, and nothing else, read with ``allow_pickle=False``: an index
directory is not trusted to hold code, and a part that cannot be read, for
whatever reason, only makes its task run again.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np

from simdoc.corpus.jsonl_ranges import Piece
from simdoc.corpus.pieces import piece_json, piece_of
from simdoc.corpus.read import MEMBER_WAYS as _MEMBER_WAYS
from simdoc.corpus.read import identity, member_identities
from simdoc.shinglesets import ShingleSets
from simdoc.store.doccolumns import DocColumns
from simdoc.store.doctable import STAT_COLUMNS


@dataclass
class FileOutcome:
    """What reading one file gave."""

    file_digest: bytes  # BLAKE2b-128 of its bytes (b"" if it could not be read)
    status: str  # ok | replaced | partial | binary | unreadable
    warning: str | None
    unchanged: bool  # its bytes are the ones indexed before: nothing else was computed
    how: str
    n_docs: int = 0  # documents it gave; they follow the previous file's in BatchResult.docs
    left_out: list[tuple[str, str]] = field(default_factory=list)  # members left out or skipped: (id, why)

    def __reduce__(self):
        # Sent back by the thousand a task: as the arguments of one call each, which the main
        # process unpickles several times faster than an object's dict (10^5 files, one by one).
        return (FileOutcome, (self.file_digest, self.status, self.warning, self.unchanged, self.how, self.n_docs, self.left_out))


@dataclass(slots=True)
class DocOut:
    """One document a worker read (see :class:`simdoc.store.doctable.DocRow` for the meanings); it
    goes back to the main process as columns (:func:`doc_columns`)."""

    id: str
    source: str
    offset: int
    length: int
    size: int
    digest: bytes
    how: str
    status: str
    n_shingles: int


def plain_files(files: list[FileOutcome], start: int, stop: int) -> int:
    """How many of ``files[start:stop]``, from the first, were read as one document each with nothing
    to say: not unchanged, no warning, no member left out, not a file of members (most files; the
    shingle stage's collector takes them a block at a time)."""
    j = start
    while j < stop:
        f = files[j]
        if f.n_docs != 1 or f.unchanged or f.warning is not None or f.left_out or f.how in _MEMBER_WAYS:
            break
        j += 1
    return j - start


class FileRun:
    """The files of a run of new documents (the shingle stage's collector), in order: the docs-table
    columns each of its documents takes from its file (:data:`simdoc.store.doctable.STAT_COLUMNS`,
    ``file_digest``), gathered a file, or a block of one-document files, at a time.

    ``stat``: the (n, 5) stat of every file listed (:class:`simdoc.stages.plan.Listing`).
    """

    def __init__(self, stat: np.ndarray) -> None:
        self.stat = stat
        self.counts: list[int] = []  # documents of each file
        self.stats: list[np.ndarray] = []  # (k, 5) blocks
        self.digests: list[bytes] = []

    def add(self, i: int, n_docs: int, digest: bytes) -> None:
        """File ``i`` of the listing, with ``n_docs`` documents."""
        self.counts.append(n_docs)
        self.stats.append(self.stat[i : i + 1])
        self.digests.append(digest)

    def add_plain(self, i: int, files: list[FileOutcome]) -> None:
        """Files ``i`` to ``i + len(files)`` of the listing, one document each."""
        self.counts.extend([1] * len(files))
        self.stats.append(self.stat[i : i + len(files)])
        self.digests.extend(f.file_digest for f in files)

    def columns(self) -> dict[str, np.ndarray]:
        """Each document's stat columns and file digest."""
        counts = np.array(self.counts, dtype=np.int64)
        stats = np.concatenate(self.stats).astype(np.int64, copy=False).reshape(len(counts), len(STAT_COLUMNS))
        digests = np.frombuffer(b"".join(self.digests), dtype=np.uint8).reshape(len(counts), -1)
        columns = {c: np.repeat(stats[:, j], counts) for j, c in enumerate(STAT_COLUMNS)}
        return {**columns, "file_digest": np.repeat(digests, counts, axis=0)}


_DOC_FIELDS = attrgetter("id", "source", "offset", "length", "size", "n_shingles", "how", "status", "digest")


def doc_columns(docs: list[DocOut]) -> DocColumns:
    """A worker's documents as the columns it sends back, each with the identity of its text."""
    if not docs:
        return DocColumns.empty()
    # One pass over the documents, turned into columns by zip (in C): 10^5 documents, not 10^6 steps.
    ids, sources, offset, length, size, n_shingles, how, status, digest = zip(*map(_DOC_FIELDS, docs))
    identities = np.empty((len(docs), 16), dtype=np.uint8)
    whole = [i for i, h in enumerate(how) if h == "whole"]  # most files: their identities made at once
    if len(whole) > 1:
        identities[whole] = member_identities(np.frombuffer(b"".join([digest[i] for i in whole]), dtype=np.uint8), "whole")
    rest = range(len(docs)) if len(whole) <= 1 else [i for i, h in enumerate(how) if h != "whole"]
    for i in rest:
        identities[i] = np.frombuffer(identity(digest[i], how[i], ids[i]), dtype=np.uint8)
    return DocColumns.build(ids, sources, offset, length, size, n_shingles, how, status, digest, identities)


@dataclass
class BatchResult:
    files: list[FileOutcome]
    docs: DocColumns
    # (len(docs), num_perm) uint32 (see sig_order), or joined ranges' StackedRows (simdoc.stages.staged_rows);
    # None: they are in ``part`` or ``rows_file``
    signatures: np.ndarray | None
    sets: ShingleSets | None = None  # with keep_sets: the sorted shingle sets of docs
    warnings: list[str] = field(default_factory=list)
    part: str | None = None  # the part file the task wrote, which holds its signature rows
    piece: Piece | None = None  # a range's task: what the join needs (texts dropped), ids counted from the range
    sig_order: np.ndarray | None = None  # joined ranges: document i's row is signatures[sig_order[i]]
    # Joined ranges on a cluster (``signatures`` None): each range's part and its rows, in line
    # order; document i's row is row sig_order[i] of them all (simdoc.stages.dask_signatures).
    parts: list[tuple[str, int]] | None = None
    # A range's task of the local engine: the staging file where its worker left its signature rows
    # (``signatures`` None), for the join to map (simdoc.stages.staged_rows).
    rows_file: str | None = None


@dataclass(frozen=True)
class PartWritten:
    """What a reading task on a cluster sends back once its part is written (:func:`write_part`):
    the part, the writing's ``token`` (random, also in the part: the client reads back this
    writing, not another attempt's of the same task), and its numbers of files and documents.
    Its size does not grow with the task's documents."""

    part: str
    token: str
    n_files: int
    n_docs: int


def write_part(path: str, r: BatchResult, reusable: bool = True, token: str = "") -> None:
    """Write one task's result to its part, atomically (temporary file, fsync, rename): a part that exists is complete.

    The outcomes go as JSON (``ensure_ascii``: ids that are not valid UTF-8
    come back as they were), the documents' columns and the rows as arrays. A part that is
    not ``reusable`` serves this run only (its signature rows), never a later one.
    ``token``: this writing's (see :class:`PartWritten`).
    """
    meta = {
        "key": Path(path).stem,
        "reusable": reusable,
        "token": token,
        "files": [[f.file_digest.hex(), f.status, f.warning, f.unchanged, f.how, f.n_docs, f.left_out] for f in r.files],
        "warnings": r.warnings,
        "piece": None if r.piece is None else piece_json(r.piece),  # a range's task: what the join needs
    }
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode("ascii"), np.uint8), "signatures": r.signatures}
    arrays.update(r.docs.arrays(_DOCS))
    if r.sets is not None:
        arrays.update(indptr=r.sets.indptr, data=r.sets.data, counts=r.sets.counts)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, on disk
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_part(path: str, rows: bool = True, token: str | None = None) -> BatchResult | None:
    """A task's result from a part a run left, or None if there is none, or it cannot be read, is
    not the part its name says or not reusable (then the task runs again).

    Without ``rows`` the signature rows stay in the part (the result names it).
    With ``token`` (this run's task said it wrote the part: :class:`PartWritten`),
    the part must be that writing, reusable or not.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode("ascii"))
            if meta["key"] != Path(path).stem:
                return None
            if (meta.get("token") != token) if token is not None else not meta.get("reusable", True):
                return None
            files = [
                FileOutcome(bytes.fromhex(d), s, w, bool(u), h, int(n), [(str(i), str(y)) for i, y in left])
                for d, s, w, u, h, n, left in meta["files"]
            ]
            docs = DocColumns.from_arrays(z, _DOCS)
            sigs = np.asarray(z["signatures"], dtype=np.uint32) if rows else None
            shape, dtype = _member_shape(z, "signatures")
            sets = ShingleSets(z["indptr"], z["data"], z["counts"]) if "indptr" in z.files else None
            piece = None if meta.get("piece") is None else piece_of(meta["piece"])
    except Exception:  # whatever a damaged part makes numpy, zipfile or json raise: run the task again
        return None
    if len(shape) != 2 or shape[0] != len(docs) or dtype != np.uint32 or sum(f.n_docs for f in files) != len(docs):
        return None
    if sets is not None and len(sets.indptr) != len(docs) + 1:
        return None
    return BatchResult(files, docs, sigs, sets, list(meta["warnings"]), None if rows else path, piece)


_DOCS = "doc_"  # the documents' columns in a part: doc_id_blob, doc_offset, ...


def _member_shape(z, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of an array of an .npz file, from its header only."""
    with z.zip.open(f"{name}.npy") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
    return shape, dtype

"""The shingle stage's tasks: read a batch of files, shingle and sign every document.

A :class:`ScanTask` names some files. The worker reads each (a JSON Lines or
WARC file gives one document per member, see :mod:`simdoc.corpus.read`), and
computes every document's MinHash signature straight from the stream of its
window hashes: a minimum needs neither sorted nor unique shingles, so no
per-document sort is done on this path. Only when ``simdoc shingle`` runs as
a stage of its own (``keep_sets``) are the sorted shingle sets made and sent
back, to be stored.

A file whose bytes turn out to be the ones indexed before (``expected``
digest: its size or time changed, or it was racily clean) is not shingled
at all: the parent keeps its rows, as git keeps an index entry whose content
hash still matches.

Tasks are top-level, picklable dataclasses, made by :func:`scan_tasks` as the
engine draws them: consecutive files, cut at BATCH_BYTES or BATCH_DOCS files.
Results travel back to the parent (a few hundred bytes per document plus its
signature row).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from simdoc.corpus.read import how_read, read_file, text_digest, text_size
from simdoc.corpus.walk import FileEntry
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import shingle_texts

BATCH_BYTES = 4 << 20  # text per shingling task
BATCH_DOCS = 2000
_UNREAD = ("binary", "unreadable")  # statuses of files that give no document
# `simdoc shingle` on its own stores shingle sets; the tasks' signatures, of length 1, go unused.
_NO_SIGNATURES = SignatureParams(1).resolved()


@dataclass(frozen=True)
class ScanTask:
    """One batch of files for a worker: (id, path, size, digest indexed before or None) each,
    read and shingled as ``shingle`` says and signed as ``signature`` says (both resolved)."""

    files: list[tuple[str, str, int, bytes | None]]
    shingle: ShingleParams
    signature: SignatureParams
    keep_sets: bool = False


@dataclass
class FileOutcome:
    """What reading one file gave."""

    file_digest: bytes  # BLAKE2b-128 of its bytes (b"" if it could not be read)
    status: str  # ok | replaced | partial | binary | unreadable
    warning: str | None
    unchanged: bool  # its bytes are the ones indexed before: nothing else was computed
    how: str
    n_docs: int = 0  # documents it gave; they follow the previous file's in BatchResult.docs


@dataclass
class DocOut:
    """One document a batch produced (see :class:`simdoc.store.doctable.DocRow` for the meanings)."""

    id: str
    source: str
    offset: int
    length: int
    size: int
    digest: bytes
    how: str
    status: str
    n_shingles: int


@dataclass
class BatchResult:
    files: list[FileOutcome]
    docs: list[DocOut]
    signatures: np.ndarray  # (len(docs), num_perm) uint32
    sets: ShingleSets | None = None  # with keep_sets: the sorted shingle sets of docs
    warnings: list[str] = field(default_factory=list)


def batches(entries: Iterable[FileEntry]) -> Iterator[list[FileEntry]]:
    """Consecutive entries, cut where a batch reaches BATCH_BYTES of files or BATCH_DOCS files."""
    cur, size = [], 0
    for e in entries:
        cur.append(e)
        size += e.size
        if size >= BATCH_BYTES or len(cur) >= BATCH_DOCS:
            yield cur
            cur, size = [], 0
    if cur:
        yield cur


def scan_tasks(
    plan: Iterable[tuple[FileEntry, bytes | None, bool]], shingle: ShingleParams, signature: SignatureParams | None
) -> Iterator[ScanTask]:
    """The tasks for the files of ``plan`` (entry, digest indexed, keep without reading) not kept, in order.

    Without ``signature`` (a stage of its own) the tasks return the shingle sets.
    """
    plan = list(plan)
    digests = {e.id: d for e, d, keep in plan if not keep}
    for b in batches(e for e, _, keep in plan if not keep):
        files = [(e.id, e.path, e.size, digests[e.id]) for e in b]
        yield ScanTask(files, shingle, signature or _NO_SIGNATURES, signature is None)


_HASHERS: dict[SignatureParams, object] = {}  # a worker draws each hash family once


def _hasher(signature: SignatureParams):
    from simdoc.minhash import MinHasher

    hasher = _HASHERS.get(signature)
    if hasher is None:
        hasher = _HASHERS[signature] = MinHasher(signature.num_perm, signature.seed, scheme=signature.scheme)
    return hasher


def scan_batch(task: ScanTask) -> BatchResult:
    """Read, shingle and sign one batch of files (runs in a worker process)."""
    from simdoc.corpus import streaming

    spec, reading = task.shingle.spec, task.shingle
    fields = (reading.text_field, reading.id_field)
    files: list[FileOutcome] = []
    docs: list[DocOut] = []
    texts: list[str | bytes] = []  # documents shingled together, in document order
    streamed: dict[int, ShingleSets] = {}  # document number -> its one-row sets (read in chunks)
    for doc_id, path, size, expected in task.files:
        how = how_read(path, size)
        if how == "streamed":
            # A huge file is shingled in chunks, in bounded memory; so is every compressed
            # file, whose size says nothing of what it holds.
            res, row = streaming.stream_document(path, spec, reading.max_bytes, reading.follow_symlinks)
            outcome = FileOutcome(_raw(res.digest), res.status, res.warning, False, how)
            if res.text is not None:
                streamed[len(docs)] = row
                docs.append(DocOut(doc_id, "", -1, -1, size, _raw(res.digest), how, res.status, int(row.counts.sum())))
                outcome.n_docs = 1
            files.append(outcome)
            continue
        got = read_file(path, doc_id, how, reading.max_bytes, reading.follow_symlinks, fields)
        res = got.result
        digest = _raw(res.digest)
        if expected is not None and digest == expected and res.status not in _UNREAD:
            files.append(FileOutcome(digest, res.status, res.warning, True, how))
            continue
        outcome = FileOutcome(digest, res.status, res.warning, False, how)
        if got.members is not None:
            for m in got.members:
                texts.append(m.text)
                docs.append(DocOut(m.id, doc_id, m.offset, m.length, text_size(m.text), text_digest(m.text), how, "ok", 0))
            outcome.n_docs = len(got.members)
        elif res.text is not None:
            texts.append(res.text)
            docs.append(DocOut(doc_id, "", -1, -1, size, digest, how, res.status, 0))
            outcome.n_docs = 1
        files.append(outcome)
    hasher = _hasher(task.signature)
    sigs = np.empty((len(docs), task.signature.num_perm), dtype=np.uint32)
    sets_parts: list[ShingleSets] = []
    in_texts = np.array([i for i in range(len(docs)) if i not in streamed], dtype=np.int64)
    if len(in_texts):
        stream = shingle_texts(texts, spec, form="stream", views=True)
        sigs[in_texts] = hasher.signatures(stream)
        sizes = np.diff(stream.indptr)
        for i, n in zip(in_texts.tolist(), sizes.tolist()):
            docs[i].n_shingles = int(n)
    for i, row in streamed.items():
        sigs[i] = hasher.signatures(row)[0]
    sets = None
    if task.keep_sets:
        text_sets = shingle_texts(texts, spec) if texts else None
        t = 0
        for i in range(len(docs)):
            if i in streamed:
                sets_parts.append(streamed[i])
            else:
                sets_parts.append(text_sets.slice(t, t + 1))
                t += 1
        sets = ShingleSets.concatenate(sets_parts)
    return BatchResult(files, docs, sigs, sets)


def _raw(hexdigest: str) -> bytes:
    return bytes.fromhex(hexdigest) if hexdigest else b""

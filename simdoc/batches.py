"""The shingle stage's batches: read and shingle files in worker processes, write their rows.

The stage's output is CSR arrays in document order (offsets, shingle
hashes, counts in one byte with an overflow table). Workers shingle batches
of files in parallel (computing their MinHash rows too when asked) and write
their rows *in place* in the stage's temporary files, so that every byte is
written once:

* a :class:`Sequencer` shared by the workers hands each batch, in batch
  order, the place where its rows go: the end of the previous batch plus
  the rows of unchanged documents the parent copies in between;
* the worker writes its rows there with ``pwrite`` and returns only the
  batch's row offsets and the CRC-32 of each piece it wrote;
* the parent (:class:`RowWriter`) fills in the copied rows and builds the
  file's CRC-32 from the pieces' in file order.

On this kind of machine, putting new pages in the page cache costs about
as much as shingling the text did (about 0.5 GB/s), so the earlier design
(each worker writes a shard, the parent concatenates shards) spent more
time writing than computing. Workers that do not share this machine's
processes (Dask) still write shards, which the parent copies in
(:class:`Shard`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simdoc import direct
from simdoc.corpus import ReadResult, compression_of, open_regular, read_document
from simdoc.records import WEB_EXTRA, html_to_text, is_html, is_jsonl, is_warc, read_jsonl, split_warc
from simdoc.memory import read_ranges
from simdoc.shingling import ShingleSets, ShingleSpec, Workspace, compact_counts, shingle_texts
from simdoc.store import IndexStore, crc32, npy_offset

_UNREAD = ("binary", "unreadable")  # statuses of files that give no row
COPY_CHUNK = 1 << 22  # shingles of copied rows read at a time


@dataclass
class Shard:
    """One batch's shingle rows, written by a worker to two temporary files (Dask engine)."""

    indptr: np.ndarray
    data_path: str
    counts_path: str
    data_crc: int
    counts_crc: int
    signatures: np.ndarray | None = None

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    def as_sets(self) -> ShingleSets:
        nnz = int(self.indptr[-1])
        if nnz == 0:
            return ShingleSets(self.indptr, np.zeros(0, np.uint32), np.zeros(0, np.uint32))
        data = np.memmap(self.data_path, dtype=np.uint32, mode="r", shape=(nnz,))
        counts = np.memmap(self.counts_path, dtype=np.uint32, mode="r", shape=(nnz,))
        return ShingleSets(self.indptr, data, counts)

    def remove(self) -> None:
        for path in (self.data_path, self.counts_path):
            with contextlib.suppress(OSError):
                os.unlink(path)


@dataclass
class Run:
    """Rows [first, stop) of a batch, written in place from shingle number ``position`` on."""

    first: int
    stop: int
    position: int
    n: int
    data_crc: int
    counts_crc: int
    overflow: np.ndarray  # (position, count) of counts of 255 or more (see compact_counts)


@dataclass
class Placed:
    """One batch's rows, already written in place by a worker: their offsets and pieces."""

    indptr: np.ndarray
    runs: list[Run] = field(default_factory=list)
    signatures: np.ndarray | None = None  # the batch's MinHash rows, if asked for

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1


@dataclass
class PlaceSink:
    """Where a worker writes a batch in place (see :class:`Sequencer`).

    ``gaps`` maps a file's position in the batch to the (rows, shingles) of
    unchanged documents the parent copies in just before it.
    """

    turn: int
    data_path: str
    counts_path: str
    gaps: dict[int, tuple[int, int]]
    # The first shingle whose hashes, and whose counts, are written O_DIRECT (see simdoc.direct).
    direct_from: tuple[int | None, int | None] = (None, None)


@dataclass
class ShardSink:
    """Write a batch to shard files named by ``prefix.format(kind=data|counts)``."""

    prefix: str


class Sequencer:
    """Hands out places in the output files to batches, in batch order, across processes.

    Batch ``turn`` waits until batch ``turn - 1`` has taken its place, then
    takes the next ``n`` shingles. Batches are started in order, so the one
    waited for is always running; the wait is a fraction of one batch.
    """

    def __init__(self, ctx) -> None:
        self.cond = ctx.Condition()
        self.turn = ctx.Value("q", 0, lock=False)
        self.cursor = ctx.Value("q", 0, lock=False)
        self.parent = os.getpid()

    def reserve(self, turn: int, n: int) -> int:
        with self.cond:
            while self.turn.value != turn:
                # A worker whose parent was killed must not wait for ever for a turn
                # that will never come: it gives up, as its pool would have.
                if not self.cond.wait(timeout=1.0) and os.getpid() != self.parent and os.getppid() != self.parent:
                    raise RuntimeError("the simdoc process that started this worker is gone")
            start = self.cursor.value
            self.cursor.value = start + n
            self.turn.value = turn + 1
            self.cond.notify_all()
        return start


_SEQUENCER: Sequencer | None = None


def use_sequencer(seq: Sequencer | None) -> None:
    """Install the sequencer in this process (the pool's initializer, or in-process runs)."""
    global _SEQUENCER
    _SEQUENCER = seq


def how_read(path: str, size: int) -> str:
    """How a file of this name and size is read into documents.

    "members" (JSON Lines, WARC: a document per record), "html" (the page's
    visible text), "streamed" (in chunks: files over STREAM_BYTES and every
    compressed file) or "whole". The same bytes read the same way give the
    same text (see :meth:`simdoc.pipeline.LoadedIndex.same_text`).
    """
    from simdoc import streaming

    if is_jsonl(path) or is_warc(path):
        return "members"
    if is_html(path):
        return "html"
    if size > streaming.STREAM_BYTES or compression_of(path):
        return "streamed"
    return "whole"


def read_batch(entries, spec: ShingleSpec, max_bytes, follow: bool, fields) -> tuple[ShingleSets, list[tuple]]:
    """Read and shingle one batch of files: the rows of the readable ones, and per file
    (digest, status, warning, members), members being [(doc id, text digest), ...] for
    files holding many documents (JSON Lines, WARC) and None otherwise.

    The rows may live in this process's scratch space (see ``shingle_texts(views=True)``):
    they are valid until the next batch."""
    def plain(path: str, size: int) -> bool:
        return how_read(path, size) == "whole"

    ahead = _ReadAhead(entries, follow, plain)
    try:
        return _read_batch(entries, spec, max_bytes, follow, fields, ahead)
    finally:
        ahead.close()


def _read_batch(entries, spec, max_bytes, follow, fields, ahead: _ReadAhead):
    from simdoc import streaming

    texts, infos = [], []
    streamed: dict[int, ShingleSets] = {}  # position among readable documents -> its row
    for i, (doc_id, path, size) in enumerate(entries):
        how = how_read(path, size)
        if how == "members":
            if is_warc(path):
                res, docs, notes = _read_warc(path, doc_id, max_bytes)
            else:
                res, docs, notes = read_jsonl(path, doc_id, *fields, max_bytes=max_bytes, follow_symlinks=follow)
            texts.extend(t for _, t in docs)
            members = [
                (d, hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()) for d, t in docs
            ]
            warning = "; ".join(([res.warning] if res.warning else []) + notes) or None
            infos.append((res.digest, res.status, warning, members))
            continue
        if how == "html":
            res = read_document(path, max_bytes=max_bytes, follow_symlinks=follow)
            if res.text is not None:
                try:
                    texts.append(html_to_text(res.text))
                except ImportError:
                    res = ReadResult(None, res.digest, warning=f"HTML needs an extractor: {WEB_EXTRA}", status="unreadable")
            infos.append((res.digest, res.status, res.warning, None))
            continue
        if how == "streamed":
            # A huge file is shingled in chunks, in bounded memory; so is every compressed
            # file, whose size says nothing of what it holds.
            res, row = streaming.stream_document(path, spec, max_bytes, follow)
            if res.text is not None:
                streamed[len(texts) + len(streamed)] = row
        else:
            res = read_document(path, max_bytes=max_bytes, follow_symlinks=follow, keep_ascii=True, opened=ahead.take(i))
            if res.text is not None:
                texts.append(res.text)
        infos.append((res.digest, res.status, res.warning, None))
    # Views into this process's scratch space: the caller writes them out before the next batch.
    sets = shingle_texts(texts, spec, views=True)
    if streamed:
        pieces, i = [], 0
        for pos in range(len(texts) + len(streamed)):
            if pos in streamed:
                pieces.append(streamed[pos])
            else:
                pieces.append(sets.slice(i, i + 1))
                i += 1
        sets = ShingleSets.concatenate(pieces)
    return sets, infos


class _ReadAhead:
    """Plain files of a batch opened a few dozen ahead of reading, with POSIX_FADV_WILLNEED.

    When the corpus is not in the page cache (a crawl larger than memory),
    reading small files one by one waits for the disk once per file (~10,000
    files/s here); asking for the next ones while reading this one keeps many
    reads in flight (2.6x faster cold, no slower cached: the descriptor opened
    ahead is the one read from).
    """

    WINDOW = 64

    def __init__(self, entries, follow: bool, plain) -> None:
        self.entries = entries
        self.follow = follow
        self.plain = plain
        self.opened: dict[int, object] = {}
        self.next = 0

    def take(self, i: int):
        """What open_regular gives for entry i (None if it is not a plain file)."""
        while self.next < len(self.entries) and self.next <= i + self.WINDOW:
            _, path, size = self.entries[self.next]
            if self.plain(path, size):
                opened = open_regular(path, self.follow)
                if isinstance(opened, tuple) and hasattr(os, "posix_fadvise"):
                    with contextlib.suppress(OSError):
                        os.posix_fadvise(opened[0], 0, 0, os.POSIX_FADV_WILLNEED)
                self.opened[self.next] = opened
            self.next += 1
        return self.opened.pop(i, None)

    def close(self) -> None:
        for opened in self.opened.values():
            if isinstance(opened, tuple):
                os.close(opened[0])
        self.opened.clear()


def rows_of(info: tuple) -> int:
    """How many rows a file's info stands for."""
    members = info[3]
    if members is not None:
        return len(members)
    return 0 if info[1] in _UNREAD else 1


_HASHERS: dict[tuple, object] = {}


def _signatures(sets: ShingleSets, signer: tuple | None) -> np.ndarray | None:
    """MinHash rows of a batch while its shingles are at hand (signer: num_perm, seed, scheme)."""
    if signer is None:
        return None
    from simdoc.minhash import MinHasher

    hasher = _HASHERS.get(signer)
    if hasher is None:
        num_perm, seed, scheme = signer
        hasher = _HASHERS[signer] = MinHasher(num_perm, seed, scheme=scheme)
    return hasher.signatures(sets)


def shingle_batch(task: tuple) -> tuple[Placed | Shard, list[tuple]]:
    """Read, shingle and write one batch of files (runs in a worker process).

    With a signer (num_perm, seed, scheme) in the task, the batch's MinHash
    signatures are computed too and travel back with the result: the rows
    are in cache now, where the signature stage would read them back.
    """
    entries, spec, max_bytes, follow, sink, fields, signer = task
    if isinstance(sink, PlaceSink):
        try:
            sets, infos = read_batch(entries, spec, max_bytes, follow, fields)
            sigs = _signatures(sets, signer)
        except BaseException:
            # Take the turn anyway, or the batches after this one would wait for ever.
            _SEQUENCER.reserve(sink.turn, 0)
            raise
        placed = _write_in_place(sets, infos, sink)
        placed.signatures = sigs
        return placed, infos
    sets, infos = read_batch(entries, spec, max_bytes, follow, fields)
    sigs = _signatures(sets, signer)
    paths, crcs = [], []
    for kind, arr in (("data", sets.data), ("counts", sets.counts)):
        path = sink.prefix.format(kind=kind)
        with open(path, "wb") as fh:
            fh.write(arr.data)
        paths.append(path)
        crcs.append(crc32(arr.data))
    return Shard(sets.indptr, paths[0], paths[1], crcs[0], crcs[1], sigs), infos


_SCRATCH = Workspace()  # this worker's reused buffer for the stored counts


def _write_in_place(sets: ShingleSets, infos: list[tuple], sink: PlaceSink) -> Placed:
    # Cut the batch's rows into runs wherever the parent copies unchanged rows in between;
    # ``skip`` counts the copied shingles that go before each run.
    runs: list[tuple[int, int, int]] = []  # (first row, stop row, skip)
    row = first = skip = 0
    for i, info in enumerate(infos):
        gap = sink.gaps.get(i)
        if gap is not None:
            if row > first:
                runs.append((first, row, skip))
            skip += gap[1]
            first = row
        row += rows_of(info)
    if row > first:
        runs.append((first, row, skip))
    n_rows = int(sets.indptr[-1])
    start = _SEQUENCER.reserve(sink.turn, skip + n_rows)
    placed = []
    paths = (sink.data_path, sink.counts_path)
    fds = [os.open(path, os.O_WRONLY) for path in paths]
    # Descriptors for direct writes, opened only by a batch that reaches that far.
    direct_fds = [
        direct.open_direct(path) if at is not None and start + skip + n_rows > at else None
        for path, at in zip(paths, sink.direct_from)
    ]
    in_flight: list[_Piece] = []
    try:
        for a, b, before in runs:
            lo, hi = int(sets.indptr[a]), int(sets.indptr[b])
            pos = start + before + lo
            small, overflow = compact_counts(sets.counts_range(lo, hi), pos, _SCRATCH)
            # Counts first: their direct part goes to disk while the hashes are written.
            counts = _Piece(fds[1], small, pos, direct_fds[1], sink.direct_from[1])
            in_flight.append(counts)
            data = _Piece(fds[0], sets.data[lo:hi], pos, direct_fds[0], sink.direct_from[0])
            in_flight.append(data)
            data.finish()
            counts.finish()  # before the next run reuses the counts buffer
            in_flight.clear()
            placed.append(Run(a, b, pos, hi - lo, data.crc, counts.crc, overflow))
    finally:
        for piece in in_flight:  # a failure: no thread may write to a descriptor closed here
            piece.abandon()
        for fd in fds:
            os.close(fd)
        for fd in direct_fds:
            direct.close(fd)
    return Placed(sets.indptr, placed)


class _Piece:
    """Elements ``element...`` of an .npy file, written from ``arr`` (and their CRC-32).

    With ``direct_fd``, the whole pages from element ``direct_from`` on go
    through it (O_DIRECT, on the writer thread: see :func:`simdoc.direct.start_direct`);
    the rest, partial pages included, through ``fd`` at once. :meth:`finish`
    waits for the direct part; until then ``arr`` must not change.
    """

    def __init__(self, fd: int, arr: np.ndarray, element: int, direct_fd: int | None, direct_from: int | None) -> None:
        piece = np.ascontiguousarray(arr)
        self.fd = fd
        self.data = memoryview(piece.view(np.uint8))
        self.start = npy_offset(element, piece.itemsize)
        stop = self.start + len(self.data)
        self.a = self.b = stop
        self.pending = None
        if direct_fd is not None and direct_from is not None:
            self.a, self.b = direct.aligned_middle(self.start, stop, npy_offset(direct_from, piece.itemsize))
            if self.a < self.b:
                self.pending = direct.start_direct(direct_fd, self._part(self.a, self.b), self.a)
        try:
            self._buffered(self.start, self.a)
            self._buffered(self.b, stop)
        except BaseException:
            self.abandon()
            raise
        self.crc = crc32(piece.data)

    def _part(self, lo: int, hi: int) -> memoryview:
        return self.data[lo - self.start : hi - self.start]

    def _buffered(self, lo: int, hi: int) -> None:
        view, off = self._part(lo, hi), lo
        while view:
            n = os.pwrite(self.fd, view, off)
            view, off = view[n:], off + n
        _start_writeback(self.fd, lo, hi - lo)

    def finish(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None and not pending.result():
            self._buffered(self.a, self.b)  # the device wants another alignment: through the page cache

    def abandon(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            with contextlib.suppress(BaseException):
                pending.result()


def _libc_sync_file_range():
    try:
        import ctypes

        func = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux: the final fsync does all the work
        return None
    func.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    return func


_SYNC_FILE_RANGE = _libc_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2


def _start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing a piece to disk now, without waiting (Linux sync_file_range).

    The stage ends with an fsync of each file; pieces already on their way
    to disk leave it less to wait for. Best effort: failures are ignored.
    """
    if _SYNC_FILE_RANGE is not None and nbytes > 0:
        _SYNC_FILE_RANGE(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)


def _read_warc(path: str, source: str, max_bytes: int | None = None):
    """A WARC file's documents, or why there are none, as (ReadResult, docs, warnings)."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 24):
                digest.update(chunk)
        docs, notes = split_warc(path, source, max_bytes)
    except ImportError:
        return ReadResult(None, digest.hexdigest(), warning=f"WARC needs {WEB_EXTRA}", status="unreadable"), [], []
    except Exception as exc:  # fastwarc raises its own errors on damaged archives
        return ReadResult(None, digest.hexdigest(), warning=f"cannot read WARC: {exc}", status="unreadable"), [], []
    return ReadResult("", digest.hexdigest()), docs, notes


class RowWriter:
    """Writes the CSR files in document order, merging runs of rows from one source.

    Counts are stored compactly (uint8 plus an overflow table, see
    :func:`simdoc.shingling.compact_counts`).

    A source is a :class:`ShingleSets` (rows copied from the previous build),
    a :class:`Placed` batch (rows a worker already wrote in place: only
    accounted for here) or a :class:`Shard` (copied in by the kernel).
    """

    def __init__(self, store: IndexStore, num_perm: int | None = None) -> None:
        self.store = store
        # Signature rows computed by the workers, in row order, zeros for copied rows
        # (``computed`` says which); the signature stage completes and publishes the file.
        self.signatures = store.array_writer("signatures.tmp.npy", np.uint32, (num_perm,)) if num_perm else None
        self.computed: list[np.ndarray] = []
        self.writers = (
            store.array_writer("shingles.indptr.tmp.npy", np.int64),
            store.array_writer("shingles.data.tmp.npy", np.uint32),
            store.array_writer("shingles.counts.tmp.npy", np.uint8),
        )
        self.overflow: list[np.ndarray] = []
        self._scratch = Workspace()
        self.writers[0].append(np.zeros(1, np.int64))
        self.offset = 0
        self.n_rows = 0
        self._src: ShingleSets | Placed | Shard | None = None
        self._lo = self._hi = 0

    @property
    def paths(self) -> tuple[str, str]:
        """The temporary data and counts files, for workers to write in place."""
        return str(self.writers[1].tmp), str(self.writers[2].tmp)

    def add(self, src: ShingleSets | Placed | Shard, row: int) -> None:
        if src is self._src and row == self._hi:
            self._hi += 1
            return
        self.flush()
        self._src, self._lo, self._hi = src, row, row + 1

    def pending(self, src: object) -> bool:
        return self._src is src

    def flush(self) -> None:
        if self._src is None or self._hi == self._lo:
            return
        src, lo, hi = self._src, self._lo, self._hi
        a, b = int(src.indptr[lo]), int(src.indptr[hi])
        self.writers[0].append(np.asarray(src.indptr[lo + 1 : hi + 1]) - a + self.offset)
        if isinstance(src, Placed):
            runs = [r for r in src.runs if lo <= r.first < hi]
            tiled = (
                runs
                and runs[0].first == lo
                and runs[-1].stop == hi
                and all(x.stop == y.first for x, y in zip(runs, runs[1:]))
                and all(r.position == self.offset + int(src.indptr[r.first]) - a for r in runs)
            )
            if not tiled:
                raise RuntimeError(f"rows {lo}..{hi} of a batch were not written where expected")
            for r in runs:
                self.writers[1].written_elsewhere(r.n, r.data_crc)
                self.writers[2].written_elsewhere(r.n, r.counts_crc)
                self.overflow.append(r.overflow)
        else:
            sets = src.as_sets() if isinstance(src, Shard) else src
            whole_shard = isinstance(src, Shard) and lo == 0 and hi == src.n_docs
            if whole_shard:
                self.writers[1].append_file(Path(src.data_path), 4 * b, src.data_crc)
            # Copied rows (an update copies nearly the whole previous build) are read with
            # pread a chunk at a time into reused buffers, never through the old file's
            # map: touching it would make the whole file resident in this process.
            for c0 in range(a, b, COPY_CHUNK):
                c1 = min(b, c0 + COPY_CHUNK)
                if not whole_shard:
                    span = (np.array([c0]), np.array([c1]))
                    self.writers[1].append(read_ranges(sets.data, *span, self._scratch.get("data", c1 - c0, np.uint32)))
                small, overflow = compact_counts(sets.counts_range(c0, c1), self.offset + c0 - a, self._scratch)
                self.writers[2].append(small)
                self.overflow.append(overflow)
        if self.signatures is not None:
            sigs = getattr(src, "signatures", None)
            if sigs is None:
                self.signatures.append(np.zeros((hi - lo, self.signatures.tail_shape[0]), np.uint32))
            else:
                self.signatures.append(sigs[lo:hi])
            self.computed.append(np.full(hi - lo, sigs is not None))
        self.offset += b - a
        self.n_rows += hi - lo
        self._src = None

    def finish(self, names: dict) -> dict:
        self.flush()
        files = {}
        for role, w in zip(("indptr", "data", "counts"), self.writers):
            w.name = names[role]
            files[names[role]] = w.finish()
        overflow = np.concatenate(self.overflow) if self.overflow else np.zeros((0, 2), np.int64)
        files[names["overflow"]] = self.store.save_array(names["overflow"], overflow)
        return files

    def pending_signatures(self) -> tuple[Path, np.ndarray] | None:
        """The signature rows the workers computed: (temporary .npy file, which rows are real)."""
        if self.signatures is None:
            return None
        computed = np.concatenate(self.computed) if self.computed else np.zeros(0, bool)
        return self.signatures.close_unpublished(), computed

    def abort(self) -> None:
        for w in self.writers + ((self.signatures,) if self.signatures is not None else ()):
            w.abort()

"""Stage orchestration: shingle → signature → index → pairs, kept in an index directory.

Each ``build_*`` function brings one stage up to date and returns what it
did; :func:`find_pairs` runs whatever is missing or out of date, then scores
the candidates. Parameters passed as ``None`` mean "whatever the index holds,
else the default"; a value that differs from what the index holds is a
:class:`~simdoc.errors.ParameterMismatch` unless ``rebuild=True``. The band
parameters are the exception: banding is cheap and derived from the
signatures, so asking for another threshold simply re-bands.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from simdoc import __version__, batches, direct
from simdoc.corpus import (
    FileEntry,
    compression_of,
    discover_sources,
    resolve_sources,
)
from simdoc.errors import CorpusError, IndexError_, ParameterMismatch, UsageError
from simdoc.exact import groups_of, representatives
from simdoc.lsh import (
    DEFAULT_RECALL,
    DEFAULT_THRESHOLD,
    BandingReport,
    band_keys,
    bucket_order,
    check_bands_rows,
    check_threshold,
    choose_bands_rows,
    keep_in_buckets,
)
from simdoc.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, MinHasher
from simdoc.batches import Placed, PlaceSink, RowWriter, Shard, ShardSink, rows_of, shingle_batch
from simdoc.records import MEMBER_IDS
from simdoc.results import Pair, PairsResult, _expand, _members, score_candidates  # noqa: F401
from simdoc.shingling import ShingleSets, ShingleSpec
from simdoc.similarity import MEASURES
from simdoc.store import IndexStore, JsonlWriter, spare

log = logging.getLogger("simdoc")

BATCH_BYTES = 4 << 20  # text per shingling task
BATCH_DOCS = 2000
SIGNATURE_TASK_SHINGLES = 1 << 20
DEFAULT_BAG_THRESHOLD = 0.4
RACY_NS = 2_000_000_000  # mtime granularity we do not trust (FAT has 2 s)


# ---------------------------------------------------------------- helpers


def default_jobs() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


def default_index_path(corpus: str | os.PathLike) -> Path:
    """Where an index lives when ``--index`` is not given.

    ``$SIMDOC_INDEX`` if set; otherwise ``$XDG_CACHE_HOME/simdoc/<name>-<hash>``
    (``~/.cache/simdoc/...``), where the hash is of the corpus's absolute path,
    so each corpus gets its own index and the corpus itself is never written to.
    """
    env = os.environ.get("SIMDOC_INDEX")
    if env:
        return Path(env)
    items = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    absolute = sorted(str(Path(c).resolve()) for c in items)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256("\0".join(absolute).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = Path(absolute[0]).name if len(absolute) == 1 else Path(os.path.commonpath(absolute)).name
    return cache / "simdoc" / f"{name or 'root'}-{digest}"


def _name(corpus) -> str:
    return os.fspath(corpus) if isinstance(corpus, (str, os.PathLike)) else " ".join(map(os.fspath, corpus))


def _build_id(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


_DASK_CLIENT = None  # set while a stage runs on a Dask cluster (see using_scheduler)


@contextlib.contextmanager
def using_scheduler(scheduler: str | None):
    """Run the stages inside on a Dask cluster (host:port or local[N]); None: this machine."""
    global _DASK_CLIENT
    scheduler = scheduler or os.environ.get("SIMDOC_SCHEDULER") or None
    if scheduler is None or _DASK_CLIENT is not None:
        yield
        return
    from simdoc.engines.dask import connect

    with connect(scheduler) as client:
        _DASK_CLIENT = client
        try:
            yield
        finally:
            _DASK_CLIENT = None


def _pool_context():
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def _in_process(func: Callable, task, sequencer: batches.Sequencer | None):
    """func(task) here, with the sequencer installed for exactly this call.

    (Installing it around a generator would let an abandoned generator's
    clean-up, run whenever it is collected, uninstall another run's.)
    """
    previous = batches._SEQUENCER
    batches.use_sequencer(sequencer)
    try:
        return func(task)
    finally:
        batches.use_sequencer(previous)


def _pool_map(func: Callable, tasks: Iterable, jobs: int, sequencer: batches.Sequencer | None = None) -> Iterator:
    """Results of func over tasks, in task order, on ``jobs`` processes (1: in this process).

    ``tasks`` may be a generator: the pool's feeder thread draws from it as
    workers take tasks, so tasks can be made while the first ones run.
    ``sequencer`` is installed in every process that runs a task (see :mod:`simdoc.batches`).
    """
    if _DASK_CLIENT is not None:
        tasks = list(tasks)
        if tasks:
            from simdoc.engines.dask import map_ordered

            yield from map_ordered(_DASK_CLIENT, func, tasks)
        return
    tasks = iter(tasks)
    head = list(itertools.islice(tasks, max(jobs, 1)))  # fewer than jobs: that is all of them
    if jobs <= 1 or len(head) <= 1:
        for task in itertools.chain(head, tasks):
            yield _in_process(func, task, sequencer)
        return
    from simdoc.kernels import warm_up

    warm_up()  # compiled once here; forked workers inherit the machine code
    with _pool_context().Pool(len(head), initializer=batches.use_sequencer, initargs=(sequencer,)) as pool:
        yield from pool.imap(func, itertools.chain(head, tasks), chunksize=1)


def _progress(total: int, desc: str, enabled: bool, unit: str = "doc") -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, leave=False, dynamic_ncols=True)


def _check_jobs(jobs: int | None) -> int:
    if jobs is None:
        return default_jobs()
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def _mismatch(stage: str, stored: dict, asked: dict, index: Path, rebuild: bool) -> bool:
    """True if an asked parameter differs from the stored one (raises unless rebuild)."""
    for name, value in asked.items():
        if value is None or name not in stored or stored[name] == value:
            continue
        if rebuild:
            return True
        raise ParameterMismatch(stage, name, stored[name], value, str(index))
    return False


# ---------------------------------------------------------------- loaded index


@dataclass
class LoadedIndex:
    """Memory-mapped view of an index directory's arrays."""

    store: IndexStore
    manifest: dict

    def stage(self, name: str) -> dict:
        stage = self.manifest["stages"].get(name)
        if stage is None:
            hint = {
                "shingle": "run `simdoc shingle CORPUS --index ...` (or `simdoc pairs CORPUS`) first",
                "signature": "run `simdoc signature --index ...` first",
                "index": "run `simdoc index --index ...` first",
            }[name]
            raise IndexError_(f"the index at {self.store.path} has no {name} stage yet", hint=hint)
        return stage

    def _array(self, stage: str, role: str) -> np.ndarray:
        st = self.stage(stage)
        name = st["roles"][role]
        return self.store.load_array(name, st["files"][name])

    def doc_ids(self) -> list[str]:
        return self.doc_columns(["id"])[0]

    def doc_columns(self, fields: list[str]) -> list[list]:
        """Some fields of every document record, without keeping a dict per document.

        A dict per document costs about 1.5 KB; at 10^6 documents the ids alone
        are what most commands need.
        """
        st = self.stage("shingle")
        name = st["roles"]["docs"]
        kept = self.store.published_columns(name, st["files"][name], fields)
        if kept is not None:  # this process has just written the table
            return [list(col) for col in kept]
        cols: list[list] = [[] for _ in fields]
        for rec in self.store.iter_jsonl(name, st["files"][name]):
            for col, f in zip(cols, fields):
                col.append(rec.get(f, True if f == "changed" else None))
        return cols

    def same_text(self) -> Callable[[int], tuple | None] | None:
        """What identifies each document's text, if this process has just written the docs table.

        Documents with equal identities hold byte-identical text, read the
        same way, and so identical shingle bags (see
        :func:`simdoc.exact.representatives`). None when the table would
        have to be parsed again: it is not worth its time (~2 s at 10^6
        documents) against the rows it saves reading.
        """
        st = self.stage("shingle")
        name = st["roles"]["docs"]
        kept = self.store.published_columns(name, st["files"][name], ["id", "digest", "source", "size"])
        if kept is None:
            return None
        ids, digests, sources, sizes = kept

        def identity(doc: int) -> tuple | None:
            digest = digests[doc]
            if not digest:
                return None
            if sources[doc] is not None:  # a JSON Lines or WARC member: the digest is of its text
                return ("text", digest)
            # A file's digest is of the bytes it was indexed from (the first --max-bytes of
            # them); its name and size say how they were read (an id ends in the file's name).
            return ("bytes", digest, batches.how_read(ids[doc], sizes[doc]), compression_of(ids[doc]))

        return identity

    def doc_records(self) -> list[dict]:
        st = self.stage("shingle")
        name = st["roles"]["docs"]
        return self.store.read_jsonl(name, st["files"][name])

    def shingle_sets(self) -> ShingleSets:
        # Indexes written before counts were compacted have uint32 counts and no overflow table.
        overflow = self._array("shingle", "overflow") if "overflow" in self.stage("shingle")["roles"] else None
        return ShingleSets(
            self._array("shingle", "indptr"), self._array("shingle", "data"), self._array("shingle", "counts"), overflow
        )

    def signatures(self) -> np.ndarray:
        return self._array("signature", "signatures")

    def hasher(self) -> MinHasher:
        st = self.stage("signature")
        family = self._array("signature", "family")
        p = st["params"]
        return MinHasher(p["num_perm"], p["seed"], a=family[0], b=family[1], scheme=p.get("scheme", DEFAULT_SCHEME))

    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        return self._array("index", "bands"), self._array("index", "buckets")

    def representatives(self) -> np.ndarray:
        """rep[i]: the first document with exactly document i's shingles (see simdoc.exact)."""
        return np.asarray(self._array("index", "groups"))


def open_index(index: str | os.PathLike) -> LoadedIndex:
    store = IndexStore(index)
    if not store.exists():
        raise IndexError_(f"no simdoc index at {index}", hint="build one with `simdoc shingle CORPUS --index ...`")
    return LoadedIndex(store, store.read_manifest())


# ---------------------------------------------------------------- shingle stage


@dataclass
class StageResult:
    stage: str
    built: bool  # False: it was already up to date
    seconds: float = 0.0
    detail: str = ""
    warnings: list[str] = field(default_factory=list)
    pending: PendingSignatures | None = None  # signatures computed while shingling, for the next stage


@dataclass
class PendingSignatures:
    """Signature rows the shingle workers computed, in a temporary file the signature stage completes.

    ``computed[i]`` says whether row i was computed (rows copied from the
    previous build are zeros here; the signature stage copies or computes
    them). Valid for the shingle build ``built_from`` and these ``params``.
    """

    path: Path
    computed: np.ndarray
    params: dict
    built_from: str

    def discard(self) -> None:
        spare(self.path, keep=False)
        self.path.unlink(missing_ok=True)


def _batches(entries: Iterable[FileEntry]) -> Iterator[list[FileEntry]]:
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


def _copied_before(entries: list[FileEntry], stat_same: np.ndarray, old_members: dict, old_sets) -> dict[int, tuple[int, int]]:
    """For each file to read (by its position among them), the (rows, shingles) of unchanged
    documents copied from the previous build just before it. Mirrors the row order of
    :func:`_build_shingles`, which checks that the workers' places agree."""
    gaps: dict[int, tuple[int, int]] = {}
    n_rows = n_shingles = 0
    read = 0
    for i, e in enumerate(entries):
        j = int(stat_same[i])
        if j >= 0:
            for jj in old_members.get(e.id, [j]):
                n_rows += 1
                n_shingles += int(old_sets.indptr[jj + 1] - old_sets.indptr[jj])
        else:
            if n_rows:
                gaps[read] = (n_rows, n_shingles)
                n_rows = n_shingles = 0
            read += 1
    return gaps


def _recording(found: Iterator[FileEntry], into: list[FileEntry]) -> Iterator[FileEntry]:
    """``found``, appending each entry to ``into`` as it passes."""
    for e in found:
        into.append(e)
        yield e


def _scan_signature(entries: list[FileEntry], skipped) -> list:
    return [[e.id, e.size, e.mtime_ns] for e in entries] + [[s.id, s.reason] for s in skipped]


def build_shingles(
    corpus: str | os.PathLike | list,
    index: str | os.PathLike | None = None,
    *,
    wait: float = 0.0,
    **options,
) -> StageResult:
    """Bring the shingle stage of ``index`` up to date with ``corpus`` (holding the writer lock).

    ``options``: unit, k, lowercase, jobs, rebuild, progress (see :func:`find_pairs`).
    """
    index = Path(index) if index is not None else default_index_path(corpus)
    scheduler = options.pop("scheduler", None)
    with IndexStore(index).writing(wait), using_scheduler(scheduler), _collector_paused():
        return _build_shingles(corpus, index, **options)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for a stage that only makes acyclic objects.

    The shingle stage keeps a few objects per document (entries, records, results)
    alive until its end; each collection walks all of them again, ~2% of the
    stage's CPU at 10^5 documents (perf). Nothing it makes holds a cycle.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _build_shingles(
    corpus: str | os.PathLike,
    index: str | os.PathLike | None = None,
    *,
    unit: str | None = None,
    k: int | None = None,
    lowercase: bool | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    max_bytes: int | None = None,
    follow_symlinks: bool | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    signer: tuple[int, int, str] | None = None,
) -> StageResult:
    """Shingle new and changed files; copy the rows of unchanged ones from the current build.

    ``signer`` (num_perm, seed, scheme): also compute the MinHash rows of the
    files read, for the signature stage (see :class:`PendingSignatures`).

    A file is unchanged if its size and mtime are those recorded; a file whose
    size or mtime differ is read, and counts as changed only if its content
    digest differs. The arrays come out exactly as a full rebuild's would.
    """
    t0 = time.perf_counter()
    jobs = _check_jobs(jobs)
    index = Path(index) if index is not None else default_index_path(corpus)
    store = IndexStore(index)
    manifest = store.read_manifest(discard_damaged=rebuild)
    if rebuild:
        manifest["stages"] = {}
    stored = manifest["stages"].get("shingle")
    corpus_abs = resolve_sources(corpus)[0]
    include = sorted(set(include)) if include else None
    exclude = sorted(set(exclude)) if exclude else None
    asked = {
        "unit": unit,
        "k": k,
        "lowercase": lowercase,
        "max_bytes": max_bytes,
        "follow_symlinks": follow_symlinks,
        "include": include,
        "exclude": exclude,
        "text_field": text_field,
        "id_field": id_field,
    }
    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1, got {max_bytes}")
    if stored and not rebuild and stored.get("corpus") != corpus_abs:
        raise IndexError_(
            f"the index at {index} was built for the corpus {stored.get('corpus')}, not {corpus_abs}",
            hint="pass --rebuild to rebuild it for this corpus, or choose another --index",
        )
    changed_params = stored is not None and _mismatch("shingle", stored["params"], asked, index, rebuild)
    base = stored["params"] if (stored and not changed_params and not rebuild) else {}
    u = unit if unit is not None else base.get("unit", "char")
    spec = ShingleSpec(
        u,
        k if k is not None else (base.get("k") if base.get("unit") == u else None),
        lowercase if lowercase is not None else base.get("lowercase", True),
    )
    reading = {
        "max_bytes": max_bytes if max_bytes is not None else base.get("max_bytes"),
        "follow_symlinks": follow_symlinks if follow_symlinks is not None else base.get("follow_symlinks", False),
        "include": include if include is not None else base.get("include", []),
        "exclude": exclude if exclude is not None else base.get("exclude", []),
        "text_field": text_field if text_field is not None else base.get("text_field", "text"),
        "id_field": id_field if id_field is not None else base.get("id_field"),
    }
    params = {**spec.as_params(), **reading, "member_ids": MEMBER_IDS}
    reuse = bool(stored) and not rebuild and not changed_params and stored["params"] == params
    local = _DASK_CLIENT is None  # workers on this machine write their rows in place
    # A new build reads every file, so it can start on the first ones while the corpus is
    # still being listed (the list is needed first only to compare it with the last build).
    overlapped = local and not reuse
    _, found, skipped = discover_sources(
        corpus,
        exclude=[index],
        follow_symlinks=reading["follow_symlinks"],
        include_globs=tuple(reading["include"]),
        exclude_globs=tuple(reading["exclude"]),
        lazy=overlapped,
    )
    if overlapped:
        entries: list[FileEntry] = []
        found = _recording(found, entries)
        first = next(found, None)
        if first is not None:
            found = itertools.chain([first], found)
    else:
        entries = found
        first = entries[0] if entries else None
    if first is None:
        raise CorpusError(
            f"corpus {_name(corpus)} has no documents" + (f" ({len(skipped)} paths passed over)" if skipped else ""),
            hint="point simdoc at a folder that holds text files (hidden files are ignored)",
        )
    scan_id = None if overlapped else _build_id(_scan_signature(entries, skipped))
    if reuse and stored.get("scan_id") == scan_id:
        return StageResult("shingle", False, time.perf_counter() - t0, "up to date")

    old_records: list[dict] = []
    old_sets: ShingleSets | None = None
    if reuse:
        old = LoadedIndex(store, manifest)
        old_records = old.doc_records()
        old_sets = old.shingle_sets()
    old_pos = {r["id"]: i for i, r in enumerate(old_records)}
    # Documents of a JSON Lines file carry its id as "source"; they are reused or re-read together.
    old_members: dict[str, list[int]] = {}
    for i, r in enumerate(old_records):
        if "source" in r:
            old_members.setdefault(r["source"], []).append(i)
    # Rows whose file looks untouched (same size and mtime) are copied without reading the file.
    # A file modified in the same clock tick as the last scan could keep both, so files whose
    # mtime is that recent are read again ("racily clean", as git calls it).
    scanned_at = time.time_ns()
    racy_after = int(stored.get("scanned_at_ns", 0)) - RACY_NS if reuse else 0
    stat_same = None if overlapped else np.full(len(entries), -1, dtype=np.int64)
    to_read: list[int] = []
    for i, e in enumerate(entries if not overlapped else ()):
        j = old_pos.get(e.id) if e.id not in old_members else old_members[e.id][0]
        if (
            j is not None
            and old_records[j]["size"] == e.size
            and old_records[j]["mtime_ns"] == e.mtime_ns
            and e.mtime_ns < racy_after
        ):
            stat_same[i] = j
        else:
            to_read.append(i)
    store.ensure_dir()
    rows = RowWriter(store, signer[0] if signer else None)
    run_tag = f"{os.getpid()}-{time.time_ns()}"
    gaps = {} if overlapped or not local else _copied_before(entries, stat_same, old_members, old_sets)
    queued: collections.deque[list[FileEntry]] = collections.deque()  # batches made, results not yet taken
    direct_from = direct.direct_from()  # what bypasses the page cache (see simdoc.direct)

    def make_tasks() -> Iterator[tuple]:
        read_entries = found if overlapped else (entries[i] for i in to_read)
        first = 0  # position of the batch's first file among the files read
        for i, b in enumerate(_batches(read_entries)):
            if local:
                sink = PlaceSink(
                    i, *rows.paths, {p - first: gaps[p] for p in range(first, first + len(b)) if p in gaps}, direct_from
                )
            else:
                sink = ShardSink(str(store.path / f".shingles.{{kind}}.tmp.npy.shard-{run_tag}-{i}.tmp"))
            first += len(b)
            queued.append(b)
            files = [(e.id, e.path, e.size) for e in b]
            yield files, spec, reading["max_bytes"], reading["follow_symlinks"], sink, (reading["text_field"], reading["id_field"]), signer

    shards: list[Shard] = []

    def read_results() -> Iterator[tuple[FileEntry, tuple, Placed | Shard, int]]:
        """Per file read: (entry, info, its batch, first row or -1); a JSON Lines file has one row per member."""
        sequencer = batches.Sequencer(_pool_context()) if local else None
        for batch, infos in _pool_map(shingle_batch, make_tasks(), jobs, sequencer):
            if isinstance(batch, Shard):
                shards.append(batch)
            row = 0
            # The task of a result was made before the result came: its batch is queued.
            for e, info in zip(queued.popleft(), infos, strict=True):
                n = rows_of(info)
                yield e, info, batch, (row if n or info[3] is not None else -1)
                row += n

    # What the walk passed over comes first; an overlapped walk knows it only at the end.
    warnings = [] if overlapped else [f"{s.id}: {s.reason}" for s in skipped]
    not_docs: list[dict] = [] if overlapped else [{"id": s.id, "reason": s.reason} for s in skipped]
    docs_out = JsonlWriter(store.path, "docs.tmp.jsonl", columns=("id", "changed", "digest", "size"), optional=("source",))
    n_empty = 0
    n_kept_old = 0  # documents of the previous build still present (to count removals)
    origin: list[int] = []
    generation = int(manifest.get("generation", 0)) + 1
    n_changed = 0
    try:
        results = read_results()
        bar = _progress(None if overlapped else len(entries), "shingle", progress)
        # Files in id order: a new build takes them as their results come; an update goes
        # through the whole list, copying unchanged files' rows and taking the others' results.
        files_in_order = ((None, got) for got in results) if overlapped else ((e, None) for e in entries)
        for i, (e, got) in enumerate(files_in_order):
            # A shard whose rows are all written (its span is no longer pending): free its space.
            while len(shards) > 1 and not rows.pending(shards[0]):
                shards.pop(0).remove()
            j = -1 if overlapped else int(stat_same[i])
            if j >= 0:
                for j in old_members.get(e.id, [j]):
                    rows.add(old_sets, j)
                    rec = dict(old_records[j])
                    rec["changed"] = False
                    docs_out.add(rec)
                    n_empty += rec["n_shingles"] == 0
                    n_kept_old += 1
                    origin.append(j)
            else:
                e, (digest, status, warning, members), sets, row = got if got is not None else next(results)
                if warning:
                    warnings.append(f"{e.id}: {warning}")
                if members is not None:
                    if not members:
                        not_docs.append({"id": e.id, "reason": warning or "no documents in this JSON Lines file"})
                    for k, (member_id, member_digest) in enumerate(members):
                        rows.add(sets, row + k)
                        j = old_pos.get(member_id, -1)
                        same = j >= 0 and old_records[j]["digest"] == member_digest
                        n_changed += not same
                        n_kept_old += j >= 0
                        origin.append(j if same else -1)
                        n_shingles = int(sets.indptr[row + k + 1] - sets.indptr[row + k])
                        n_empty += n_shingles == 0
                        docs_out.add(
                            {"id": member_id, "source": e.id, "size": e.size, "mtime_ns": e.mtime_ns,
                             "digest": member_digest, "status": status, "n_shingles": n_shingles, "changed": not same}
                        )
                    bar.update(1)
                    continue
                if row < 0:
                    not_docs.append({"id": e.id, "reason": warning})
                    continue
                rows.add(sets, row)
                j = old_pos.get(e.id, -1)
                same = j >= 0 and old_records[j]["digest"] == digest
                n_changed += not same
                n_kept_old += j >= 0
                origin.append(j if same else -1)
                n_shingles = int(sets.indptr[row + 1] - sets.indptr[row])
                n_empty += n_shingles == 0
                docs_out.add(
                    {"id": e.id, "size": e.size, "mtime_ns": e.mtime_ns, "digest": digest, "status": status,
                     "n_shingles": n_shingles, "changed": not same}
                )
            bar.update(1)
        bar.close()
        if overlapped:
            warnings[:0] = [f"{s.id}: {s.reason}" for s in skipped]
            not_docs[:0] = [{"id": s.id, "reason": s.reason} for s in skipped]
            scan_id = _build_id(_scan_signature(entries, skipped))
        if not docs_out.count:
            err = CorpusError(
                f"corpus {_name(corpus)} has no readable documents ({len(not_docs)} files skipped)",
                hint="see the warnings above for why each file was skipped",
            )
            err.warnings = warnings
            raise err
        build = _build_id(scan_id, params, __version__, generation)
        names = {
            "indptr": f"shingles.indptr.{build}.npy",
            "data": f"shingles.data.{build}.npy",
            "counts": f"shingles.counts.{build}.npy",
            "overflow": f"shingles.overflow.{build}.npy",
            "docs": f"docs.{build}.jsonl",
            "origin": f"shingles.origin.{build}.npy",
        }
        files = rows.finish(names)
        pending = None
        written = rows.pending_signatures()
        if written is not None:
            num_perm, seed, scheme = signer
            pending = PendingSignatures(*written, {"num_perm": num_perm, "seed": seed, "scheme": scheme}, build)
            spare(pending.path)  # the manifest write below must not collect it
        docs_out.name = names["docs"]
        files[names["docs"]] = docs_out.finish()
    except BaseException:
        rows.abort()
        docs_out.abort()
        if not local:
            for leftover in store.path.glob(f".shingles.*.tmp.npy.shard-{run_tag}-*.tmp"):
                leftover.unlink(missing_ok=True)
        raise
    finally:
        for shard in shards:
            shard.remove()
    try:
        files[names["origin"]] = store.save_array(names["origin"], np.asarray(origin, dtype=np.int64))
        n_docs = docs_out.count
        empty = n_empty
        manifest["stages"]["shingle"] = {
            "params": params,
            "corpus": corpus_abs,
            "scan_id": scan_id,
            "scanned_at_ns": scanned_at,
            "build_id": build,
            "previous_build": stored["build_id"] if reuse else None,
            "n_docs": n_docs,
            "n_empty": empty,
            "n_changed": n_changed,
            "n_removed": len(old_pos) - n_kept_old,
            "skipped": not_docs,
            "roles": names,
            "files": files,
        }
        manifest["generation"] = generation
        manifest["simdoc_version"] = __version__
        store.write_manifest(manifest)
    except BaseException:
        if pending is not None:
            pending.discard()
        raise
    detail = f"{n_docs} documents, {rows.offset} shingles"
    if reuse:
        detail += f"; read {len(to_read)} files, {n_changed} new or changed, {manifest['stages']['shingle']['n_removed']} removed"
    if empty:
        detail += f", {empty} with no shingles (never candidates)"
    if not_docs:
        detail += f", {len(not_docs)} files skipped"
    return StageResult("shingle", True, time.perf_counter() - t0, detail, warnings, pending)


# ---------------------------------------------------------------- signature stage


def _signature_task(task: tuple) -> int:
    """Compute the signatures of some row ranges into the shared output file (worker process)."""
    index, ranges, out_tmp, num_perm, seed, scheme = task
    all_sets = open_index(index).shingle_sets()
    hasher = MinHasher(num_perm, seed, scheme=scheme)
    out = np.load(out_tmp, mmap_mode="r+")
    for start, stop in ranges:
        hasher.signatures(all_sets.slice(start, stop), out=out[start:stop])
    out.flush()
    return sum(b - a for a, b in ranges)


def _plan_signature_tasks(indptr: np.ndarray, need: np.ndarray) -> list[list[tuple[int, int]]]:
    """Group the runs of rows that need computing into tasks of about SIGNATURE_TASK_SHINGLES shingles."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], need.astype(np.int8), [0]))))
    tasks: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    volume = 0
    for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist()):
        while a < b:
            # Cut long runs where the volume reaches the task size.
            limit = int(np.searchsorted(indptr, indptr[a] + SIGNATURE_TASK_SHINGLES - volume, side="right")) - 1
            stop = min(b, max(limit, a + 1))
            current.append((a, stop))
            volume += int(indptr[stop] - indptr[a])
            a = stop
            if volume >= SIGNATURE_TASK_SHINGLES:
                tasks.append(current)
                current, volume = [], 0
    if current:
        tasks.append(current)
    return tasks


def build_signatures(index: str | os.PathLike, *, wait: float = 0.0, **options) -> StageResult:
    """Bring the signature stage up to date with the shingle stage (holding the writer lock).

    ``options``: num_perm, seed, jobs, rebuild, progress. A stage the last
    published manifest shows up to date is left alone without taking the
    lock, so that a reader never waits for a writer.
    """
    loaded = open_index(index)
    scheduler = options.pop("scheduler", None)
    if not options.get("rebuild") and options.get("pending") is None:
        _check_jobs(options.get("jobs"))
        stored = loaded.manifest["stages"].get("signature")
        params = _signature_params(stored, options.get("num_perm"), options.get("seed"), options.get("scheme"), index, False)
        if stored and stored["params"] == params and stored.get("built_from") == loaded.stage("shingle")["build_id"]:
            return StageResult("signature", False, 0.0, "up to date")
    with loaded.store.writing(wait), using_scheduler(scheduler):
        return _build_signatures(index, **options)


def _signature_params(stored: dict | None, num_perm, seed, scheme, index, rebuild: bool) -> dict:
    """The signature parameters a run will use: those asked, else the index's, else the defaults."""
    asked = {"num_perm": num_perm, "seed": seed, "scheme": scheme}
    changed = stored is not None and _mismatch("signature", stored["params"], asked, Path(index), rebuild)
    base = stored["params"] if (stored and not changed and not rebuild) else {}
    return {
        "num_perm": num_perm if num_perm is not None else base.get("num_perm", DEFAULT_NUM_PERM),
        "seed": seed if seed is not None else base.get("seed", DEFAULT_SEED),
        "scheme": scheme if scheme is not None else base.get("scheme", DEFAULT_SCHEME),
    }


def _build_signatures(
    index: str | os.PathLike,
    *,
    num_perm: int | None = None,
    seed: int | None = None,
    scheme: str | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    pending: PendingSignatures | None = None,
) -> StageResult:
    t0 = time.perf_counter()
    jobs = _check_jobs(jobs)
    loaded = open_index(index)
    shingle = loaded.stage("shingle")
    stored = loaded.manifest["stages"].get("signature")
    params = _signature_params(stored, num_perm, seed, scheme, index, rebuild)
    hasher = MinHasher(params["num_perm"], params["seed"], scheme=params["scheme"])
    n = shingle["n_docs"]
    use_pending = (
        pending is not None
        and pending.params == params
        and pending.built_from == shingle["build_id"]
        and len(pending.computed) == n
    )
    if pending is not None and not use_pending:
        pending.discard()
    if stored and not rebuild and stored["params"] == params and stored.get("built_from") == shingle["build_id"]:
        return StageResult("signature", False, time.perf_counter() - t0, "up to date")
    store = loaded.store
    build = _build_id(shingle["build_id"], params, __version__)
    names = {"signatures": f"signatures.{build}.npy", "family": f"minhash.family.{build}.npy"}
    # Incremental: rows of documents unchanged since the build these signatures came from are copied.
    origin = None
    if (
        stored
        and not rebuild
        and stored["params"] == params
        and shingle.get("previous_build") is not None
        and stored.get("built_from") == shingle["previous_build"]
    ):
        origin = np.asarray(loaded._array("shingle", "origin"))
    if use_pending:
        # The shingle workers computed the rows of the files they read; complete their file.
        tmp = pending.path
        out = np.load(tmp, mmap_mode="r+")
        have = pending.computed
    else:
        out, tmp = store.create_array(names["signatures"], np.uint32, (n, params["num_perm"]))
        have = np.zeros(n, dtype=bool)
    try:
        files = {names["family"]: store.save_array(names["family"], hasher.family())}
        indptr = np.asarray(loaded.shingle_sets().indptr)
        new = np.ones(n, dtype=bool) if origin is None else origin < 0
        need = new & ~have
        if origin is not None:
            old = loaded.signatures()
            keep = np.flatnonzero(~new & ~have)
            for s0 in range(0, len(keep), 1 << 16):
                rows = keep[s0 : s0 + (1 << 16)]
                out[rows] = old[origin[rows]]
        tasks = [
            (str(store.path), ranges, str(tmp), params["num_perm"], params["seed"], params["scheme"])
            for ranges in _plan_signature_tasks(indptr, need)
        ]
        bar = _progress(int(need.sum()), "signature", progress)
        for done in _pool_map(_signature_task, tasks, jobs):
            bar.update(done)
        bar.close()
        files[names["signatures"]] = store.publish(tmp, names["signatures"], out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        spare(tmp, keep=False)
    loaded.manifest["stages"]["signature"] = {
        "params": params,
        "built_from": shingle["build_id"],
        "build_id": build,
        "roles": names,
        "files": files,
    }
    store.write_manifest(loaded.manifest)
    detail = f"{n} x {params['num_perm']} signature matrix"
    if origin is not None:
        detail += f" ({int(new.sum())} rows computed, {n - int(new.sum())} copied)"
    if use_pending:
        detail += ", computed while shingling"
    return StageResult("signature", True, time.perf_counter() - t0, detail)


# ---------------------------------------------------------------- index stage


def resolve_banding(
    stored: dict | None,
    num_perm: int,
    threshold: float | None,
    bands: int | None,
    rows: int | None,
    recall: float = DEFAULT_RECALL,
) -> dict:
    """The banding parameters to use, from what was asked and what the index holds."""
    if (bands is None) != (rows is None):
        raise UsageError("--bands and --rows go together: give both, or neither and let --threshold choose")
    if threshold is not None:
        check_threshold(threshold)
    if bands is not None:
        check_bands_rows(bands, rows, num_perm)
        t = threshold if threshold is not None else (1.0 / bands) ** (1.0 / rows)
        return {"bands": bands, "rows": rows, "threshold": round(t, 6), "explicit": True}
    # A hand-chosen banding stays until a different threshold is asked for: `--threshold`
    # alone means "band for this threshold", whatever was chosen before.
    keep = threshold is None or (stored is not None and stored.get("explicit") and round(threshold, 6) == stored["threshold"])
    if stored is not None and keep:
        if stored["bands"] * stored["rows"] <= num_perm:
            return {k: stored[k] for k in ("bands", "rows", "threshold", "explicit")}
    t = threshold if threshold is not None else (stored or {}).get("threshold", DEFAULT_THRESHOLD)
    b, r = choose_bands_rows(t, num_perm, recall)
    return {"bands": b, "rows": r, "threshold": t, "explicit": False}


def build_index(index: str | os.PathLike, *, wait: float = 0.0, **options) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures (holding the writer lock).

    ``options``: threshold, bands, rows, bag_threshold (see :func:`_build_index`).
    Buckets the last published manifest shows up to date are left alone
    without taking the lock, so that a reader never waits for a writer.
    """
    loaded = open_index(index)
    scheduler = options.pop("scheduler", None)
    _check_jobs(options.get("jobs"))
    _, report, current = _index_plan(
        loaded, options.get("threshold"), options.get("bands"), options.get("rows"), options.get("bag_threshold")
    )
    if current:
        return StageResult("index", False, 0.0, "up to date"), report
    with loaded.store.writing(wait), using_scheduler(scheduler):
        return _build_index(index, **options)


def _index_plan(loaded: LoadedIndex, threshold, bands, rows, bag_threshold) -> tuple[dict, BandingReport, bool]:
    """The banding parameters asked for, their report, and whether the stored buckets already have them."""
    sig_stage = loaded.stage("signature")
    stored = loaded.manifest["stages"].get("index")
    params = resolve_banding(stored["params"] if stored else None, sig_stage["params"]["num_perm"], threshold, bands, rows)
    params["measure"] = "bag" if bag_threshold is not None else "set"
    if bag_threshold is not None:
        params["bag_threshold"] = bag_threshold
    report = BandingReport.of(params["bands"], params["rows"], params["threshold"])
    current = bool(stored) and stored["params"] == params and stored.get("built_from") == sig_stage["build_id"]
    return params, report, current


def _build_index(
    index: str | os.PathLike,
    *,
    threshold: float | None = None,
    bands: int | None = None,
    rows: int | None = None,
    bag_threshold: float | None = None,
    jobs: int | None = None,
) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures.

    ``bag_threshold`` records that the banding threshold was derived from a
    bag-Jaccard threshold, so that later set-Jaccard runs do not take it as
    the index's own threshold. ``jobs``: threads sorting the bands (default:
    all cores).
    """
    t0 = time.perf_counter()
    jobs = _check_jobs(jobs)
    loaded = open_index(index)
    sig_stage = loaded.stage("signature")
    stored = loaded.manifest["stages"].get("index")
    params, report, current = _index_plan(loaded, threshold, bands, rows, bag_threshold)
    if current:
        return StageResult("index", False, time.perf_counter() - t0, "up to date"), report
    # Exact copies are folded onto their first member: only representatives are banded.
    # The groups depend on the documents only, so re-banding for a new threshold reuses them.
    reuse_groups = stored and stored.get("built_from") == sig_stage["build_id"] and "groups" in stored.get("roles", {})
    build = _build_id(sig_stage["build_id"], params, __version__)
    names = {"bands": f"bands.{build}.npy", "buckets": f"buckets.{build}.npy", "groups": f"groups.{build}.npy"}
    if _DASK_CLIENT is not None:
        from simdoc.engines.dask import build_index_arrays

        stored_rep = np.asarray(loaded.representatives()) if reuse_groups else None
        files = build_index_arrays(
            _DASK_CLIENT, str(index), loaded.store, names, params["bands"], params["rows"], stored_rep
        )
    else:
        sigs = loaded.signatures()
        sets = loaded.shingle_sets()
        keys = band_keys(sigs, params["bands"], params["rows"])
        nonempty = np.diff(sets.indptr) > 0
        if reuse_groups:
            rep = np.asarray(loaded.representatives())
            order = bucket_order(keys, nonempty & (rep == np.arange(len(rep))), threads=jobs)
        else:
            rep, order = _copies_and_buckets(sets, sigs, keys, nonempty, jobs, loaded.same_text())
        files = {names["bands"]: loaded.store.save_array(names["bands"], keys)}
        files[names["buckets"]] = loaded.store.save_array(names["buckets"], order)
        files[names["groups"]] = loaded.store.save_array(names["groups"], rep)
    loaded.manifest["stages"]["index"] = {
        "params": params,
        "built_from": sig_stage["build_id"],
        "build_id": build,
        "roles": names,
        "files": files,
    }
    loaded.store.write_manifest(loaded.manifest)
    return StageResult("index", True, time.perf_counter() - t0, report.describe()), report


def _copies_and_buckets(
    sets: ShingleSets, sigs: np.ndarray, keys: np.ndarray, nonempty: np.ndarray, jobs: int, same_text=None
) -> tuple[np.ndarray, np.ndarray]:
    """The exact-copy groups, and the bucket order of their representatives, found at once.

    Finding copies reads the candidates' rows, which in a large index come
    from disk: at 10^6 documents ~3.6 s (~2.1 s when ``same_text`` spares
    the byte-identical ones), most of it waiting on reads. Meanwhile the
    bands of every non-empty document are sorted (~0.7 s); the copies are
    then dropped from the sorted bands, which gives the same order as
    sorting the representatives alone.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="simdoc-copies") as pool:
        copies = pool.submit(representatives, sets, sigs, same_text)
        order = bucket_order(keys, nonempty, threads=jobs)
        rep = copies.result()
    return rep, keep_in_buckets(order, rep == np.arange(len(rep)))


# ---------------------------------------------------------------- pairs


def _banding_threshold(threshold: float, measure: str) -> float:
    # A bag Jaccard of t corresponds to a set Jaccard of t/(1-t) when no shingle repeats.
    return min(threshold / (1.0 - threshold), 1.0) if measure == "bag" else threshold


def find_pairs(
    corpus: str | os.PathLike | list | None = None,
    index: str | os.PathLike | None = None,
    *,
    threshold: float | None = None,
    measure: str = "set",
    verify: bool = True,
    all_candidates: bool = False,
    unit: str | None = None,
    k: int | None = None,
    lowercase: bool | None = None,
    num_perm: int | None = None,
    seed: int | None = None,
    scheme: str | None = None,
    bands: int | None = None,
    rows: int | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    new_only: bool = False,
    max_bytes: int | None = None,
    follow_symlinks: bool | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    scheduler: str | None = None,
) -> PairsResult:
    """Near-duplicate pairs of a corpus, building or refreshing its index first.

    With ``corpus``, every stage that is missing or out of date is (re)built;
    without it, the index is used as it is (missing signature or index stages
    are still built, as they need only the index). ``new_only`` keeps the
    pairs with a document that the latest shingle update added or changed.
    """
    t0 = time.perf_counter()
    if measure not in MEASURES:
        raise UsageError(f"--measure must be one of {', '.join(MEASURES)}, got {measure!r}")
    if threshold is not None:
        check_threshold(threshold)
        if measure == "bag" and threshold > 0.5:
            raise UsageError(
                f"bag Jaccard is at most 0.5 (identical bags), so --threshold {threshold} can never be met",
                hint="use a threshold in (0, 0.5] with --measure bag",
            )
    if corpus is None and index is None:
        raise UsageError("give a CORPUS, an --index, or both")
    index = Path(index) if index is not None else default_index_path(corpus)
    if corpus is None:
        open_index(index)  # fail before creating anything
    with using_scheduler(scheduler):
        return _find_pairs(
            corpus, index, t0, threshold, measure, verify, all_candidates, unit, k, lowercase, num_perm, seed, scheme,
            bands, rows, jobs, rebuild, progress, wait, new_only, max_bytes, follow_symlinks, include, exclude,
            text_field, id_field,
        )


def _find_pairs(
    corpus, index, t0, threshold, measure, verify, all_candidates, unit, k, lowercase, num_perm, seed, scheme,
    bands, rows, jobs, rebuild, progress, wait, new_only, max_bytes, follow_symlinks, include, exclude,
    text_field, id_field,
) -> PairsResult:
    # With a corpus this run writes; without one it reads, and takes the writer's lock only
    # for a stage it must build (see build_signatures and build_index).
    with IndexStore(index).writing(wait) if corpus is not None else contextlib.nullcontext():
        reading = {
            "max_bytes": max_bytes,
            "follow_symlinks": follow_symlinks,
            "include": sorted(set(include)) if include else None,
            "exclude": sorted(set(exclude)) if exclude else None,
            "text_field": text_field,
            "id_field": id_field,
        }
        stages, t, report = _refresh_for_pairs(
            corpus, index, threshold, measure, unit, k, lowercase, num_perm, seed, scheme, bands, rows, jobs, rebuild,
            progress, reading, wait,
        )
    store = IndexStore(index)
    with store.reading():
        loaded = open_index(index)
        if new_only:
            doc_ids, flags = loaded.doc_columns(["id", "changed"])
            changed = np.array(flags, dtype=bool)
        else:
            doc_ids, changed = loaded.doc_ids(), None
        if _DASK_CLIENT is not None:
            from simdoc.engines import dask as dask_engine

            left, right, est, jac, n_cand, stats = dask_engine.score_candidates(
                _DASK_CLIENT, str(index), t, measure, verify, all_candidates, changed
            )
        else:
            left, right, est, jac, n_cand, stats = score_candidates(
                loaded, t, measure, verify, all_candidates, changed, _check_jobs(jobs)
            )
        shingle = loaded.stage("shingle")
        groups = groups_of(loaded.representatives())
    result = PairsResult(
        doc_ids,
        left,
        right,
        est,
        jac,
        t,
        measure,
        n_cand,
        stats,
        stages,
        report,
        all_candidates=all_candidates,
        n_docs=shingle["n_docs"],
        n_skipped=len(shingle.get("skipped", [])),
        seconds=time.perf_counter() - t0,
        changed=changed,
        groups=groups,
        group_value=(1.0, (0.5 if measure == "bag" else 1.0) if verify else None),
    )
    # Pairs of exact copies were candidates too (they share every bucket).
    result.n_candidates += result.n_group_pairs()
    return result


def _refresh_for_pairs(
    corpus, index, threshold, measure, unit, k, lowercase, num_perm, seed, scheme, bands, rows, jobs, rebuild, progress,
    reading, wait=0.0,
):
    """Run the stages find_pairs needs; returns (stage results, threshold, banding report)."""
    stages: list[StageResult] = []
    pending = None
    if corpus is not None:
        # The signature parameters are settled first, so that the shingle workers can
        # compute the signatures of what they read (a parameter mismatch fails here, early).
        manifest = IndexStore(index).read_manifest(discard_damaged=rebuild)
        stored_sig = None if rebuild else manifest["stages"].get("signature")
        sig = _signature_params(stored_sig, num_perm, seed, scheme, index, rebuild)
        stages.append(
            build_shingles(
                corpus, index, unit=unit, k=k, lowercase=lowercase, jobs=jobs, rebuild=rebuild, progress=progress,
                signer=(sig["num_perm"], sig["seed"], sig["scheme"]), **reading
            )
        )
        pending = stages[-1].pending
    else:
        loaded = open_index(index)
        asked = {"unit": unit, "k": k, "lowercase": lowercase, **reading}
        _mismatch("shingle", loaded.stage("shingle")["params"], asked, index, False)
    try:
        stages.append(
            build_signatures(
                index, num_perm=num_perm, seed=seed, scheme=scheme, jobs=jobs, rebuild=rebuild, progress=progress,
                pending=pending, wait=wait,
            )
        )
    except BaseException:
        if pending is not None and pending.path.exists():
            pending.discard()
        raise
    loaded = open_index(index)
    stored = (loaded.manifest["stages"].get("index") or {}).get("params", {})
    t = threshold
    if t is None and stored.get("measure", "set") == measure:
        t = stored.get("bag_threshold") if measure == "bag" else stored.get("threshold")
    if t is None:
        t = DEFAULT_THRESHOLD if measure == "set" else DEFAULT_BAG_THRESHOLD
    # Re-band when the threshold or the measure differs from what the buckets were built for.
    same = threshold is None and stored.get("measure", "set") == measure
    band_t = None if same else _banding_threshold(t, measure)
    result, report = build_index(
        index, threshold=band_t, bands=bands, rows=rows, bag_threshold=t if measure == "bag" else None, jobs=jobs,
        wait=wait,
    )
    stages.append(result)
    return stages, t, report


def iter_warnings(results: Iterable[StageResult]) -> Iterator[str]:
    for r in results:
        yield from r.warnings

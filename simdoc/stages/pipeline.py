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
from pathlib import Path

import numpy as np
from tqdm import tqdm

from simdoc.corpus.formats import MEMBER_IDS
from simdoc.corpus.read import MEMBER_WAYS, identity
from simdoc.corpus.walk import FileEntry, discover_sources, resolve_sources
from simdoc.errors import CorpusError, IndexError_, ParameterMismatch, UsageError
from simdoc.exact import groups_of, key_halves, representatives
from simdoc.lsh import (
    DEFAULT_RECALL,
    DEFAULT_THRESHOLD,
    BandingReport,
    band_keys,
    bucket_order,
    check_bands_rows,
    check_threshold,
    choose_bands_rows,
)
from simdoc.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, MinHasher
from simdoc.shingling import ShingleSets, ShingleSpec
from simdoc.similarity import MEASURES
from simdoc.stages.results import PairsResult, StageResult, Verifier, score_candidates
from simdoc.stages.scan import BatchResult, ScanTask, scan_batch
from simdoc.store.cache import cached_index_path
from simdoc.store.directory import IndexStore, crc32
from simdoc.store.doctable import DocRow, DocsTable, TableBuilder
from simdoc.store.loaded import LoadedIndex, open_index
from simdoc.store.verified import VerifiedPairs
from simdoc.version import __version__
from simdoc.wording import count

log = logging.getLogger("simdoc")

BATCH_BYTES = 4 << 20  # text per shingling task
BATCH_DOCS = 2000
SIGNATURE_TASK_DOCS = 4096  # rows of stored shingle sets signed per task (simdoc signature)
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
    return cached_index_path(corpus)


def _name(corpus) -> str:
    return os.fspath(corpus) if isinstance(corpus, (str, os.PathLike)) else " ".join(map(os.fspath, corpus))


def _build_id(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


_DASK_CLIENT = None  # set while a stage runs on a Dask cluster (see using_scheduler)


@contextlib.contextmanager
def using_scheduler(scheduler: str | None, wait_workers: float | None = None, index=None, corpus=None, needs_corpus=True):
    """Run the stages inside on a Dask cluster (host:port or local[N]); None: this machine.

    The workers are checked first against the index and corpus paths (see
    simdoc.engines.dask.check_contract), waiting up to ``wait_workers`` s for one.
    """
    global _DASK_CLIENT
    scheduler = scheduler or os.environ.get("SIMDOC_SCHEDULER") or None
    if scheduler is None or _DASK_CLIENT is not None:
        yield
        return
    from simdoc.engines.dask import connect

    with connect(scheduler, wait_workers, index, corpus, needs_corpus) as client:
        _DASK_CLIENT = client
        try:
            yield
        finally:
            _DASK_CLIENT = None


def _pool_context():
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def _pool_map(func: Callable, tasks: Iterable, jobs: int) -> Iterator:
    """Results of func over tasks, in task order, on ``jobs`` processes (1: in this process).

    ``tasks`` may be a generator: the pool's feeder thread draws from it as
    workers take tasks, so tasks can be made while the first ones run.
    """
    if _DASK_CLIENT is not None:
        from simdoc.engines.dask import map_ordered

        yield from map_ordered(_DASK_CLIENT, func, tasks)  # a bounded stream, as the pool's feeder
        return
    tasks = iter(tasks)
    head = list(itertools.islice(tasks, max(jobs, 1)))  # fewer than jobs: that is all of them
    if jobs <= 1 or len(head) <= 1:
        for task in itertools.chain(head, tasks):
            yield func(task)
        return
    from simdoc.kernels import warm_up

    warm_up()  # compiled once here; forked workers inherit the machine code
    with _pool_context().Pool(len(head)) as pool:
        yield from pool.imap(func, itertools.chain(head, tasks), chunksize=1)


def _progress(total: int | None, desc: str, enabled: bool, unit: str = " docs") -> tqdm:
    """A bar on stderr; with a total it shows the share done and the time left. No work, no bar."""
    return tqdm(
        total=total, desc=desc, unit=unit, disable=not enabled or total == 0, file=sys.stderr, leave=False, dynamic_ncols=True
    )


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


# ---------------------------------------------------------------- shingle stage (and signatures, fused)


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
    scheduler, wait_workers = options.pop("scheduler", None), options.pop("wait_workers", None)
    with IndexStore(index).writing(wait), using_scheduler(scheduler, wait_workers, index, corpus), _collector_paused():
        return _build_shingles(corpus, index, **options)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for a stage that only makes acyclic objects.

    The shingle stage keeps a few objects per document alive until its end;
    each collection would walk all of them again. Nothing it makes holds a cycle.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _SignatureRows:
    """The next signature matrix, in document order: rows kept from the current one, and new rows."""

    def __init__(self, store: IndexStore, num_perm: int, old: np.ndarray | None) -> None:
        self.writer = store.array_writer("signatures.tmp.npy", np.uint32, (num_perm,))
        self.old = old
        self.pending: list[int] = []

    def keep(self, j: int) -> None:
        self.pending.append(j)

    def add(self, rows: np.ndarray) -> None:
        self.flush()
        self.writer.append(rows)

    def flush(self) -> None:
        for s in range(0, len(self.pending), 1 << 16):
            idx = np.asarray(self.pending[s : s + (1 << 16)], dtype=np.int64)
            self.writer.append(np.asarray(self.old[idx]))
        self.pending.clear()


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
    force_read: set[str] | None = None,
    before_publish: Callable[[LoadedIndex], None] | None = None,
) -> StageResult:
    """Read new and changed files; keep the rows of unchanged ones.

    With ``signer`` (num_perm, seed, scheme) this is ``simdoc pairs``'s fused
    stage: every document read gets its MinHash row and no shingle sets are
    stored; the docs table and the signatures are published together, by one
    manifest. Without it, ``simdoc shingle`` on its own: the sorted shingle
    sets are stored (every file is read again), for ``simdoc signature``.

    A file is unchanged if its size and mtime are those recorded and it was
    not racily clean (modified within RACY_NS of the previous scan). Any
    other file is read; if its bytes still have the digest recorded, its rows
    are kept (only its size and time are updated), as git does with an entry
    whose content hash matches. ``force_read``: ids to read whatever they say.
    ``before_publish`` may add later stages to the manifest (given as a
    LoadedIndex of the new build) before it is published, so that they are
    published together.
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
    keep_sets = signer is None
    stored_sig = manifest["stages"].get("signature")
    sig_params = None
    if signer is not None:
        sig_params = {"num_perm": signer[0], "seed": signer[1], "scheme": signer[2]}
    # Rows can be kept from the current build only if they describe the same thing.
    reuse = (
        bool(stored) and not rebuild and not changed_params and stored["params"] == params and not keep_sets
        and stored_sig is not None and stored_sig["params"] == sig_params and stored_sig.get("built_from") == stored.get("build_id")
    )
    _, entries, skipped = discover_sources(
        corpus,
        exclude=[index],
        follow_symlinks=reading["follow_symlinks"],
        include_globs=tuple(reading["include"]),
        exclude_globs=tuple(reading["exclude"]),
    )
    entries = list(entries)
    if not entries:
        raise CorpusError(
            f"corpus {_name(corpus)} has no documents" + (f" ({count(len(skipped), 'path')} passed over)" if skipped else ""),
            hint="point simdoc at a folder that holds text files (hidden files are ignored)",
        )
    scan_id = _build_id(_scan_signature(entries, skipped))
    scanned_at = time.time_ns()
    old: DocsTable | None = None
    old_rows: dict[str, list[int]] = {}  # file id -> its rows in the current table (members: several)
    racy_after = 0
    if stored and not rebuild and not changed_params and stored["params"] == params:
        racy_after = int(stored.get("scanned_at_ns", 0)) - RACY_NS
        loaded = LoadedIndex(store, manifest)
        old = loaded.docs()
        for j, (doc_id, src) in enumerate(zip(old.ids, old.sources)):
            old_rows.setdefault(src or doc_id, []).append(j)
    racy = [e for e in entries if e.id in old_rows and e.mtime_ns >= racy_after]
    same_build = (
        reuse or (keep_sets and stored is not None and stored.get("params") == params and "indptr" in stored.get("roles", {}))
    )
    # The whole scan looks as before and no file was racily clean: nothing to read.
    if same_build and stored.get("scan_id") == scan_id and not racy and not force_read:
        return StageResult("shingle", False, time.perf_counter() - t0, "up to date")
    old_sigs = LoadedIndex(store, manifest).signatures() if reuse else None
    force_read = force_read or set()
    plan: list[tuple[FileEntry, bytes | None, bool]] = []  # (entry, digest indexed, keep without reading)
    for e in entries:
        rows = old_rows.get(e.id) if reuse else None
        if rows is None:
            plan.append((e, None, False))
            continue
        j = rows[0]
        unchanged = (
            int(old.file_size[j]) == e.size and int(old.mtime_ns[j]) == e.mtime_ns and e.mtime_ns < racy_after
            and e.id not in force_read and not any(old.ids[r] in force_read for r in rows)
        )
        plan.append((e, None if e.id in force_read else bytes(old.file_digest[j]), unchanged))
    store.ensure_dir()
    generation = int(manifest.get("generation", 0)) + 1
    builder = TableBuilder(old)
    num_perm = signer[0] if signer else DEFAULT_NUM_PERM
    sig_rows = _SignatureRows(store, num_perm, old_sigs) if signer is not None else None
    sets_parts: list[ShingleSets] = []
    old_pos = {doc_id: j for j, doc_id in enumerate(old.ids)} if old is not None else {}
    warnings = [f"{s.id}: {s.reason}" for s in skipped]
    not_docs: list[dict] = [{"id": s.id, "reason": s.reason} for s in skipped]
    n_read = n_changed = n_kept_old = 0

    def make_tasks() -> Iterator[ScanTask]:
        to_read = (e for e, _, keep in plan if not keep)
        digests = {e.id: d for e, d, keep in plan if not keep}
        for b in _batches(to_read):
            files = [(e.id, e.path, e.size, digests[e.id]) for e in b]
            yield ScanTask(
                files, spec, reading["max_bytes"], reading["follow_symlinks"],
                (reading["text_field"], reading["id_field"]), signer or (1, DEFAULT_SEED, "oph"), keep_sets,
            )

    def keep_rows(e: FileEntry, stat: tuple[int, int] | None) -> None:
        nonlocal n_kept_old
        for j in old_rows[e.id]:
            builder.add_old(j, stat)
            if sig_rows is not None:
                sig_rows.keep(j)
            n_kept_old += 1

    results = _pool_map(scan_batch, make_tasks(), jobs)
    bar = _progress(len(entries), "shingle", progress, unit="file")
    try:
        batch: BatchResult | None = None
        at_file = at_doc = 0
        for e, _, keep in plan:
            if keep:
                keep_rows(e, None)
                bar.update(1)
                continue
            if batch is None or at_file == len(batch.files):
                batch = next(results)
                at_file = at_doc = 0
            outcome = batch.files[at_file]
            at_file += 1
            n_read += 1
            if outcome.warning:
                warnings.append(f"{e.id}: {outcome.warning}")
            if outcome.unchanged:
                keep_rows(e, (e.size, e.mtime_ns))
            elif outcome.how in MEMBER_WAYS or outcome.status not in ("binary", "unreadable"):
                if outcome.how in MEMBER_WAYS and outcome.n_docs == 0:
                    not_docs.append({"id": e.id, "reason": outcome.warning or "no documents in this file"})
                for d in batch.docs[at_doc : at_doc + outcome.n_docs]:
                    j = old_pos.get(d.id, -1)
                    same = j >= 0 and bytes(old.digest[j]) == d.digest
                    n_changed += not same
                    n_kept_old += j >= 0
                    builder.add_new(DocRow(
                        d.id, d.source, d.offset, d.length, d.size, e.size, e.mtime_ns, d.digest, outcome.file_digest,
                        d.how, d.status, d.n_shingles, int(old.added[j]) if same else generation,
                        identity(d.digest, d.how, d.id),
                    ))
                if sig_rows is not None and outcome.n_docs:
                    sig_rows.add(batch.signatures[at_doc : at_doc + outcome.n_docs])
                if keep_sets and outcome.n_docs:
                    sets_parts.append(batch.sets.slice(at_doc, at_doc + outcome.n_docs))
                at_doc += outcome.n_docs
            else:
                not_docs.append({"id": e.id, "reason": outcome.warning})
            bar.update(1)
        bar.close()
        nothing_new = (
            same_build and stored.get("scan_id") == scan_id and n_changed == 0 and len(builder) == len(old_pos) == n_kept_old
        )
        if nothing_new:
            # Only racily clean files were read, and their bytes are the ones indexed.
            if sig_rows is not None:
                sig_rows.writer.abort()
            return StageResult("shingle", False, time.perf_counter() - t0, f"up to date ({n_read} racily clean files re-read)", warnings)
        if not len(builder):
            err = CorpusError(
                f"corpus {_name(corpus)} has no readable documents ({count(len(not_docs), 'file skipped')})",
                hint="see the warnings above for why each file was skipped",
            )
            err.warnings = warnings
            raise err
        table = builder.finish()
        build = _build_id(scan_id, params, __version__, generation)
        roles: dict[str, str] = {}
        files: dict[str, dict] = {}
        for role, arr in table.arrays().items():
            roles[role] = f"{role}.{build}.npy"
            files[roles[role]] = store.save_array(roles[role], arr)
        if keep_sets:
            sets = ShingleSets.concatenate(sets_parts)
            for role, arr in (("indptr", sets.indptr), ("data", sets.data), ("counts", sets.counts)):
                roles[role] = f"shingles.{role}.{build}.npy"
                files[roles[role]] = store.save_array(roles[role], np.ascontiguousarray(arr))
        sig_stage = None
        if sig_rows is not None:
            sig_rows.flush()
            hasher = MinHasher(*signer[:2], scheme=signer[2])
            sig_build = _build_id(build, sig_params, __version__)
            sig_names = {"signatures": f"signatures.{sig_build}.npy", "family": f"minhash.family.{sig_build}.npy"}
            sig_rows.writer.name = sig_names["signatures"]
            sig_files = {sig_names["signatures"]: sig_rows.writer.finish()}
            sig_files[sig_names["family"]] = store.save_array(sig_names["family"], hasher.family())
            sig_stage = {"params": sig_params, "built_from": build, "build_id": sig_build, "roles": sig_names, "files": sig_files}
    except BaseException:
        if sig_rows is not None:
            sig_rows.writer.abort()
        raise
    n_docs = len(table)
    n_empty = int(np.count_nonzero(table.n_shingles == 0))
    manifest["stages"]["shingle"] = {
        "params": params,
        "corpus": corpus_abs,
        "scan_id": scan_id,
        "scanned_at_ns": scanned_at,
        "build_id": build,
        "n_docs": n_docs,
        "n_empty": n_empty,
        "n_changed": n_changed,
        "n_removed": len(old_pos) - n_kept_old,
        "skipped": not_docs,
        "roles": roles,
        "files": files,
    }
    if sig_stage is not None:
        manifest["stages"]["signature"] = sig_stage
    manifest["generation"] = generation
    manifest["simdoc_version"] = __version__
    if before_publish is not None:
        before_publish(LoadedIndex(store, manifest, table))
    store.write_manifest(manifest)
    detail = f"{n_docs} documents"
    if old is not None:
        detail += f"; read {n_read} files, {n_changed} new or changed, {manifest['stages']['shingle']['n_removed']} removed"
    if n_empty:
        detail += f", {n_empty} with no shingles (never candidates)"
    if not_docs:
        detail += f", {len(not_docs)} files skipped"
    if sig_stage is not None:
        detail += f"; {n_docs} x {num_perm} signatures"
    return StageResult("shingle", True, time.perf_counter() - t0, detail, warnings)


# ---------------------------------------------------------------- signature stage


def _signature_task(task: tuple) -> np.ndarray:
    """Signatures of rows [a, b) of the stored shingle sets (worker process)."""
    index, a, b, num_perm, seed, scheme = task
    sets = open_index(index).shingle_sets().slice(a, b)
    return MinHasher(num_perm, seed, scheme=scheme).signatures(sets)


def build_signatures(index: str | os.PathLike, *, wait: float = 0.0, **options) -> StageResult:
    """Bring the signature stage up to date with the shingle stage (holding the writer lock).

    ``options``: num_perm, seed, scheme, jobs, rebuild, progress. A stage the
    last published manifest shows up to date is left alone without taking the
    lock, so that a reader never waits for a writer.
    """
    loaded = open_index(index)
    scheduler, wait_workers = options.pop("scheduler", None), options.pop("wait_workers", None)
    if not options.get("rebuild"):
        _check_jobs(options.get("jobs"))
        stored = loaded.manifest["stages"].get("signature")
        params = _signature_params(stored, options.get("num_perm"), options.get("seed"), options.get("scheme"), index, False)
        if stored and stored["params"] == params and stored.get("built_from") == loaded.stage("shingle")["build_id"]:
            return StageResult("signature", False, 0.0, "up to date")
    with loaded.store.writing(wait), using_scheduler(scheduler, wait_workers, index, needs_corpus=False):
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
) -> StageResult:
    t0 = time.perf_counter()
    jobs = _check_jobs(jobs)
    loaded = open_index(index)
    shingle = loaded.stage("shingle")
    stored = loaded.manifest["stages"].get("signature")
    params = _signature_params(stored, num_perm, seed, scheme, index, rebuild)
    if stored and stored["params"] == params and stored.get("built_from") == shingle["build_id"]:
        return StageResult("signature", False, time.perf_counter() - t0, "up to date")
    if not loaded.has_shingle_sets():
        raise IndexError_(
            f"the signatures of the index at {loaded.store.path} need computing again, and it keeps no shingle sets",
            hint="run `simdoc pairs CORPUS` with these options (it reads the documents), "
            "or `simdoc shingle CORPUS --index ...` first",
        )
    store = loaded.store
    hasher = MinHasher(params["num_perm"], params["seed"], scheme=params["scheme"])
    n = shingle["n_docs"]
    build = _build_id(shingle["build_id"], params, __version__)
    names = {"signatures": f"signatures.{build}.npy", "family": f"minhash.family.{build}.npy"}
    step = SIGNATURE_TASK_DOCS
    tasks = [(os.path.abspath(store.path), a, min(a + step, n), params["num_perm"], params["seed"], params["scheme"]) for a in range(0, n, step)]
    writer = store.array_writer(names["signatures"], np.uint32, (params["num_perm"],))
    try:
        bar = _progress(n, "signature", progress)
        for rows in _pool_map(_signature_task, tasks, jobs):
            writer.append(rows)
            bar.update(len(rows))
        bar.close()
        files = {names["signatures"]: writer.finish()}
        files[names["family"]] = store.save_array(names["family"], hasher.family())
    except BaseException:
        writer.abort()
        raise
    loaded.manifest["stages"]["signature"] = {
        "params": params,
        "built_from": shingle["build_id"],
        "build_id": build,
        "roles": names,
        "files": files,
    }
    store.write_manifest(loaded.manifest)
    return StageResult("signature", True, time.perf_counter() - t0, f"{n} x {params['num_perm']} signature matrix")


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
    options.pop("scheduler", None)  # banding is a few sorts: it runs here on every engine
    options.pop("wait_workers", None)
    _check_jobs(options.get("jobs"))
    # Signatures older than the shingles would be banded as if current: name the stage to run.
    loaded.check_built_from("signature")
    _, report, current = _index_plan(
        loaded, options.get("threshold"), options.get("bands"), options.get("rows"), options.get("bag_threshold")
    )
    if current:
        return StageResult("index", False, 0.0, "up to date"), report
    with loaded.store.writing(wait):
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
    bag-Jaccard threshold. ``jobs``: threads sorting the bands (default: all cores).
    """
    t0 = time.perf_counter()
    jobs = _check_jobs(jobs)
    loaded = open_index(index)
    loaded.check_built_from("signature")
    params, report, current = _index_plan(loaded, threshold, bands, rows, bag_threshold)
    if current:
        return StageResult("index", False, time.perf_counter() - t0, "up to date"), report
    result = _index_stage(loaded, params, report, jobs, t0)
    loaded.store.write_manifest(loaded.manifest)
    return result, report


def _index_stage(loaded: LoadedIndex, params: dict, report: BandingReport, jobs: int, t0: float) -> StageResult:
    """Band the signatures of ``loaded`` with ``params`` and put the index stage into its manifest (not published)."""
    sig_stage = loaded.stage("signature")
    build = _build_id(sig_stage["build_id"], params, __version__)
    names = {"bands": f"bands.{build}.npy", "buckets": f"buckets.{build}.npy", "groups": f"groups.{build}.npy"}
    docs = loaded.docs()
    sigs = loaded.signatures()
    keys = band_keys(sigs, params["bands"], params["rows"])
    # Exact copies are folded onto their first member: only representatives are banded.
    rep = representatives(docs.identities(), docs.n_shingles > 0)
    order = bucket_order(keys, (docs.n_shingles > 0) & (rep == np.arange(len(rep))), threads=jobs)
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
    return StageResult("index", True, time.perf_counter() - t0, report.describe())


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
    wait_workers: float | None = None,
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
    with using_scheduler(scheduler, wait_workers, index, corpus, needs_corpus=verify):
        return _find_pairs(
            corpus, index, t0, threshold, measure, verify, all_candidates, unit, k, lowercase, num_perm, seed, scheme,
            bands, rows, jobs, rebuild, progress, wait, new_only, max_bytes, follow_symlinks, include, exclude,
            text_field, id_field,
        )


MAX_REINDEX = 2  # times a run re-reads documents that changed while it verified them


def _find_pairs(
    corpus, index, t0, threshold, measure, verify, all_candidates, unit, k, lowercase, num_perm, seed, scheme,
    bands, rows, jobs, rebuild, progress, wait, new_only, max_bytes, follow_symlinks, include, exclude,
    text_field, id_field,
) -> PairsResult:
    store = IndexStore(index)
    reading = {
        "max_bytes": max_bytes,
        "follow_symlinks": follow_symlinks,
        "include": sorted(set(include)) if include else None,
        "exclude": sorted(set(exclude)) if exclude else None,
        "text_field": text_field,
        "id_field": id_field,
    }
    # A run given the corpus writes the index, and after scoring the pairs it verified: it
    # holds the writer lock throughout. Without a corpus the index is only read (missing
    # derived stages are still built, under the lock, by the stage functions).
    writer = store.writing(wait) if corpus is not None else contextlib.nullcontext()
    force: set[str] = set()
    with writer:
        for attempt in range(MAX_REINDEX + 1):
            stages, t, report = _refresh_for_pairs(
                corpus, index, threshold, measure, unit, k, lowercase, num_perm, seed, scheme, bands, rows, jobs,
                rebuild and attempt == 0, progress, reading, force, wait,
            )
            with store.reading():
                loaded = open_index(index)
                loaded.check_built_from("signature", "index")
                docs = loaded.docs()
                reported = int(loaded.manifest.get("reported_generation", 0))
                changed = docs.added > reported if new_only else None
                verifier = Verifier.of_index(loaded) if verify else None
                t_score = time.perf_counter()
                if _DASK_CLIENT is not None:
                    from simdoc.stages import cluster_pairs

                    left, right, est, jac, n_cand, stats = cluster_pairs.score_candidates(
                        _DASK_CLIENT, str(index), t, measure, verify, all_candidates, changed, verifier
                    )
                else:
                    left, right, est, jac, n_cand, stats = score_candidates(
                        loaded, t, measure, verify, all_candidates, changed, _check_jobs(jobs), verifier
                    )
                shingle = loaded.stage("shingle")
                groups = groups_of(loaded.representatives())
            stale = verifier.stale if verifier is not None else set()
            if stale and corpus is not None and attempt < MAX_REINDEX:
                # Changed between indexing and verification: index them again, then score again.
                force = {docs.sources[d] or docs.ids[d] for d in stale}
                continue
            break
        if verifier is not None:
            stages.append(_verify_result(verifier, docs, time.perf_counter() - t_score))
            if corpus is not None and verifier.table.grew:
                _save_verified(store, verifier.table, docs)
    result = PairsResult(
        docs.ids,
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
    result.generation = int(loaded.manifest.get("generation", 0))
    result.index = index
    # Pairs of exact copies were candidates too (they share every bucket).
    result.n_candidates += result.n_group_pairs()
    return result


def _verify_result(verifier: Verifier, docs: DocsTable, seconds: float) -> StageResult:
    warnings = [
        f"{docs.ids[d]}: changed since it was indexed; its pairs are left out (run `simdoc pairs CORPUS` to index it again)"
        for d in sorted(verifier.stale)
    ]
    warnings += [f"{docs.ids[d]}: could not be read again; its pairs are left out" for d in sorted(verifier.gone)]
    detail = f"{verifier.n_verified} pairs verified from the documents, {verifier.n_cached} from the verified-pairs table"
    return StageResult("verify", verifier.n_verified > 0, seconds, detail, warnings)


def _save_verified(store: IndexStore, table: VerifiedPairs, docs: DocsTable) -> None:
    """Publish the verified-pairs table, keeping only pairs of texts the corpus still holds."""
    manifest = store.read_manifest()
    shingle = manifest["stages"]["shingle"]
    present_hi = key_halves(docs.identities())[0]
    keys, jac = table.merged(present_hi)
    build = _build_id(shingle["build_id"], len(keys), crc32(keys.tobytes()), crc32(jac.tobytes()))
    names = {"keys": f"verified.keys.{build}.npy", "jaccard": f"verified.jaccard.{build}.npy"}
    files = {names["keys"]: store.save_array(names["keys"], keys), names["jaccard"]: store.save_array(names["jaccard"], jac)}
    manifest["stages"]["verified"] = {"params": shingle["params"], "built_from": shingle["build_id"], "roles": names, "files": files}
    store.write_manifest(manifest)


def mark_reported(index: str | os.PathLike, generation: int, wait: float = 0.0) -> None:
    """Record that a ``--new`` report of the index's update ``generation`` was written in full.

    The next ``--new`` run reports the documents added after it: none when
    nothing changed, and those of a run killed before its report completed.
    """
    store = IndexStore(index)
    with store.writing(wait):
        manifest = store.read_manifest()
        if int(manifest.get("reported_generation", 0)) < generation <= int(manifest.get("generation", 0)):
            manifest["reported_generation"] = generation
            store.write_manifest(manifest)


def _refresh_for_pairs(
    corpus, index, threshold, measure, unit, k, lowercase, num_perm, seed, scheme, bands, rows, jobs, rebuild, progress,
    reading, force_read=None, wait=0.0,
):
    """Run the stages find_pairs needs; returns (stage results, threshold, banding report)."""
    stages: list[StageResult] = []
    # A run without --threshold uses the documented default, never the last run's threshold.
    t = threshold if threshold is not None else (DEFAULT_THRESHOLD if measure == "set" else DEFAULT_BAG_THRESHOLD)
    bag_t = t if measure == "bag" else None

    def band_threshold(loaded: LoadedIndex) -> float | None:
        # A banding chosen by hand (--bands/--rows) stays until a run asks for a threshold.
        stored = (loaded.manifest["stages"].get("index") or {}).get("params", {})
        keep_hand_banding = threshold is None and stored.get("explicit") and stored.get("measure", "set") == measure
        return None if keep_hand_banding else _banding_threshold(t, measure)

    banded: list[tuple[StageResult, BandingReport]] = []

    def band_new_build(loaded: LoadedIndex) -> None:
        # The buckets of the new documents go into the manifest that publishes them: a
        # reader (or a run killed in between) never finds new documents with old buckets.
        params, report, current = _index_plan(loaded, band_threshold(loaded), bands, rows, bag_t)
        if not current:
            banded.append((_index_stage(loaded, params, report, _check_jobs(jobs), time.perf_counter()), report))

    if corpus is not None:
        # The signature parameters are settled first, so that the shingle workers can
        # compute the signatures of what they read (a parameter mismatch fails here, early).
        manifest = IndexStore(index).read_manifest(discard_damaged=rebuild)
        stored_sig = None if rebuild else manifest["stages"].get("signature")
        sig = _signature_params(stored_sig, num_perm, seed, scheme, index, rebuild)
        stages.append(
            build_shingles(
                corpus, index, unit=unit, k=k, lowercase=lowercase, jobs=jobs, rebuild=rebuild, progress=progress,
                signer=(sig["num_perm"], sig["seed"], sig["scheme"]), force_read=force_read,
                before_publish=band_new_build, **reading
            )
        )
    else:
        loaded = open_index(index)
        asked = {"unit": unit, "k": k, "lowercase": lowercase, **reading}
        _mismatch("shingle", loaded.stage("shingle")["params"], asked, index, False)
    stages.append(
        build_signatures(index, num_perm=num_perm, seed=seed, scheme=scheme, jobs=jobs, progress=progress, wait=wait)
    )
    if banded:  # built with the shingles, published by the same manifest
        result, report = banded[0]
    else:
        result, report = build_index(
            index, threshold=band_threshold(open_index(index)), bands=bands, rows=rows, bag_threshold=bag_t, jobs=jobs,
            wait=wait,
        )
    stages.append(result)
    return stages, t, report



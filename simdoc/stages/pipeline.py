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
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from simdoc.corpus.formats import MEMBER_IDS
from simdoc.corpus.read import MEMBER_WAYS, identity
from simdoc.corpus.walk import FileEntry, discover_sources, resolve_sources
from simdoc.errors import CorpusError, IndexError_, ParameterMismatch, UsageError
from simdoc.engines import DaskEngine, Engine, open_engine
from simdoc.engines.local import LocalEngine
from simdoc.exact import groups_of, key_halves, representatives
from simdoc.lsh import DEFAULT_RECALL, BandingReport, band_keys, bucket_order, check_bands_rows, choose_bands_rows
from simdoc.minhash import MinHasher
from simdoc.params import DEFAULT_THRESHOLD, BandingParams, PairsParams, Params, ShingleParams, SignatureParams
from simdoc.shingling import ShingleSets
from simdoc.stages import cluster_pairs
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
RACY_NS = 2_000_000_000  # mtime granularity we do not trust (FAT has 2 s)


# ---------------------------------------------------------------- helpers


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


def _progress(total: int | None, desc: str, enabled: bool, unit: str = " docs") -> tqdm:
    """A bar on stderr; with a total it shows the share done and the time left. No work, no bar."""
    return tqdm(
        total=total, desc=desc, unit=unit, disable=not enabled or total == 0, file=sys.stderr, leave=False, dynamic_ncols=True
    )


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
    params: ShingleParams = ShingleParams(),
    *,
    signature: SignatureParams | None = None,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    force_read: set[str] | None = None,
    before_publish: Callable[[LoadedIndex], None] | None = None,
) -> StageResult:
    """Bring the shingle stage of ``index`` up to date with ``corpus`` (holding the writer lock).

    With ``signature`` (resolved parameters), the fused stage of `simdoc pairs`:
    see :func:`_build_shingles`, which also says what ``force_read`` and
    ``before_publish`` do. The files are read by the tasks of ``engine``
    (default: a LocalEngine on all cores). ``progress``: a bar on stderr.
    """
    index = Path(index) if index is not None else default_index_path(corpus)
    with IndexStore(index).writing(wait), _collector_paused():
        return _build_shingles(
            corpus, index, params, signer=signature, engine=engine or LocalEngine(), rebuild=rebuild, progress=progress,
            force_read=force_read, before_publish=before_publish,
        )


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


# `simdoc shingle` on its own stores shingle sets; the tasks' signatures, of length 1, go unused.
_NO_SIGNATURES = SignatureParams(1).resolved()


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
    index: Path,
    asked: ShingleParams,
    *,
    signer: SignatureParams | None,
    engine: Engine,
    rebuild: bool,
    progress: bool,
    force_read: set[str] | None,
    before_publish: Callable[[LoadedIndex], None] | None,
) -> StageResult:
    """Read new and changed files; keep the rows of unchanged ones.

    With ``signer`` (resolved signature parameters) this is ``simdoc pairs``'s fused
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
    store = IndexStore(index)
    manifest = store.read_manifest(discard_damaged=rebuild)
    if rebuild:
        manifest["stages"] = {}
    stored = manifest["stages"].get("shingle")
    corpus_abs = resolve_sources(corpus)[0]
    if stored and not rebuild and stored.get("corpus") != corpus_abs:
        raise IndexError_(
            f"the index at {index} was built for the corpus {stored.get('corpus')}, not {corpus_abs}",
            hint="pass --rebuild to rebuild it for this corpus, or choose another --index",
        )
    changed_params = stored is not None and _mismatch("shingle", stored["params"], asked.asked(), index, rebuild)
    shingle = asked.resolved(stored["params"] if (stored and not changed_params and not rebuild) else None)
    params = {**shingle.manifest(), "member_ids": MEMBER_IDS}
    keep_sets = signer is None
    stored_sig = manifest["stages"].get("signature")
    sig_params = signer.manifest() if signer is not None else None
    # Rows can be kept from the current build only if they describe the same thing.
    reuse = (
        bool(stored) and not rebuild and not changed_params and stored["params"] == params and not keep_sets
        and stored_sig is not None and stored_sig["params"] == sig_params and stored_sig.get("built_from") == stored.get("build_id")
    )
    _, entries, skipped = discover_sources(
        corpus,
        exclude=[index],
        follow_symlinks=shingle.follow_symlinks,
        include_globs=shingle.include or (),
        exclude_globs=shingle.exclude or (),
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
    sig_rows = _SignatureRows(store, signer.num_perm, old_sigs) if signer is not None else None
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
            yield ScanTask(files, shingle, signer or _NO_SIGNATURES, keep_sets)

    def keep_rows(e: FileEntry, stat: tuple[int, int] | None) -> None:
        nonlocal n_kept_old
        for j in old_rows[e.id]:
            builder.add_old(j, stat)
            if sig_rows is not None:
                sig_rows.keep(j)
            n_kept_old += 1

    results = engine.map(scan_batch, make_tasks())
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
            hasher = MinHasher(signer.num_perm, signer.seed, scheme=signer.scheme)
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
        detail += f"; {n_docs} x {signer.num_perm} signatures"
    return StageResult("shingle", True, time.perf_counter() - t0, detail, warnings)


# ---------------------------------------------------------------- signature stage


@dataclass(frozen=True)
class SignatureTask:
    """Rows [start, stop) of the stored shingle sets of the index at ``index`` (an absolute path), to sign."""

    index: str
    start: int
    stop: int
    signature: SignatureParams


def sign_rows(task: SignatureTask) -> np.ndarray:
    """Signatures of one task's rows (worker process)."""
    sets = open_index(task.index).shingle_sets().slice(task.start, task.stop)
    p = task.signature
    return MinHasher(p.num_perm, p.seed, scheme=p.scheme).signatures(sets)


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
    changed = stored is not None and _mismatch("signature", stored["params"], asked.asked(), Path(index), rebuild)
    return asked.resolved(stored["params"] if (stored and not changed and not rebuild) else None)


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
    hasher = MinHasher(params.num_perm, params.seed, scheme=params.scheme)
    n = shingle["n_docs"]
    build = _build_id(shingle["build_id"], params.manifest(), __version__)
    names = {"signatures": f"signatures.{build}.npy", "family": f"minhash.family.{build}.npy"}
    step = SIGNATURE_TASK_DOCS
    where = os.path.abspath(store.path)  # workers run in folders of their own
    tasks = [SignatureTask(where, a, min(a + step, n), params) for a in range(0, n, step)]
    writer = store.array_writer(names["signatures"], np.uint32, (params.num_perm,))
    try:
        bar = _progress(n, "signature", progress)
        for rows in engine.map(sign_rows, tasks):
            writer.append(rows)
            bar.update(len(rows))
        bar.close()
        files = {names["signatures"]: writer.finish()}
        files[names["family"]] = store.save_array(names["family"], hasher.family())
    except BaseException:
        writer.abort()
        raise
    loaded.manifest["stages"]["signature"] = {
        "params": params.manifest(),
        "built_from": shingle["build_id"],
        "build_id": build,
        "roles": names,
        "files": files,
    }
    store.write_manifest(loaded.manifest)
    return StageResult("signature", True, time.perf_counter() - t0, f"{n} x {params.num_perm} signature matrix")


# ---------------------------------------------------------------- index stage


def resolve_banding(
    stored: dict | None,
    num_perm: int,
    threshold: float | None,
    bands: int | None,
    rows: int | None,
    recall: float = DEFAULT_RECALL,
) -> dict:
    """The banding parameters to use, from what was asked (checked: see BandingParams) and what the index holds."""
    if bands is not None:
        check_bands_rows(bands, rows, num_perm)  # b*r against the signature length, which only the index knows
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


def build_index(
    index: str | os.PathLike,
    params: BandingParams = BandingParams(),
    *,
    pairs: PairsParams | None = None,
    engine: Engine | None = None,
    wait: float = 0.0,
) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures (holding the writer lock).

    With ``pairs``, banded for those pairs' threshold (see :func:`_index_plan`).
    Banding is a few sorts of the band keys: it runs in this process, on
    ``engine.jobs`` threads (default: all cores), whatever the engine.
    Buckets the last published manifest shows up to date are left alone
    without taking the lock, so that a reader never waits for a writer.
    """
    threads = (engine or LocalEngine()).jobs
    loaded = open_index(index)
    # Signatures older than the shingles would be banded as if current: name the stage to run.
    loaded.check_built_from("signature")
    _, report, current = _index_plan(loaded, params, pairs)
    if current:
        return StageResult("index", False, 0.0, "up to date"), report
    with loaded.store.writing(wait):
        return _build_index(index, params, pairs, threads)


def _index_plan(
    loaded: LoadedIndex, banding: BandingParams, pairs: PairsParams | None = None
) -> tuple[dict, BandingReport, bool]:
    """The banding parameters asked for, their report, and whether the stored buckets already have them.

    With ``pairs`` (a `simdoc pairs` run), the threshold is the pairs' (a bag
    threshold banded at its set equivalent), except that a banding chosen by
    hand (--bands/--rows) stays until a run asks for a threshold.
    """
    sig_stage = loaded.stage("signature")
    stored = loaded.manifest["stages"].get("index")
    held = stored["params"] if stored else None
    threshold, bag_threshold = banding.threshold, None
    if pairs is not None:
        hand = pairs.threshold is None and held and held.get("explicit") and held.get("measure", "set") == pairs.measure
        threshold = None if hand else pairs.banding_threshold
        bag_threshold = pairs.cut if pairs.measure == "bag" else None
    params = resolve_banding(held, sig_stage["params"]["num_perm"], threshold, banding.bands, banding.rows)
    params["measure"] = "bag" if bag_threshold is not None else "set"
    if bag_threshold is not None:
        params["bag_threshold"] = bag_threshold
    report = BandingReport.of(params["bands"], params["rows"], params["threshold"])
    current = bool(stored) and stored["params"] == params and stored.get("built_from") == sig_stage["build_id"]
    return params, report, current


def _build_index(
    index: str | os.PathLike, banding: BandingParams, pairs: PairsParams | None, threads: int
) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures (under the writer lock)."""
    t0 = time.perf_counter()
    loaded = open_index(index)
    loaded.check_built_from("signature")
    params, report, current = _index_plan(loaded, banding, pairs)
    if current:
        return StageResult("index", False, time.perf_counter() - t0, "up to date"), report
    result = _index_stage(loaded, params, report, threads, t0)
    loaded.store.write_manifest(loaded.manifest)
    return result, report


def _index_stage(loaded: LoadedIndex, params: dict, report: BandingReport, threads: int, t0: float) -> StageResult:
    """Band the signatures of ``loaded`` with ``params`` and put the index stage into its manifest (not published)."""
    sig_stage = loaded.stage("signature")
    build = _build_id(sig_stage["build_id"], params, __version__)
    names = {"bands": f"bands.{build}.npy", "buckets": f"buckets.{build}.npy", "groups": f"groups.{build}.npy"}
    docs = loaded.docs()
    sigs = loaded.signatures()
    keys = band_keys(sigs, params["bands"], params["rows"])
    # Exact copies are folded onto their first member: only representatives are banded.
    rep = representatives(docs.identities(), docs.n_shingles > 0)
    order = bucket_order(keys, (docs.n_shingles > 0) & (rep == np.arange(len(rep))), threads=threads)
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

    The keywords are the flags of `simdoc pairs` (see :mod:`simdoc.params`
    for what each means and its default). With ``corpus``, every stage that
    is missing or out of date is (re)built; without it, the index is used as
    it is (missing signature or index stages are still built, as they need
    only the index). ``new_only`` keeps the pairs with a document that the
    latest shingle update added or changed.
    """
    params = Params(
        shingle=ShingleParams(
            unit=unit, k=k, lowercase=lowercase, max_bytes=max_bytes, follow_symlinks=follow_symlinks,
            include=include, exclude=exclude, text_field=text_field, id_field=id_field,
        ),
        signature=SignatureParams(num_perm=num_perm, seed=seed, scheme=scheme),
        banding=BandingParams(bands=bands, rows=rows),
        pairs=PairsParams(threshold=threshold, measure=measure, verify=verify, all_candidates=all_candidates, new_only=new_only),
    )
    index = pairs_index(corpus, index)
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus, needs_corpus=verify) as engine:
        return run_pairs(corpus, index, params, engine=engine, rebuild=rebuild, progress=progress, wait=wait)


def pairs_index(corpus: str | os.PathLike | list | None, index: str | os.PathLike | None) -> Path:
    """The index a pairs run uses: ``index``, else the corpus's default one.

    Without a corpus it must be there: checked before anything is made or
    a cluster is connected to.
    """
    if corpus is None and index is None:
        raise UsageError("give a CORPUS, an --index, or both")
    index = Path(index) if index is not None else default_index_path(corpus)
    if corpus is None:
        open_index(index)
    return index


MAX_REINDEX = 2  # times a run re-reads documents that changed while it verified them


def run_pairs(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike | None,
    params: Params,
    *,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
) -> PairsResult:
    """:func:`find_pairs` with the parameters made (and so checked) already, on ``engine``
    (default: a LocalEngine on all cores)."""
    t0 = time.perf_counter()
    index = pairs_index(corpus, index)
    engine = engine or LocalEngine()
    store = IndexStore(index)
    want = params.pairs
    # A run given the corpus writes the index, and after scoring the pairs it verified: it
    # holds the writer lock throughout. Without a corpus the index is only read (missing
    # derived stages are still built, under the lock, by the stage functions).
    writer = store.writing(wait) if corpus is not None else contextlib.nullcontext()
    force: set[str] = set()
    with writer:
        for attempt in range(MAX_REINDEX + 1):
            stages, report = _refresh_for_pairs(
                corpus, index, params, engine=engine, rebuild=rebuild and attempt == 0, progress=progress,
                force_read=force, wait=wait,
            )
            with store.reading():
                loaded = open_index(index)
                loaded.check_built_from("signature", "index")
                docs = loaded.docs()
                reported = int(loaded.manifest.get("reported_generation", 0))
                changed = docs.added > reported if want.new_only else None
                verifier = Verifier.of_index(loaded) if want.verify else None
                t_score = time.perf_counter()
                if isinstance(engine, DaskEngine):
                    left, right, est, jac, n_cand, stats = cluster_pairs.score_candidates(
                        engine.client, str(index), want.cut, want.measure, want.verify, want.all_candidates, changed
                    )
                else:
                    left, right, est, jac, n_cand, stats = score_candidates(
                        loaded, want.cut, want.measure, want.verify, want.all_candidates, changed, engine.jobs, verifier
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
        want.cut,
        want.measure,
        n_cand,
        stats,
        stages,
        report,
        all_candidates=want.all_candidates,
        n_docs=shingle["n_docs"],
        n_skipped=len(shingle.get("skipped", [])),
        seconds=time.perf_counter() - t0,
        changed=changed,
        groups=groups,
        group_value=(1.0, (0.5 if want.measure == "bag" else 1.0) if want.verify else None),
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


def refresh_signatures(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike,
    shingle: ShingleParams,
    signature: SignatureParams,
    *,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    force_read: set[str] | None = None,
    before_publish: Callable[[LoadedIndex], None] | None = None,
) -> list[StageResult]:
    """Bring the shingle and signature stages up to date, as `simdoc pairs` does.

    With ``corpus``, the fused stage: the documents are read once and signed
    as they are read, and no shingle sets are stored. Without it, the index
    is used as it is, and the shingle parameters given must be the index's.
    """
    stages: list[StageResult] = []
    if corpus is not None:
        # The signature parameters are settled first, so that the shingle workers can
        # compute the signatures of what they read (a parameter mismatch fails here, early).
        manifest = IndexStore(index).read_manifest(discard_damaged=rebuild)
        stored_sig = None if rebuild else manifest["stages"].get("signature")
        signer = signature_params(stored_sig, signature, index, rebuild)
        stages.append(
            build_shingles(
                corpus, index, shingle, signature=signer, engine=engine, rebuild=rebuild, progress=progress, wait=wait,
                force_read=force_read, before_publish=before_publish,
            )
        )
    else:
        _mismatch("shingle", open_index(index).stage("shingle")["params"], shingle.asked(), Path(index), False)
    stages.append(build_signatures(index, signature, engine=engine, progress=progress, wait=wait))
    return stages


def _refresh_for_pairs(
    corpus, index: Path, params: Params, *, engine: Engine, rebuild: bool, progress: bool, force_read: set[str], wait: float
) -> tuple[list[StageResult], BandingReport]:
    """Run the stages find_pairs needs; returns (stage results, banding report)."""
    banded: list[tuple[StageResult, BandingReport]] = []

    def band_new_build(loaded: LoadedIndex) -> None:
        # The buckets of the new documents go into the manifest that publishes them: a
        # reader (or a run killed in between) never finds new documents with old buckets.
        plan, report, current = _index_plan(loaded, params.banding, params.pairs)
        if not current:
            banded.append((_index_stage(loaded, plan, report, engine.jobs, time.perf_counter()), report))

    stages = refresh_signatures(
        corpus, index, params.shingle, params.signature, engine=engine, rebuild=rebuild, progress=progress, wait=wait,
        force_read=force_read, before_publish=band_new_build,
    )
    if banded:  # built with the shingles, published by the same manifest
        result, report = banded[0]
    else:
        result, report = build_index(index, params.banding, pairs=params.pairs, engine=engine, wait=wait)
    stages.append(result)
    return stages, report

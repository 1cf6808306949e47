"""The shingle stage: read the corpus where it changed, keep the rest, publish the docs table.

:func:`build_shingles` brings the stage up to date in five steps:

1. :func:`_settle`: the parameters (asked, else the index's, else the defaults); can current rows be kept.
2. :func:`simdoc.stages.plan.scan_corpus`: the corpus walked; the current docs table, if its rows describe
   the same thing (:func:`_same_build`: nothing to do). :func:`~simdoc.stages.plan.reading_plan`: which files
   to read, and which to keep without reading (a big file whose stat changed is kept if its digest is the one
   indexed: :func:`~simdoc.stages.same_bytes.confirm_unchanged`).
3. :func:`simdoc.stages.lean_tasks.reading_tasks` (:func:`simdoc.stages.scan.scan_tasks`, or made from the plan's columns): the files to read, in batches (a big file in ranges, joined
   by :func:`simdoc.stages.ranges.joined`), as tasks for the engine (:func:`~simdoc.stages.scan.scan_batch`
   reads, shingles and signs them; a range's rows come back in a staging file: :mod:`simdoc.stages.staged_rows`).
   :class:`~simdoc.stages.collector.Collector`: the next docs table in corpus order, from kept rows and the tasks' results, with the
   signature rows (or the shingle sets) alongside. On a Dask cluster each task writes its result to a part
   file of the index and sends back where it is: :func:`simdoc.stages.resume.resumed` reads it (or a killed
   client's run's, see :mod:`simdoc.stages.scan`).
4. :func:`_write_build` and :func:`_publish`: the new files, then one manifest
   naming them; then the parts, all used or stale, are removed.

In `simdoc pairs` the stage is fused with the signature stage (``signature`` given): each document read
is signed by the same task and its shingles are dropped, and the docs table and the signatures are
published by one manifest. Run on its own (`simdoc shingle`), the sorted shingle sets are stored instead.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simdoc.corpus.formats import MEMBER_IDS
from simdoc.corpus.reading_rules import READING_RULES, read_again_for_rules
from simdoc.corpus.walk import is_warc, resolve_sources
from simdoc.engines import DaskEngine, Engine
from simdoc import kernel_choice
from simdoc.engines.local import LocalEngine
from simdoc.errors import IndexError_
from simdoc.params import ShingleParams, SignatureParams, with_legacy
from simdoc.stages.collector import Collector, Settings
from simdoc.stages.common import (
    collector_paused,
    default_index_path,
    mismatch,
    progress_bar,
)
from simdoc.stages.plan import Scan, reading_plan, scan_corpus
from simdoc.stages.racy import racy
from simdoc.stages.ranges import joined
from simdoc.stages.recheck import recheck
from simdoc.stages.results import StageResult
from simdoc.stages.resume import remove_scan_parts, resumed, scan_parts_folder
from simdoc.stages.same_bytes import confirm_unchanged
from simdoc.stages.lean_tasks import reading_tasks
from simdoc.stages.scan import files_to_read
from simdoc.stages.signature import finish_signatures
from simdoc.stages.skipped import recorded_warnings
from simdoc.stages.staged_rows import scan_staged, staged
from simdoc.stages.spilled import remove_spilled, write_rows
from simdoc.store.directory import IndexStore
from simdoc.store.doctable import FORMAT_3_MISSING, HOW, NAME_ROLES, STATUSES, DocsTable
from simdoc.store.loaded import KeptRows, LoadedIndex, readable_docs
from simdoc.version import __version__


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

    Read new and changed files; keep the rows of unchanged ones. A file is
    unchanged if its stat is the one recorded (size, modification and change
    times, inode and device, as git's index keeps them) and it was not
    racily clean when recorded (see :mod:`simdoc.stages.racy`). Any other
    file is read; if its bytes still have the digest recorded, its rows are
    kept (only its stat is updated), as git does with an entry whose
    content hash matches.

    ``signature`` (resolved parameters): the fused stage of `simdoc pairs`,
    see the module. ``force_read``: ids to read whatever they say.
    ``before_publish`` may add later stages to the manifest (given as a
    LoadedIndex of the new build) before it is published, so that they are
    published together. The files are read by the tasks of ``engine``
    (default: a LocalEngine on all cores); on a DaskEngine the run is
    resumable (see the module). ``progress``: a bar on stderr.
    """
    index = Path(index) if index is not None else default_index_path(corpus)
    with IndexStore(index).writing(wait), collector_paused():
        t0 = time.perf_counter()
        store = IndexStore(index)
        manifest = store.read_manifest(discard_damaged=rebuild)
        replaced = readable_docs(store, manifest) if rebuild else None  # a rebuild is no news to --new
        previous = manifest["stages"].get("shingle")  # a rebuild keeps its parameters not given
        if rebuild:
            manifest["stages"] = {}
        settings = _settle(manifest, corpus, index, params, signature, rebuild, previous)
        engine = engine or LocalEngine()
        scan = scan_corpus(store, manifest, corpus, index, settings.shingle, settings.stored, settings.same_params, engine.jobs)
        if settings.same_params and "all_responses" not in settings.stored["params"]:  # WARC read by fastwarc then
            force_read = set(force_read or ()) | {e.id for e in scan.entries if is_warc(e.id)}
        # An index read under older rules (simdoc.corpus.reading_rules.READING_RULES): the files they may have read
        # another way are read again (their bytes may be the ones indexed, their texts not).
        again = None
        rules = settings.stored.get("reading_rules", 1) if settings.same_params else READING_RULES
        if rules < READING_RULES:
            skipped = {s["id"]: s.get("reason") or "" for s in settings.stored.get("skipped", []) if "source" not in s}
            # Rules 3: a file skipped as binary may be UTF-16 or UTF-32 (its NUL bytes), read now.
            binary = {i for i, why in skipped.items() if why.startswith("binary file")}
            again = read_not_utf8(scan) | (binary & set(scan.listing.ids) if binary else set())
            if rules < 2:
                again |= read_again_for_rules(scan.listing.ids, scan.listing.column("file_size"), settings.shingle.max_bytes, set(skipped))
            force_read = set(force_read or ()) | again
        if _same_build(settings, scan) and not force_read:
            n = recheck(store, manifest, scan, settings.shingle, settings.signer, engine)
            if n is not None:  # nothing read but its racily clean files (simdoc.stages.recheck), none changed
                remove_scan_parts(store)
                if again is not None:  # older rules, and nothing to read again under today's
                    _rules_now(store, manifest)
                detail = f"up to date ({n} racily clean files re-read)" if n else "up to date"
                return StageResult("shingle", False, time.perf_counter() - t0, detail, repeated=recorded_warnings(settings.stored))
        plan = confirm_unchanged(reading_plan(scan, settings.reuse, force_read or set()), engine, settings.shingle)
        store.ensure_dir()
        parts = scan_parts_folder(store) if isinstance(engine, DaskEngine) else None
        collector = Collector(store, manifest, settings, scan, plan, parts is not None, replaced)
        try:
            # A stage that reads a few MB runs the numpy reference, numba never imported (simdoc.kernel_choice).
            volume = plan.volume() if parts is None else kernel_choice.SMALL_BYTES  # (a Dask worker uses the kernels)
            tasks = reading_tasks(files_to_read(plan, parts is not None), settings.shingle, settings.signer, parts, lambda e: racy(e, scan.newest), os.path.abspath(store.path))
            ran = resumed(engine, tasks) if parts is not None else engine.map(scan_staged, staged(tasks, store.path))
            with kernel_choice.reads(volume), contextlib.closing(joined(ran, index)) as results:
                collector.collect(plan, results, progress_bar(len(scan.entries), "shingle", progress, unit="file"))
            if _same_build(settings, scan) and not again and collector.nothing_new():
                # Only racily clean files were read, and their bytes are the ones indexed.
                collector.abort()
                remove_spilled(collector.sets_parts)
                remove_scan_parts(store)
                return collector.result(False, time.perf_counter() - t0, f"up to date ({collector.n_read} racily clean files re-read)")
            collector.check_some_read(corpus)
            with kernel_choice.reads(volume):
                table, stage, sig_stage = _write_build(store, settings, scan, collector, engine)
        except BaseException:
            collector.abort()
            remove_spilled(collector.sets_parts)
            raise
        verified = manifest["stages"].get("verified")
        if again is not None and not again and verified is not None:  # no text read under the old rules differs
            verified["reading_rules"] = READING_RULES
        _publish(store, manifest, table, stage, sig_stage, collector.generation, before_publish, collector.kept())
        remove_scan_parts(store)
        return collector.result(True, time.perf_counter() - t0, collector.detail(scan, stage))


# ---------------------------------------------------------------- 1. parameters


def _settle(
    manifest: dict, corpus, index: Path, asked: ShingleParams, signer: SignatureParams | None, rebuild: bool,
    previous: dict | None,
) -> Settings:
    """The parameters of this build; a corpus or parameter the index was not built with is an error.
    ``previous``: the shingle stage before a rebuild cleared it (else the stored one), whose
    parameters not asked are kept."""
    stored = manifest["stages"].get("shingle")
    corpus_abs = resolve_sources(corpus)[0]
    if stored and not rebuild and stored.get("corpus") != corpus_abs:
        raise IndexError_(
            f"the index at {index} was built for the corpus {stored.get('corpus')}, not {corpus_abs}",
            hint="pass --rebuild to rebuild it for this corpus, or choose another --index",
        )
    changed = stored is not None and mismatch("shingle", with_legacy(stored["params"]), asked.asked(), index, rebuild)
    # Options not given are the index's, with --rebuild too: a rebuild for --k 3 keeps the index's
    # unit and the rest (it used to take every default: a word index became a char one).
    shingle = asked.resolved(previous["params"] if previous else None)
    params = {**shingle.manifest(), "member_ids": MEMBER_IDS}
    same_params = bool(stored) and not rebuild and not changed and with_legacy(stored["params"]) == params
    stored_sig = manifest["stages"].get("signature")
    # Rows can be kept from the current build only if they describe the same thing.
    reuse = (
        same_params and signer is not None and stored_sig is not None and stored_sig["params"] == signer.manifest()
        and stored_sig.get("built_from") == stored.get("build_id")
    )
    return Settings(shingle, params, signer, corpus_abs, stored, same_params, reuse)


# ---------------------------------------------------------------- 2. what to read (simdoc.stages.plan)


def _same_build(settings: Settings, scan: Scan) -> bool:
    """The current build is what this one would be, and its scan looked as this one does: then
    nothing needs reading but racily clean files, and if their bytes are the ones indexed, the
    stage is up to date."""
    stored = settings.stored
    same = settings.reuse or (settings.keep_sets and settings.same_params and "indptr" in stored.get("roles", {}))
    # A table of format 3 has no stat of format 4, one of format 4 no keys of format 5 (simdoc.store.doctable):
    # it is written again.
    return same and stored.get("scan_id") == scan.scan_id and all(r in stored["roles"] for r in (FORMAT_3_MISSING[0], NAME_ROLES[0]))


# ---------------------------------------------------------------- 3. collecting the results: simdoc.stages.collector


# ---------------------------------------------------------------- 4. writing and publishing


def _write_build(
    store: IndexStore, settings: Settings, scan: Scan, collector: Collector, engine: Engine
) -> tuple[DocsTable, dict, dict | None]:
    """Write the new build's files: the docs table, and the shingle sets or the signatures
    (on a cluster, written by the workers of ``engine``).

    Returns the table and the manifest entries of the shingle stage and of the
    signature stage (None when shingle sets are stored instead).
    """
    table = collector.builder.finish()  # its files published under the build's names, as it is memory-mapped
    build = collector.build
    roles: dict[str, str] = dict(collector.builder.sink.roles)
    files: dict[str, dict] = dict(collector.builder.sink.files)
    if settings.keep_sets:  # streamed: a long document's set, built on disk, is copied a block at a time
        for role, (name, info) in write_rows(store, build, collector.sets_parts).items():
            roles[role], files[name] = name, info
    stage = {
        "params": settings.params,
        "corpus": settings.corpus_abs,
        "scan_id": scan.scan_id,
        "newest_ctime": sorted([dev, ns] for dev, ns in scan.newest.items()),
        "reading_rules": READING_RULES,
        "build_id": build,
        "n_docs": len(table),
        "n_empty": collector.builder.n_empty,
        "n_changed": collector.n_changed,
        "n_removed": len(collector.old or ()) - collector.n_kept_old,
        "skipped": collector.notes.skipped + collector.left_out,
        "roles": roles,
        "files": files,
    }
    sig_stage = None
    if collector.sig_rows is not None:
        sig_stage = finish_signatures(store, collector.sig_rows.written(engine), settings.signer, build)
    return table, stage, sig_stage


def _publish(
    store: IndexStore, manifest: dict, table: DocsTable, stage: dict, sig_stage: dict | None, generation: int,
    before_publish: Callable[[LoadedIndex], None] | None, kept: KeptRows | None = None,
) -> None:
    """Put the new build into the manifest (with what ``before_publish`` adds, told which rows
    were ``kept``) and publish it."""
    manifest["stages"]["shingle"] = stage
    if sig_stage is not None:
        manifest["stages"]["signature"] = sig_stage
    manifest["generation"] = generation
    manifest["simdoc_version"] = __version__
    if before_publish is not None:
        before_publish(LoadedIndex(store, manifest, table, kept=kept))
    store.write_manifest(manifest)


def _rules_now(store: IndexStore, manifest: dict) -> None:
    """Record today's reading rules in a build that has nothing to read again under them, so that
    the next run does not look again (it loads the docs table to); its verified pairs stand,
    every text being the one today's rules read."""
    for name in ("shingle", "verified"):
        if (stage := manifest["stages"].get(name)) is not None:
            stage["reading_rules"] = READING_RULES
    store.write_manifest(manifest)


def read_not_utf8(scan: Scan) -> set[str]:
    """The files an index made under rules 2 (:data:`READING_RULES`) may have read with a byte that
    is not UTF-8, then U+FFFD, now kept as itself: the files its docs table says so of (status
    ``replaced``; an HTML page among them may name its charset), and every JSON Lines and WARC
    file, whose members recorded no such status."""
    table = scan.old
    if table is None:
        return set()
    at = scan.joined.at
    rows = scan.joined.order
    how, status = table.columns["how"][rows], table.columns["status"][rows]
    maybe = (status == STATUSES.index("replaced")) | np.isin(how, [HOW.index("jsonl"), HOW.index("warc")])
    files = np.repeat(np.arange(len(at) - 1), np.diff(at))[maybe]
    return {scan.listing.ids[i] for i in np.unique(files).tolist()}

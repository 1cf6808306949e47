"""The shingle stage: read the corpus where it changed, keep the rest, publish the docs table.

:func:`build_shingles` brings the stage up to date in five steps:

1. :func:`_settle`: the parameters (asked, else the index's, else the defaults); can current rows be kept.
2. :func:`simdoc.stages.plan.scan_corpus`: the corpus walked; the current docs table, if its rows describe
   the same thing (:func:`_same_build`: nothing to do). :func:`~simdoc.stages.plan.reading_plan`: which files
   to read, and which to keep without reading.
3. :func:`simdoc.stages.scan.scan_tasks`: the files to read, in batches (a big file in ranges, joined
   by :func:`simdoc.stages.ranges.joined`), as tasks for the engine (:func:`~simdoc.stages.scan.scan_batch`
   reads, shingles and signs them; a range's rows come back in a staging file: :mod:`simdoc.stages.staged_rows`).
   :class:`_Collector`: the next docs table in corpus order, from kept rows and the tasks' results, with the
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from simdoc.corpus.formats import MEMBER_IDS
from simdoc.corpus.read import MEMBER_WAYS
from simdoc.corpus.walk import is_warc, resolve_sources
from simdoc.engines import DaskEngine, Engine
from simdoc.engines.local import LocalEngine
from simdoc.errors import CorpusError, IndexError_
from simdoc.params import ShingleParams, SignatureParams, with_legacy
from simdoc.shinglesets import ShingleSets
from simdoc.stages.common import (
    build_id,
    collector_paused,
    corpus_name,
    default_index_path,
    mismatch,
    progress_bar,
)
from simdoc.stages.plan import Plan, Scan, reading_plan, scan_corpus
from simdoc.stages.racy import racy
from simdoc.stages.ranges import joined, signature_slices
from simdoc.stages.recheck import recheck
from simdoc.stages.results import StageResult
from simdoc.stages.resume import remove_scan_parts, resumed, scan_parts_folder
from simdoc.stages.scan import files_to_read, scan_tasks
from simdoc.stages.scan_results import BatchResult, FileOutcome, FileRun, plain_files
from simdoc.stages.signature import finish_signatures, next_signature_rows
from simdoc.stages.skipped import SkipNotes, recorded_warnings
from simdoc.stages.staged_rows import scan_staged, staged
from simdoc.stages.spilled import remove_spilled, write_rows
from simdoc.store.directory import IndexStore
from simdoc.store.doccolumns import TableBuilder, TableFiles, added_by_id
from simdoc.store.doctable import FORMAT_3_MISSING, NAME_ROLES, DocsTable
from simdoc.store.loaded import LoadedIndex, readable_docs
from simdoc.store.manifest import left_out_by_source
from simdoc.version import __version__
from simdoc.wording import count


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
        if rebuild:
            manifest["stages"] = {}
        settings = _settle(manifest, corpus, index, params, signature, rebuild)
        engine = engine or LocalEngine()
        scan = scan_corpus(store, manifest, corpus, index, settings.shingle, settings.stored, settings.same_params)
        if settings.same_params and "all_responses" not in settings.stored["params"]:  # WARC read by fastwarc then
            force_read = set(force_read or ()) | {e.id for e in scan.entries if is_warc(e.id)}
        if _same_build(settings, scan) and not force_read:
            n = recheck(store, manifest, scan, settings.shingle, settings.signer, engine)
            if n is not None:  # nothing read but its racily clean files (simdoc.stages.recheck), none changed
                remove_scan_parts(store)
                detail = f"up to date ({n} racily clean files re-read)" if n else "up to date"
                return StageResult("shingle", False, time.perf_counter() - t0, detail, repeated=recorded_warnings(settings.stored))
        plan = reading_plan(scan, settings.reuse, force_read or set())
        store.ensure_dir()
        parts = scan_parts_folder(store) if isinstance(engine, DaskEngine) else None
        collector = _Collector(store, manifest, settings, scan, plan, parts is not None, replaced)
        try:
            tasks = scan_tasks(files_to_read(plan, parts is not None), settings.shingle, settings.signer, parts, lambda e: racy(e, scan.newest), os.path.abspath(store.path))
            ran = resumed(engine, tasks) if parts is not None else engine.map(scan_staged, staged(tasks, store.path))
            with contextlib.closing(joined(ran, index)) as results:
                collector.collect(plan, results, progress_bar(len(scan.entries), "shingle", progress, unit="file"))
            if _same_build(settings, scan) and collector.nothing_new():
                # Only racily clean files were read, and their bytes are the ones indexed.
                collector.abort()
                remove_spilled(collector.sets_parts)
                remove_scan_parts(store)
                return collector.result(False, time.perf_counter() - t0, f"up to date ({collector.n_read} racily clean files re-read)")
            collector.check_some_read(corpus)
            table, stage, sig_stage = _write_build(store, settings, scan, collector, engine)
        except BaseException:
            collector.abort()
            remove_spilled(collector.sets_parts)
            raise
        _publish(store, manifest, table, stage, sig_stage, collector.generation, before_publish)
        remove_scan_parts(store)
        return collector.result(True, time.perf_counter() - t0, collector.detail(scan, stage))


# ---------------------------------------------------------------- 1. parameters


@dataclass
class _Settings:
    """What this build is: its parameters, and what of the current build it may keep."""

    shingle: ShingleParams  # resolved
    params: dict  # as the manifest keeps them
    signer: SignatureParams | None  # resolved; None: store shingle sets instead
    corpus_abs: str
    stored: dict | None  # the current shingle stage (None after --rebuild)
    same_params: bool  # the current build has these parameters: its docs table is the base
    reuse: bool  # rows of the current build, and their signature rows, can be kept

    @property
    def keep_sets(self) -> bool:
        return self.signer is None


def _settle(
    manifest: dict, corpus, index: Path, asked: ShingleParams, signer: SignatureParams | None, rebuild: bool
) -> _Settings:
    """The parameters of this build; a corpus or parameter the index was not built with is an error."""
    stored = manifest["stages"].get("shingle")
    corpus_abs = resolve_sources(corpus)[0]
    if stored and not rebuild and stored.get("corpus") != corpus_abs:
        raise IndexError_(
            f"the index at {index} was built for the corpus {stored.get('corpus')}, not {corpus_abs}",
            hint="pass --rebuild to rebuild it for this corpus, or choose another --index",
        )
    changed = stored is not None and mismatch("shingle", with_legacy(stored["params"]), asked.asked(), index, rebuild)
    shingle = asked.resolved(stored["params"] if (stored and not changed and not rebuild) else None)
    params = {**shingle.manifest(), "member_ids": MEMBER_IDS}
    same_params = bool(stored) and not rebuild and not changed and with_legacy(stored["params"]) == params
    stored_sig = manifest["stages"].get("signature")
    # Rows can be kept from the current build only if they describe the same thing.
    reuse = (
        same_params and signer is not None and stored_sig is not None and stored_sig["params"] == signer.manifest()
        and stored_sig.get("built_from") == stored.get("build_id")
    )
    return _Settings(shingle, params, signer, corpus_abs, stored, same_params, reuse)


# ---------------------------------------------------------------- 2. what to read (simdoc.stages.plan)


def _same_build(settings: _Settings, scan: Scan) -> bool:
    """The current build is what this one would be, and its scan looked as this one does: then
    nothing needs reading but racily clean files, and if their bytes are the ones indexed, the
    stage is up to date."""
    stored = settings.stored
    same = settings.reuse or (settings.keep_sets and settings.same_params and "indptr" in stored.get("roles", {}))
    # A table of format 3 has no stat of format 4, one of format 4 no keys of format 5 (simdoc.store.doctable):
    # it is written again.
    return same and stored.get("scan_id") == scan.scan_id and all(r in stored["roles"] for r in (FORMAT_3_MISSING[0], NAME_ROLES[0]))


# ---------------------------------------------------------------- 3. collecting the results


class _Collector:
    """The next docs table, in corpus order, from rows kept and the tasks' results; the
    signature rows (fused stage) or the shingle sets (stage on its own) alongside."""

    def __init__(
        self, store: IndexStore, manifest: dict, settings: _Settings, scan: Scan, plan: Plan, placed: bool, replaced: DocsTable | None
    ) -> None:
        self.settings = settings
        self.old = scan.old
        self.ids = scan.listing.ids
        self.old_pos = plan.rows_by_id() if scan.old is not None else {}  # of the ids a document read may have
        # A document with the digest recorded keeps the update that added it: in the current table or
        # in the one a --rebuild replaces (with other parameters), so that --new does not report it again.
        self.prev, self.prev_pos = (
            (self.old, self.old_pos) if replaced is None else (replaced, {doc_id: j for j, doc_id in enumerate(replaced.ids)})
        )
        self.generation = int(manifest.get("generation", 0)) + 1
        self.build = build_id(scan.scan_id, settings.params, __version__, self.generation)
        self.sig_rows = next_signature_rows(store, manifest, settings.signer, settings.reuse, placed)
        # The table's columns go to their files a chunk at a time (not held: issue 29).
        try:
            self.builder = TableBuilder(scan.old, TableFiles(store, self.build))
        except BaseException:
            if self.sig_rows is not None:
                self.sig_rows.abort()
            raise
        self.sets_parts: list[ShingleSets] = []
        self.notes = SkipNotes(settings.stored.get("skipped") if settings.stored else None)
        for s in scan.skipped:
            self.notes.skip(s.id, s.reason, s.size, s.mtime_ns)
        self.n_read = self.n_changed = self.n_kept_old = 0
        # New rows go to the builder a run at a time (consecutive files of one batch), not a file
        # at a time: 10^5 one-document files would be 10^5 chunks (simdoc.store.doccolumns).
        self.run: tuple[BatchResult, int, int] | None = None  # (batch, first document, end)
        self.run_files = FileRun(scan.listing.stat)  # its files
        # Members of JSON Lines and WARC files left out (SOURCE/#KEY ids, with their source): listed
        # in the manifest's ``skipped`` beside the files, counted apart from them.
        self.left_out: list[dict] = []
        self.old_left_out = left_out_by_source(settings.stored) if scan.old is not None else {}

    def collect(self, plan: Plan, results: Iterator[BatchResult], bar) -> None:
        """Every file of the plan in order: kept (a run of them at once), or taken from the next
        result of the tasks."""
        batch: BatchResult | None = None
        at_file = at_doc = 0
        for a, b, keep in plan.runs():
            if keep:
                self.keep(plan, a, b, None)
                bar.update(b - a)
                continue
            i = a
            while i < b:
                if batch is None or at_file == len(batch.files):
                    batch = next(results)
                    at_file = at_doc = 0
                m = plain_files(batch.files, at_file, min(len(batch.files), at_file + b - i)) if self.by_blocks(batch) else 0
                if m:  # most files: a block of them at once
                    self.read_plain(i, m, batch, at_file, at_doc)
                    at_file, at_doc, i = at_file + m, at_doc + m, i + m
                    bar.update(m)
                    continue
                outcome = batch.files[at_file]
                at_file += 1
                self.read(plan, i, outcome, batch, at_doc)
                at_doc += outcome.n_docs
                i += 1
                bar.update(1)
        self.flush()
        bar.close()

    def keep(self, plan: Plan, a: int, b: int, stat: tuple[int, ...] | None) -> None:
        """The rows of files ``a`` to ``b`` of the plan in the current table (``stat``: the new stat
        of the one file read again), and the members they left out when they were read."""
        self.flush()
        if self.old_left_out:
            for doc_id in self.ids[a:b]:
                self.left_out.extend(self.old_left_out.get(doc_id, ()))
        rows = plan.joined.rows(a, b)
        self.builder.add_old(rows, stat)
        if self.sig_rows is not None:
            self.sig_rows.keep_rows(rows)
        self.n_kept_old += len(rows)

    def read(self, plan: Plan, i: int, outcome: FileOutcome, batch: BatchResult, at_doc: int) -> None:
        """What reading file ``i`` of the plan gave: its documents start at ``at_doc`` of the batch."""
        e = plan.entries[i]
        self.n_read += 1
        unread = not outcome.unchanged and outcome.how not in MEMBER_WAYS and outcome.status in ("binary", "unreadable", "short")
        if unread or (not outcome.unchanged and outcome.how in MEMBER_WAYS and outcome.n_docs == 0):
            reason = outcome.warning if unread else outcome.warning or "no documents in this file"
            self.notes.skip(e.id, reason, e.size, e.mtime_ns, warning=outcome.warning or "")
        elif outcome.warning:
            self.notes.warn(f"{e.id}: {outcome.warning}")
        if outcome.unchanged:
            self.keep(plan, i, i + 1, e.stat())
            return
        if unread:
            return
        self.left_out.extend({"id": i, "source": e.id, "reason": why} for i, why in outcome.left_out)
        if outcome.n_docs:
            self.extend_run(batch, at_doc, outcome.n_docs)
            self.run_files.add(i, outcome.n_docs, outcome.file_digest)
        if self.sig_rows is not None and outcome.n_docs:
            if batch.parts is not None:  # joined ranges on a cluster: in their parts, in line order
                self.sig_rows.add_gathered(batch.parts, batch.sig_order[at_doc : at_doc + outcome.n_docs])
            elif batch.signatures is None:  # left in the task's part, for the workers to copy
                self.sig_rows.add_part(batch.part, at_doc, outcome.n_docs)
            # else: the run's rows are written with its documents (flush), not a file at a time
        if self.settings.keep_sets and outcome.n_docs:
            self.sets_parts.append(batch.sets.slice(at_doc, at_doc + outcome.n_docs))

    def read_plain(self, i: int, m: int, batch: BatchResult, at_file: int, at_doc: int) -> None:
        """Files ``i`` to ``i + m`` of the plan, read from ``batch`` (from its file ``at_file``) as one
        document each, with no warning (:func:`simdoc.stages.scan_results.plain_files`)."""
        self.n_read += m
        self.extend_run(batch, at_doc, m)
        self.run_files.add_plain(i, batch.files[at_file : at_file + m])
        if batch.signatures is None:  # in the task's part, for the workers to copy
            self.sig_rows.add_part(batch.part, at_doc, m)

    def by_blocks(self, batch: BatchResult) -> bool:
        """Whether plain files of ``batch`` may be taken a block at a time: their signature rows are in
        the batch or its part (not a file's ranges' parts), and no shingle sets are kept."""
        return self.sig_rows is not None and batch.parts is None and (batch.signatures is not None or batch.part is not None)

    def extend_run(self, batch: BatchResult, at_doc: int, n: int) -> None:
        """The current run, with the next ``n`` documents of ``batch`` (from ``at_doc``): a new run
        if they do not follow it."""
        if self.run is None or self.run[0] is not batch or self.run[2] != at_doc:
            self.flush()
            self.run = (batch, at_doc, at_doc)
        self.run = (batch, self.run[1], at_doc + n)

    def flush(self) -> None:
        """The documents of the current run of read files into the builder, as one chunk."""
        if self.run is None:
            return
        batch, first, end = self.run
        docs = batch.docs.slice(first, end)
        if self.sig_rows is not None and batch.parts is None and batch.signatures is not None:
            # A slice at a time (joined ranges: in line order, maybe mapped; see simdoc.stages.ranges),
            # by a thread while this one writes the documents' columns (simdoc.stages.signature).
            self.sig_rows.add_slices(signature_slices(batch, first, end - first))
        added, changed, kept = added_by_id(docs, self.old, self.old_pos, self.prev, self.prev_pos, self.generation)
        self.n_changed, self.n_kept_old = self.n_changed + changed, self.n_kept_old + kept
        self.builder.add_new(docs, {**self.run_files.columns(), "added": added})
        self.run = None
        self.run_files = FileRun(self.run_files.stat)

    def result(self, built: bool, seconds: float, detail: str) -> StageResult:
        """The stage's result, with the warnings to give and those about skipped files given
        before (see simdoc.stages.skipped)."""
        return StageResult("shingle", built, seconds, detail, warnings=self.notes.new, repeated=self.notes.repeated)

    def nothing_new(self) -> bool:
        """Every row is the current table's, and every document read has the digest indexed."""
        return self.n_changed == 0 and len(self.builder) == len(self.old or ()) == self.n_kept_old

    def check_some_read(self, corpus) -> None:
        if not len(self.builder):
            err = CorpusError(
                f"corpus {corpus_name(corpus)} has no readable documents ({count(len(self.notes.skipped), 'file skipped')})",
                hint="see the warnings above for why each file was skipped",
            )
            err.warnings = self.notes.every
            raise err

    def abort(self) -> None:
        """Remove the docs table's and the signature rows' files written so far (none is published before the end)."""
        self.builder.abort()
        if self.sig_rows is not None:
            self.sig_rows.abort()

    def detail(self, scan: Scan, stage: dict) -> str:
        """What the build did, for --verbose."""
        out = f"{stage['n_docs']} documents"
        if scan.old is not None:
            out += f"; read {self.n_read} files, {self.n_changed} new or changed, {stage['n_removed']} removed"
        if stage["n_empty"]:
            out += f", {stage['n_empty']} with no shingles (never candidates)"
        if self.notes.skipped:
            out += f", {len(self.notes.skipped)} files skipped"
        if self.left_out:
            out += f", {count(len(self.left_out), 'record')} left out (`simdoc stats --skipped` lists them)"
        if self.settings.signer is not None:
            out += f"; {stage['n_docs']} x {self.settings.signer.num_perm} signatures"
        return out


# ---------------------------------------------------------------- 4. writing and publishing


def _write_build(
    store: IndexStore, settings: _Settings, scan: Scan, collector: _Collector, engine: Engine
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
    before_publish: Callable[[LoadedIndex], None] | None,
) -> None:
    """Put the new build into the manifest (with what ``before_publish`` adds) and publish it."""
    manifest["stages"]["shingle"] = stage
    if sig_stage is not None:
        manifest["stages"]["signature"] = sig_stage
    manifest["generation"] = generation
    manifest["simdoc_version"] = __version__
    if before_publish is not None:
        before_publish(LoadedIndex(store, manifest, table))
    store.write_manifest(manifest)

"""The shingle stage's collector: the next docs table, in corpus order, from rows kept and rows read.

:class:`Collector` takes the files of the reading plan in order: a run of
files kept (their rows of the current table), or the next documents of the
reading tasks' results. Rows kept and runs of new documents are queued, and
given to the table's builder and to the signature rows together
(:meth:`Collector.flush`): a nightly update keeps and reads files in
hundreds of short runs, and a call per run for each (an id lookup, a
thread's hand-off, a write) cost more than the rows themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simdoc.corpus.read import MEMBER_WAYS
from simdoc.errors import CorpusError
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shinglesets import ShingleSets
from simdoc.stages.common import build_id, corpus_name
from simdoc.stages.plan import Plan, Scan
from simdoc.stages.ranges import signature_slices
from simdoc.stages.results import StageResult
from simdoc.stages.scan_results import BatchResult, FileOutcome, FileRun, plain_files
from simdoc.stages.signature import SignatureRows, next_signature_rows
from simdoc.stages.skipped import SkipNotes
from simdoc.store.directory import IndexStore
from simdoc.store import doccolumns
from simdoc.store.doccolumns import DocColumns, TableBuilder, TableFiles, added_by_id
from simdoc.store.doctable import DocsTable
from simdoc.store.loaded import KeptRows
from simdoc.store.manifest import left_out_by_source
from simdoc.version import __version__
from simdoc.wording import count

# New documents queued at most (their batches held until then), and the largest run queued: a
# first build's runs (a batch each) go on as they come. Nor is more than a chunk of the table queued.
QUEUE_NEW = 1 << 12
SMALL_RUN = 1 << 10


@dataclass
class Settings:
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


class Collector:
    """The next docs table, in corpus order, from rows kept and the tasks' results; the
    signature rows (fused stage) or the shingle sets (stage on its own) alongside."""

    def __init__(
        self, store: IndexStore, manifest: dict, settings: Settings, scan: Scan, plan: Plan, placed: bool, replaced: DocsTable | None
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
        self.run_files = FileRun(scan.listing.stat)  # the files of the runs queued and of the current one
        # Rows kept, ("old", rows, stat), and runs of new documents, ("new", batch, first, end), in
        # order, not yet given to the builder and the signature rows (see the module).
        self.queue: list[tuple] = []
        # Where each run of rows whose signature rows are kept went in the new table: (first row, old rows).
        self.kept_at: list[tuple[int, np.ndarray]] | None = [] if isinstance(self.sig_rows, SignatureRows) and settings.reuse else None
        self.old_signature_build = manifest["stages"]["signature"]["build_id"] if self.kept_at is not None else ""
        self.queued = self.queued_new = 0  # rows in the queue, and new documents
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
                restat = plan.restat is not None and bool(plan.restat[a])  # (a run of its own)
                self.n_read += restat  # read for its digest
                self.keep(plan, a, b, plan.entries[a].stat() if restat else None)
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
        self.close_run()
        if self.old_left_out:
            for doc_id in self.ids[a:b]:
                self.left_out.extend(self.old_left_out.get(doc_id, ()))
        rows = plan.joined.rows(a, b)
        self.n_kept_old += len(rows)
        self.enqueue(("old", rows, stat), len(rows))

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
        if self.sig_rows is not None and outcome.n_docs and (batch.parts is not None or batch.signatures is None):
            self.flush()  # the rows queued go first
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
            self.flush()  # the rows queued go first
            self.sig_rows.add_part(batch.part, at_doc, m)

    def by_blocks(self, batch: BatchResult) -> bool:
        """Whether plain files of ``batch`` may be taken a block at a time: their signature rows are in
        the batch or its part (not a file's ranges' parts), and no shingle sets are kept."""
        return self.sig_rows is not None and batch.parts is None and (batch.signatures is not None or batch.part is not None)

    def extend_run(self, batch: BatchResult, at_doc: int, n: int) -> None:
        """The current run, with the next ``n`` documents of ``batch`` (from ``at_doc``): a new run
        if they do not follow it."""
        if self.run is None or self.run[0] is not batch or self.run[2] != at_doc:
            self.close_run()
            self.run = (batch, at_doc, at_doc)
        self.run = (batch, self.run[1], at_doc + n)

    def close_run(self) -> None:
        """The current run of read files, queued."""
        if self.run is None:
            return
        (batch, first, end), self.run = self.run, None
        self.queued_new += end - first
        self.enqueue(("new", batch, first, end), end - first, end - first > SMALL_RUN)

    def enqueue(self, item: tuple, n: int, now: bool = False) -> None:
        self.queue.append(item)
        self.queued += n
        if now or self.queued_new >= QUEUE_NEW or self.queued >= doccolumns.TABLE_CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        """The rows queued into the builder and the signature rows, in order; the new documents' ids
        looked up in the current table at once."""
        self.close_run()
        queue, self.queue, self.queued, self.queued_new = self.queue, [], 0, 0
        files, self.run_files = self.run_files, FileRun(self.run_files.stat)
        runs = [(batch.docs.slice(first, end), batch, first, end) for kind, batch, first, end in
                (item for item in queue if item[0] == "new")]
        if runs:
            docs = runs[0][0] if len(runs) == 1 else DocColumns.concatenate([r[0] for r in runs])
            added, changed, kept = added_by_id(docs, self.old, self.old_pos, self.prev, self.prev_pos, self.generation)
            self.n_changed, self.n_kept_old = self.n_changed + changed, self.n_kept_old + kept
            columns = {**files.columns(), "added": added}  # each new document's, in queue order
        at = 0
        new = iter(runs)
        for item in queue:
            if item[0] == "old":
                _, rows, stat = item
                if self.kept_at is not None and len(rows):
                    self.kept_at.append((len(self.builder), rows))
                self.builder.add_old(rows, stat)
                if self.sig_rows is not None:
                    self.sig_rows.keep_rows(rows)
                continue
            docs, batch, first, end = next(new)
            if self.sig_rows is not None and batch.parts is None and batch.signatures is not None:
                if end - first <= SMALL_RUN and batch.sig_order is None and isinstance(self.sig_rows, SignatureRows):
                    self.sig_rows.add_rows(batch.signatures[first:end])
                else:
                    # A slice at a time (joined ranges: in line order, maybe mapped; see simdoc.stages.ranges),
                    # by a thread while this one writes the documents' columns (simdoc.stages.signature).
                    self.sig_rows.add_slices(signature_slices(batch, first, end - first))
            self.builder.add_new(docs, {c: v[at : at + len(docs)] for c, v in columns.items()})
            at += len(docs)
        if isinstance(self.sig_rows, SignatureRows) and self.sig_rows.pending:
            self.sig_rows.flush()  # the rows copied go now (a chunk of the table's), not held to the end

    def kept(self) -> KeptRows | None:
        """Each row's row in the current table if its signature row was kept (after the last flush)."""
        if self.kept_at is None:
            return None
        old_of_new = np.full(len(self.builder), -1, dtype=np.int64)
        for at, rows in self.kept_at:
            old_of_new[at : at + len(rows)] = rows
        return KeptRows(old_of_new, self.old_signature_build)

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
            out += f"; read {count(self.n_read, 'file')}, {self.n_changed} new or changed, {stage['n_removed']} removed"
        if stage["n_empty"]:
            out += f", {stage['n_empty']} with no shingles (never candidates)"
        if self.notes.skipped:
            out += f", {len(self.notes.skipped)} files skipped"
        if self.left_out:
            out += f", {count(len(self.left_out), 'record')} left out (`simdoc stats --skipped` lists them)"
        if self.settings.signer is not None:
            out += f"; {stage['n_docs']} x {self.settings.signer.num_perm} signatures"
        return out



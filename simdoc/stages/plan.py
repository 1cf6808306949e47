"""What the shingle stage reads: the corpus as walked now, against the current docs table.

:func:`scan_corpus` walks the corpus (files, or a bucket's listing) and, when
the current build has this build's parameters, loads its docs table and the
rows each file gave. :func:`reading_plan` then decides, file by file, which
to read and which to keep without reading: a file is kept when its stat
(size, mtime, ctime, inode, device; an object's ETag) is the one recorded
and it is not racily clean (:mod:`simdoc.stages.racy`); a file read again
whose bytes turn out to be the ones indexed keeps its rows too (the digest
recorded is handed to its task).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simdoc.corpus.walk import FileEntry, Skipped, discover_sources
from simdoc.errors import CorpusError
from simdoc.params import ShingleParams
from simdoc.stages.common import build_id, corpus_name
from simdoc.stages.racy import index_clock, newest_ctimes, racy
from simdoc.store.directory import IndexStore
from simdoc.store.doctable import STAT_COLUMNS, DocsTable
from simdoc.store.loaded import LoadedIndex
from simdoc.wording import count


@dataclass
class Scan:
    """The corpus as walked now, and the current build's rows to compare it with."""

    entries: list[FileEntry]
    skipped: list[Skipped]
    scan_id: str  # a hash of every path and stat: the same scan, the same id
    newest: dict[int, int]  # this listing's newest_ctimes (simdoc.stages.racy), recorded for the next scan
    old: DocsTable | None  # the current docs table, if its parameters are this build's
    old_rows: dict[str, list[int]]  # file id -> its rows in it (a JSON Lines or WARC file: several)
    old_newest: dict[int, int]  # the last scan's newest_ctimes: whom it recorded racily clean

    def racy(self) -> list[FileEntry]:
        return [e for e in self.entries if e.id in self.old_rows and racy(e, self.old_newest)]


def scan_corpus(
    store: IndexStore, manifest: dict, corpus, index: Path, shingle: ShingleParams, stored: dict | None, same_params: bool
) -> Scan:
    """The corpus walked now, and, if the current build has these parameters (``same_params``),
    its docs table and the files its rows came from."""
    clock = index_clock(index)  # before the listing: see simdoc.stages.racy
    _, entries, skipped = discover_sources(
        corpus,
        exclude=[index],
        follow_symlinks=shingle.follow_symlinks,
        include_globs=shingle.include or (),
        exclude_globs=shingle.exclude or (),
    )
    entries = list(entries)
    if not entries:
        err = CorpusError(
            f"corpus {corpus_name(corpus)} has no documents" + (f" ({count(len(skipped), 'path')} passed over)" if skipped else ""),
            hint="point simdoc at a folder that holds text files (hidden files are ignored)",
        )
        err.warnings = [f"{s.id}: {s.reason}" for s in skipped]
        raise err
    # A skipped path's size and time count: one that changes is warned about again (simdoc.stages.skipped).
    scan_id = build_id([[e.id, *e.stat()] for e in entries] + [[s.id, s.reason, s.size, s.mtime_ns] for s in skipped])
    scan = Scan(entries, skipped, scan_id, newest_ctimes(entries, clock), None, {}, {})
    if same_params:
        # A format-3 index recorded none: every file is racy (and its stat unknown), read once more.
        scan.old_newest = {int(dev): int(ns) for dev, ns in stored.get("newest_ctime", [])}
        scan.old = LoadedIndex(store, manifest).docs()
        for j, (doc_id, src) in enumerate(zip(scan.old.ids, scan.old.sources)):
            scan.old_rows.setdefault(src or doc_id, []).append(j)
    return scan


def reading_plan(scan: Scan, reuse: bool, force_read: set[str]) -> list[tuple[FileEntry, bytes | None, bool]]:
    """(entry, digest indexed, keep without reading) of every file, in corpus order."""
    old = scan.old
    plan = []
    for e in scan.entries:
        rows = scan.old_rows.get(e.id) if reuse else None
        if rows is None:
            plan.append((e, None, False))
            continue
        j = rows[0]
        unchanged = (
            tuple(int(old.columns[c][j]) for c in STAT_COLUMNS) == e.stat() and not racy(e, scan.old_newest)
            and e.id not in force_read and not any(old.ids[r] in force_read for r in rows)
        )
        plan.append((e, None if e.id in force_read else bytes(old.file_digest[j]), unchanged))
    return plan

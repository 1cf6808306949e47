"""A scan that lists what the current build was made from: only its racily clean files are read.

When the walk finds every file as the current build recorded it (the same
scan id, :func:`simdoc.stages.plan.listing_id`), nothing needs reading but
the files that were racily clean when that build listed them
(:mod:`simdoc.stages.racy`). :func:`reread_racy` reads those alone, each
checked against the digest indexed, and builds no table: a nightly run
right after an update re-read the update's files this way, but wrote and
then dropped a whole next docs table to do so (10^5 rows, for ~10^3 files
read).

If every one still has its digest, the stage is up to date, and
:func:`record_newest` puts this scan's newest change times in the manifest:
the files just read are then proven clean by their stat, and the next run
does not read them again. (Before, the times of the last build stayed, and
every later run read the same files again until the corpus changed.) This
is sound as a build's own record is: those times were reached by each file
system's clock before any file of this scan was read. If a file has
changed, the caller builds the next table as usual.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from simdoc import kernel_choice
from simdoc.engines import Engine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.plan import Plan, Scan
from simdoc.stages.racy import racy
from simdoc.stages.same_bytes import confirm_unchanged
from simdoc.stages.ranges import joined
from simdoc.stages.scan import files_to_read, scan_batch, scan_tasks
from simdoc.store.directory import IndexStore


def recheck(
    store: IndexStore, manifest: dict, scan: Scan, shingle: ShingleParams, signer: SignatureParams | None, engine: Engine
) -> int | None:
    """How many racily clean files a scan of the current build's listing read, each with the digest
    indexed (then their times are recorded: :func:`record_newest`); None if one has changed."""
    todo = scan.racy_rows()
    if not todo.any():
        return 0
    n = reread_racy(scan, todo, shingle, signer, engine, store.path)
    if n is not None:
        record_newest(store, manifest, scan)
    return n


def reread_racy(
    scan: Scan, todo: np.ndarray, shingle: ShingleParams, signer: SignatureParams | None, engine: Engine, index: Path
) -> int | None:
    """Read the files of ``scan`` marked in ``todo`` alone: how many, if each has the digest indexed;
    None if one does not."""
    first = scan.joined.first()
    plan = confirm_unchanged(Plan(scan.entries, ~todo, np.where(todo, first, -1), scan.joined, scan.old), engine, shingle)
    n = int(np.count_nonzero(plan.restat)) if plan.restat is not None else 0
    if plan.keep.all():
        return n
    tasks = scan_tasks(files_to_read(plan, False), shingle, signer, None, lambda e: racy(e, scan.newest), os.path.abspath(index))
    with kernel_choice.reads(plan.volume()), contextlib.closing(joined(engine.map(scan_batch, tasks), index)) as results:
        for batch in results:
            for outcome in batch.files:
                if not outcome.unchanged or outcome.warning:  # a warning is given as the table is made
                    return None
                n += 1
    return n


def record_newest(store: IndexStore, manifest: dict, scan: Scan) -> None:
    """Publish ``manifest`` with this scan's newest change times in its shingle stage (see the module)."""
    manifest["stages"]["shingle"]["newest_ctime"] = sorted([dev, ns] for dev, ns in scan.newest.items())
    store.write_manifest(manifest)

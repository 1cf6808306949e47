"""``simdoc cache list|clean``: the indexes simdoc made in its cache directory.

A click group of its own, added to the ``simdoc`` group by :mod:`simdoc.cli`,
where every command is registered. Records go to stdout, one per line; the
summary and warnings to stderr.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import time
from pathlib import Path

import click

from simdoc.cli.options import corpus_type, emit, quiet_flag, setup_logging, verbose_flag
from simdoc.cli.seconds import NON_NEGATIVE
from simdoc.errors import EXIT_BUSY
from simdoc.output import tsv_field
from simdoc.store.cache import (
    IndexInUse,
    cache_dir,
    cached_index_path,
    cached_indexes,
    remove_index,
)
from simdoc.store.cache import older_than as last_updated_before
from simdoc.wording import count

log = logging.getLogger("simdoc")


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@click.group()
def cache() -> None:
    """List or remove the indexes simdoc keeps in its cache directory.

    Without --index, an index lives in $XDG_CACHE_HOME/simdoc (else
    ~/.cache/simdoc), one directory per corpus. They can all be rebuilt from
    their corpora.

    \b
    Examples:
      simdoc cache list
      simdoc cache clean --older-than 30
      simdoc cache clean my_corpus
    """


@cache.command("list")
@quiet_flag("Print nothing on stderr but errors (no summary line).")
@verbose_flag("Accepted for symmetry with the other commands; prints nothing more.")
def cache_list(quiet, verbose) -> None:
    """Print one line per index in the cache directory: path, corpus, size, last modified.

    Tab-separated: the index directory, the corpus folder its document ids
    are relative to, its size in bytes, and the time of its last update
    (UTC, ISO 8601: 2026-01-31T02:15:00Z), in path order.

    \b
    Examples:
      simdoc cache list
      simdoc cache list | sort -t$'\\t' -k3,3n      # by size
    """
    setup_logging(quiet, verbose)
    found = cached_indexes()
    emit(f"{tsv_field(str(i.path))}\t{tsv_field(i.corpus)}\t{i.size}\t{_utc(i.modified)}\n" for i in found)
    log.info(f"simdoc: {count(len(found), 'index', 'indexes')}, {sum(i.size for i in found):,} bytes in {cache_dir()}")


@cache.command("clean")
@click.argument("targets", nargs=-1, metavar="[CORPUS|INDEX]...", type=corpus_type)
@click.option("--older-than", type=NON_NEGATIVE, default=None, metavar="DAYS", help="Only indexes last updated more than DAYS days ago.")
@click.option("--dry-run", "-n", is_flag=True, help="Print what would be removed; remove nothing.")
@click.option(
    "--wait",
    type=NON_NEGATIVE,
    default=0.0,
    show_default=True,
    help="Seconds to wait for a run writing an index; an index still in use is left (exit 5).",
)
@quiet_flag("Print nothing on stderr but errors (no warnings, no summary line).")
@verbose_flag("Also name the directories found to be no longer indexes, on stderr.")
def cache_clean(targets, older_than, dry_run, wait, quiet, verbose) -> None:
    """Remove indexes from the cache directory and print each one's path.

    Without CORPUS, every index in the cache directory; with CORPUS (a
    folder or file simdoc indexed without --index) or INDEX (a path that
    `simdoc cache list` printed), only that one. Removes only directories
    holding a simdoc manifest, only the files simdoc wrote, and never an
    index another run is writing or reading: that one is left with a
    warning and the exit status is 5. Indexes named with --index elsewhere
    are never touched.

    \b
    Examples:
      simdoc cache clean --older-than 30 --dry-run
      simdoc cache clean my_corpus
      simdoc cache clean
    """
    setup_logging(quiet, verbose)
    found = cached_indexes()
    chosen = found
    if targets:
        by_path = {i.path.resolve(): i for i in found}
        chosen = []
        for target in targets:
            if isinstance(target, str):  # a corpus at a URL (corpus_type keeps it a string)
                wanted = cached_index_path(target).resolve()
            else:
                wanted = target.resolve() if target.resolve() in by_path else cached_index_path(target).resolve()
            if wanted not in by_path:
                log.warning(f"{target}: no index of it in {cache_dir()}")
            elif by_path[wanted] not in chosen:
                chosen.append(by_path[wanted])
    if older_than is not None:
        chosen = [i for i in chosen if last_updated_before(i, older_than)]
    removed, in_use, freed, kept = 0, 0, 0, 0
    for index in chosen:
        if dry_run:
            emit([f"{tsv_field(str(index.path))}\n"])
            continue
        try:
            left = remove_index(index.path, wait=wait)
        except IndexInUse as exc:
            log.warning(str(exc.message))
            in_use += 1
            continue
        if left is None:
            log.debug(f"{index.path}: no longer an index, left alone")
            continue
        if left:
            log.warning(f"{index.path}: left the directory, which holds files simdoc did not write: {', '.join(left)}")
            kept += 1
        removed += 1
        freed += index.size - _sizes(index.path, left)
        emit([f"{tsv_field(str(index.path))}\n"])
    if dry_run:
        log.info(f"simdoc: would remove {count(len(chosen), 'index', 'indexes')} ({sum(i.size for i in chosen):,} bytes)")
        return
    busy = f"; {in_use} in use, left" if in_use else ""
    dirs = f"; {count(kept, 'directory', 'directories')} left, holding files simdoc did not write" if kept else ""
    log.info(f"simdoc: removed {count(removed, 'index', 'indexes')} ({freed:,} bytes){dirs}{busy}")
    if in_use:
        sys.exit(EXIT_BUSY)


def _sizes(directory: Path, names: list[str]) -> int:
    """The bytes of the regular files among ``names`` in ``directory``: counted in the index's size, not removed."""
    total = 0
    for name in names:
        try:
            st = os.lstat(directory / name)
        except OSError:
            continue
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total

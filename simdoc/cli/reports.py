"""The commands that group the verified pairs: ``simdoc clusters`` and ``simdoc dedup``.

Plain click commands, added to the ``simdoc`` group by :mod:`simdoc.cli`,
where every command is registered. As there, each command parses options,
calls the library and writes records: data on stdout, summaries and warnings
on stderr, errors as :class:`~simdoc.errors.SimdocError` turned into
``Error: ...`` by the group. The options they share with the other commands
come from :mod:`simdoc.cli.options`.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import time
from pathlib import Path

import click

from simdoc.cli.options import (
    CorpusPath,
    banding_options,
    check_corpus_index,
    check_output_flags,
    corpus_arg,
    corpus_list_options,
    corpus_type,
    emit,
    format_option,
    header_option,
    index_option,
    jobs_option,
    note_skipped,
    null_option,
    opt,
    quiet_option,
    reader_went_away,
    rebuild_option,
    report_stages,
    scheduler_option,
    setup_logging,
    shingle_options,
    show_progress,
    signature_options,
    skipped_text,
    threshold_option,
    verbose_option,
    wait_option,
    warn_capped,
    with_options,
)
from simdoc.errors import UsageError
from simdoc.output import escape_name, json_line, tsv_field, tsv_header
from simdoc.params import Params
from simdoc.reports.clusters import KEEP_POLICIES, DedupDecision
from simdoc.reports.library import Clusters, Dedup, clusters_of, dedup_of
from simdoc.stages.results import PairsResult
from simdoc.wording import count

log = logging.getLogger("simdoc")

# The options of `pairs` that decide which pairs there are (not how they are printed).
pair_options = [
    index_option,
    threshold_option,
    opt("--measure", type=click.Choice(["set", "bag"]), default="set", help="Verified similarity: set or bag Jaccard."),
    *shingle_options,
    *signature_options,
    *banding_options,
    jobs_option,
    scheduler_option,
    rebuild_option,
    wait_option,
    quiet_option,
    verbose_option,
]


def _verified_clusters(
    corpus: tuple, files_from, files0_from, index: Path | None, stage_options: dict, *, jobs, scheduler, wait_workers,
    rebuild: bool, wait: float, quiet: bool, verbose: bool, keep: str | None = None,
) -> Clusters | Dedup:
    """The clusters of the verified pairs of `pairs` run with these options (the library's
    :func:`~simdoc.reports.library.clusters_of`), or with ``keep`` what dedup drops of them
    (:func:`~simdoc.reports.library.dedup_of`); the run's stages reported on stderr."""
    params = Params.of({**stage_options, "verify": True, "all_candidates": False})
    corpus = corpus_arg(corpus, files_from, files0_from)
    index = check_corpus_index(corpus, index, rebuild)
    how = dict(jobs=jobs, scheduler=scheduler, wait_workers=wait_workers, rebuild=rebuild, progress=show_progress(quiet), wait=wait)
    got = clusters_of(corpus, index, params, **how) if keep is None else dedup_of(corpus, index, params, keep, **how)
    found = got if keep is None else got.clusters
    res, rounds = found.pairs, found.rounds
    report_stages(res.stages, verbose)
    if verbose and res.banding:
        log.debug(f"banding: {res.banding.describe()}")
    if verbose and rounds.rounds:
        log.debug(
            f"components on the cluster: {count(rounds.rounds, 'round')} over {count(rounds.partitions, 'partition')}; "
            f"edges per round {rounds.edges}"
        )
    return got


def _emit_null(records, end: bytes = b"\0") -> None:
    """Write records whose every field ends in NUL (or ``end``), names as the file system's raw
    bytes (for `xargs -0`)."""
    out = getattr(sys.stdout, "buffer", None)
    try:
        sys.stdout.flush()
        for fields in records:
            payload = b"".join(os.fsencode(f) + end for f in fields)
            if out is not None:
                out.write(payload)
            else:  # a text-only stream (tests): the same bytes, as str
                sys.stdout.write(payload.decode("utf-8", "surrogateescape"))
        (out or sys.stdout).flush()
    except BrokenPipeError:
        reader_went_away()


def _skipped(res: PairsResult) -> str:
    return f" ({skipped_text(res.n_skipped)})" if res.n_skipped else ""


# ---------------------------------------------------------------- clusters


@click.command()
@click.argument("corpus", nargs=-1, type=corpus_type)
@with_options(corpus_list_options)
@format_option(("tsv", "jsonl"), "Output format. Default: tsv.")
@null_option(
    "End every field with NUL instead of tab or newline, names as raw bytes: "
    "cluster_id, size, then size members (for xargs -0 and `read -d ''`)."
)
@header_option
@with_options(pair_options)
def clusters(
    corpus, files_from, files0_from, fmt, null, header, index, jobs, scheduler, wait_workers, rebuild, wait, quiet, verbose,
    **stage_options,
) -> None:
    """Print groups of near-duplicates: connected components of the verified pairs.

    Only pairs whose exact Jaccard reaches the threshold link documents, never
    raw LSH candidates. One cluster per line: cluster_id, size, members
    (sorted); clusters are numbered from 1 in order of their first member.
    Takes the CORPUS, --index and stage options of `pairs` and builds what is
    missing the same way.

    \b
    Examples:
      simdoc clusters sample_corpus --threshold 0.7
      simdoc clusters --index /tmp/idx --format jsonl > clusters.jsonl
      simdoc clusters sample_corpus | awk -F'\\t' '$2 > 2'     # clusters of 3 or more
      simdoc clusters sample_corpus -0 | xargs -0 printf '%s\\n'    # one field per line
    """
    started = time.perf_counter()
    setup_logging(quiet, verbose)
    check_output_flags(null, fmt, header)
    got = _verified_clusters(
        corpus, files_from, files0_from, index, stage_options, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers,
        rebuild=rebuild, wait=wait, quiet=quiet, verbose=verbose,
    )
    res, index, found = got.pairs, got.index, got.clusters
    if null:
        _emit_null([str(c.cluster_id), str(c.size), *c.members] for c in found)
    elif fmt in (None, "tsv"):
        lines = ("\t".join([str(c.cluster_id), str(c.size), *map(tsv_field, c.members)]) + "\n" for c in found)
        if header:  # the members fill the third field and every one after it
            lines = itertools.chain([tsv_header(("cluster_id", "size", "members"))], lines)
        emit(lines)
    else:
        lines = (json_line({"cluster_id": c.cluster_id, "size": c.size, "members": list(c.members)}) for c in found)
        emit(lines)
    held = sum(c.size for c in found)
    log.info(
        f"simdoc: {count(res.n_docs, 'document')}{_skipped(res)}, {count(len(res), 'pair')} ({res.cut()}), "
        f"{count(len(found), 'cluster')} holding {count(held, 'document')} in {time.perf_counter() - started:.2f} s"
    )
    note_skipped(res.n_skipped, index, quiet, res.n_damaged)


# ---------------------------------------------------------------- dedup


@click.command()
@click.argument("corpus", nargs=-1, type=corpus_type)
@with_options(corpus_list_options)
@opt(
    "--keep",
    type=click.Choice(KEEP_POLICIES),
    default="first",
    help="Which member of a cluster to keep: first (smallest id), longest/shortest (bytes), "
    "newest/oldest (modification time), oldest-indexed (the one the index held first: only new data "
    "loses documents); ties go to the smallest id. Default: first.",
)
@opt(
    "--write",
    "write_dir",
    type=CorpusPath(file_okay=False),
    help="Also write the deduplicated corpus to this new (or empty) folder, or prefix at a URL (s3://bucket/prefix/), "
    "in the corpus's own formats; the files the index skipped (images, PDFs) copied as they are, symbolic links made "
    "again (to the same target), what cannot be written (a FIFO) named on stderr.",
)
@opt("--link", is_flag=True, help="With --write: hard-link the plain files that stay (and those the index skipped) instead of copying them.")
@null_option("End each path with NUL instead of newline (for `xargs -0`).")
@opt(
    "--absolute",
    is_flag=True,
    help="Print absolute paths instead of paths relative to the corpus (needs the CORPUS on the command line).",
)
@format_option(
    ("paths", "tsv", "jsonl"),
    "paths: one droppable path per line; tsv: drop<TAB>keep; jsonl: one cluster per line. Default: paths.",
    default="paths",
)
@header_option
@with_options(pair_options)
def dedup(
    corpus, files_from, files0_from, keep, write_dir, link, null, absolute, fmt, header, index, jobs, scheduler, wait_workers, rebuild, wait,
    quiet, verbose, **stage_options,
) -> None:
    """Print the documents that can go: all but one of every cluster.

    Clusters are those of `simdoc clusters`; of each, the --keep document
    stays and the others are printed, one path per line. simdoc deletes
    nothing itself. Every document in a cluster is linked to the kept one by
    a chain of verified pairs, not necessarily by one pair: use a high
    --threshold for deletion.

    \b
    Examples:
      simdoc dedup sample_corpus --threshold 0.9
      simdoc dedup my_corpus --threshold 0.95 --keep newest --absolute -0 | xargs -0 -r rm --
      simdoc dedup --index /tmp/idx --format tsv            # drop<TAB>keep
      simdoc dedup my_corpus --threshold 0.95 --write deduplicated/
    """
    started = time.perf_counter()
    setup_logging(quiet, verbose)
    check_output_flags(null, fmt, header, null_format="paths")
    named = bool(corpus) or files_from is not None or files0_from is not None
    if absolute and not named:
        raise click.UsageError(
            "--absolute needs the CORPUS on the command line (simdoc dedup CORPUS --index IDX --absolute): "
            "an index alone is not trusted to say where its files are; without --absolute, dedup prints "
            "paths relative to the corpus"
        )
    if write_dir is not None and not named:
        raise click.UsageError(
            "--write needs the CORPUS on the command line (simdoc dedup CORPUS --index IDX --write DIR): "
            "the files are read from it, and an index alone is not trusted to say where they are"
        )
    if link and write_dir is None:
        raise UsageError("--link needs --write DIR", hint="add --write DIR, or drop --link")
    if write_dir is not None:
        from simdoc.reports.write import check_destination

        check_destination(write_dir, "", link=link)  # before any work; the corpus is checked again once known
    plan = _verified_clusters(
        corpus, files_from, files0_from, index, stage_options, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers,
        rebuild=rebuild, wait=wait, quiet=quiet, verbose=verbose, keep=keep,
    )
    res, index, decisions = plan.clusters.pairs, plan.clusters.index, plan.decisions

    def name(doc_id: str) -> str:
        return plan.path(doc_id, absolute)

    unsafe = []
    if fmt == "paths" and not null:
        # Split at the newline, such a name could make `xargs` remove another file: left out, and
        # out of the summary's counts, which say what was listed.
        unsafe = [x for d in decisions for x in d.drop if "\n" in x or "\r" in x]
        left_out = set(unsafe)  # (a set: a list would be asked once for every document that can go)
        decisions = [DedupDecision(d.cluster_id, d.keep, kept) for d in decisions if (kept := tuple(x for x in d.drop if x not in left_out))]
    # One warning a document left out: capped as the stages' are, as a JSON Lines or WARC corpus
    # indexed with --max-bytes can leave thousands out. The cap's last line (under -q, the lines
    # below) says how many there are in all, so none is left out silently.
    line_breaks = [f"{x!r} has a line break in its name: left out; use -0 to list it" for x in unsafe]
    warn_capped(plan.warnings + line_breaks, verbose, "of documents left out")
    n_drop = sum(len(d.drop) for d in decisions)
    drop_bytes = sum(plan.sizes[x] for d in decisions for x in d.drop)
    if fmt == "paths":
        # Paths as the file system's bytes, whatever the locale: they are for rm, not for reading.
        paths = ([name(x)] for d in decisions for x in d.drop)
        _emit_null(paths, end=b"\0" if null else b"\n")
        lines = ()
    elif fmt == "tsv":
        lines = (f"{tsv_field(name(x))}\t{tsv_field(name(d.keep))}\n" for d in decisions for x in d.drop)
        if header:
            lines = itertools.chain([tsv_header(("drop", "keep"))], lines)
    else:
        lines = (json_line({"cluster_id": d.cluster_id, "keep": name(d.keep), "drop": [name(x) for x in d.drop]}) for d in decisions)
    emit(lines)
    log.info(
        f"simdoc: {count(len(decisions), 'cluster')}: keep {len(decisions)}, "
        f"drop {count(n_drop, 'document')} ({count(drop_bytes, 'byte')}) ({res.cut()}, --keep {keep}){_skipped(res)} "
        f"in {time.perf_counter() - started:.2f} s"
    )
    if quiet and plan.warnings:  # their warnings are hidden by -q: the list is shorter than what can go, and says so
        n = len(plan.warnings)
        click.echo(
            f"simdoc: {count(n, 'warning')} hidden by -q, of documents left out of the list (changed since indexed, "
            f"outside the corpus, compared by their first --max-bytes only, or the kept one's own file): "
            f"run without -q to read {'it' if n == 1 else 'them'}",
            err=True,
        )
    if unsafe:  # never silent, not even with -q: the list is shorter than what can go
        one = len(unsafe) == 1
        click.echo(
            f"simdoc: {count(len(unsafe), 'document')} that can go {'is' if one else 'are'} not listed, as "
            f"{'its name has' if one else 'their names have'} a line break: -0 lists {'it' if one else 'them'}",
            err=True,
        )
    if write_dir is not None:
        from simdoc.reports.write import write_deduplicated

        # Files named one by one (`simdoc dedup data.jsonl --write out`) may be written beside them.
        folder = not corpus or any(not Path(str(c)).is_file() for c in corpus) or files_from is not None or files0_from is not None
        written = write_deduplicated(plan, write_dir, link, folder)
        copied = f"; {count(written.copied, 'file')} the index skipped copied as {'it is' if written.copied == 1 else 'they are'}"
        log.info(
            f"simdoc: wrote {count(written.documents, 'document')} in {count(written.files, 'file')} to {write_dir} "
            f"({count(written.dropped, 'document')} left out){copied if written.copied else ''}"
        )
        warn_capped(
            [f"{escape_name(x)}: a symbolic link to {escape_name(to)}, which is left out: it leads nowhere in {write_dir}" for x, to in written.dangling],
            verbose, "of links that lead nowhere",
        )
        if written.not_written:
            # Never silent, not even with -q: DIR lacks files the corpus has.
            warn_capped([f"{escape_name(x)}: not written to {write_dir}: {why}" for x, why in written.not_written], verbose, "of files not written")
            n = len(written.not_written)
            click.echo(
                f"simdoc: {count(n, 'path')} of the corpus {'is' if n == 1 else 'are'} not in {write_dir}: "
                f"{'run without -q to read which, and why' if quiet else 'the warnings above say why'}",
                err=True,
            )
    note_skipped(res.n_skipped, index, quiet, res.n_damaged)

"""The stage commands: ``simdoc shingle``, ``signature``, ``index`` and ``pairs``.

Plain click commands, registered on the ``simdoc`` group by :mod:`simdoc.cli`.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from simdoc.cli.options import (
    RECORD_FORMATS,
    announce_index,
    banding_options,
    check_output_flags,
    corpus_arg,
    corpus_list_options,
    corpus_type,
    env_index,
    format_option,
    header_option,
    index_of,
    index_option,
    jobs_option,
    need_index,
    note_skipped,
    null_option,
    opt,
    quiet_flag,
    quiet_option,
    reader_corpus_argument,
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
    verbose_flag,
    verbose_option,
    wait_option,
    with_options,
)
from simdoc.engines import open_engine
from simdoc.engines.local import check_jobs
from simdoc.output import write_records
from simdoc.params import BandingParams, Params, ShingleParams, SignatureParams
from simdoc.stages.common import default_index_path
from simdoc.stages.index import build_index, index_up_to_date
from simdoc.stages.pairs import mark_reported, pairs_index, run_pairs
from simdoc.stages.results import PairsResult
from simdoc.stages.shingle import build_shingles
from simdoc.stages.signature import build_signatures, signatures_up_to_date
from simdoc.store.directory import IndexStore
from simdoc.store.manifest import damaged_files, skipped_counts
from simdoc.wording import count

log = logging.getLogger("simdoc")

@click.command()
@click.argument("corpus", nargs=-1, type=corpus_type)
@with_options(corpus_list_options)
@null_option()  # hidden: kept only to say where NUL-separated lists went
@index_option
@with_options(shingle_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def shingle(
    corpus, files_from, files0_from, null, index, jobs, scheduler, wait_workers, rebuild, wait, quiet, verbose, **shingle_options
) -> None:
    """Turn every document under CORPUS into its set of hashed shingles.

    \b
    Example:
      simdoc shingle sample_corpus --index /tmp/idx --unit word --k 3
    """
    setup_logging(quiet, verbose)
    if null:
        raise click.UsageError(
            "-0/--null shapes output, and `simdoc shingle` prints no records; "
            "read a NUL-separated list of files with --files0-from"
        )
    corpus = corpus_arg(corpus, files_from, files0_from)
    if corpus is None:
        raise click.UsageError("give a CORPUS (folders or files), --files-from or --files0-from")
    params = ShingleParams(**shingle_options)
    index = announce_index(index or default_index_path(corpus))
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus) as engine:
        res = build_shingles(corpus, index, params, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait)
    report_stages([res], verbose)
    stage = IndexStore(index).read_manifest()["stages"]["shingle"]
    n_skipped = skipped_counts(stage)[0]
    up_to_date = "up to date" + (f" ({skipped_text(n_skipped)})" if n_skipped else "")
    log.info(f"shingle: {res.detail if res.built else up_to_date} -> {index}")
    note_skipped(n_skipped, index, quiet, damaged_files(stage))


@click.command()
@reader_corpus_argument
@index_option
@with_options(signature_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_flag()
@verbose_flag("The stage's timing and the index directory used, on stderr.")
def signature(corpus, index, num_perm, seed, scheme, jobs, scheduler, wait_workers, rebuild, wait, quiet, verbose) -> None:
    """Compute the MinHash signature matrix of the shingled documents.

    \b
    Example:
      simdoc signature --index /tmp/idx --num-perm 256 --seed 7
      simdoc signature my_corpus --num-perm 256    # the default index of my_corpus (not read)
    """
    setup_logging(quiet, verbose)
    params = SignatureParams(num_perm=num_perm, seed=seed, scheme=scheme)
    check_jobs(jobs)
    index = index_of(corpus, index)
    # Up to date: no lock to wait for, and no cluster to connect to.
    res = None if rebuild else signatures_up_to_date(index, params)
    if res is None:
        with open_engine(jobs, scheduler, wait_workers, index=index, needs_corpus=False) as engine:
            res = build_signatures(index, params, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait)
    report_stages([res], verbose)
    log.info(f"signature: {res.detail if res.built else 'up to date'}")


@click.command("index")
@reader_corpus_argument
@index_option
@threshold_option
@with_options(banding_options)
@scheduler_option
@wait_option
@quiet_flag()
@verbose_flag("The stage's timing and the index directory used, on stderr.")
def index_cmd(corpus, index, threshold, bands, rows, scheduler, wait_workers, wait, quiet, verbose) -> None:
    """Band the signatures into LSH buckets for a Jaccard threshold.

    Reports on stderr the chosen bands b and rows r, the S-curve midpoint
    (1/b)^(1/r) and the probability that pairs at J = T-0.1, T and T+0.1
    become candidates.

    \b
    Example:
      simdoc index --index /tmp/idx --threshold 0.8
      simdoc index --index /tmp/idx --bands 20 --rows 5
      simdoc index my_corpus --threshold 0.9       # the default index of my_corpus (not read)
    """
    setup_logging(quiet, verbose)
    banding = BandingParams(threshold=threshold, bands=bands, rows=rows)
    index = index_of(corpus, index)
    # Up to date: no lock to wait for, and no cluster to connect to.
    done = index_up_to_date(index, banding)
    if done is None:
        with open_engine(None, scheduler, wait_workers, index=index, needs_corpus=False) as engine:
            done = build_index(index, banding, engine=engine, wait=wait)
    res, report = done
    report_stages([res], verbose)
    log.info(f"index: {report.describe()}" + ("" if res.built else " (up to date)"))


@click.command()
@click.argument("corpus", nargs=-1, type=corpus_type)
@with_options(corpus_list_options)
@index_option
@threshold_option
@format_option(RECORD_FORMATS, "Output format. Default: table on a terminal, tsv otherwise.")
@opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@opt("--all-candidates", is_flag=True, help="Print every candidate pair with both numbers, whatever its similarity.")
@opt("--measure", type=click.Choice(["set", "bag"]), default="set", help="Verified similarity: set or bag Jaccard.")
@null_option(
    "NUL-terminate every field and write names as raw bytes (for xargs -0). "
    "Output only: a NUL-separated list of files is read with --files0-from."
)
@opt(
    "--new", "new_only", is_flag=True,
    help="Only pairs with a document added or changed since the last --new report written in full; "
    "adds a 5th field: a, b or both.",
)
@opt(
    "--stamp", is_flag=True,
    help="Add a last field, run: when this run started (UTC, ISO 8601, e.g. 2026-01-31T02:15:00Z), the same "
    "on every record, so that a report appended run after run (cron) splits by run.",
)
@header_option
@with_options(shingle_options)
@with_options(signature_options)
@with_options(banding_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def pairs(
    corpus, files_from, files0_from, index, fmt, no_verify, null, new_only, stamp, header, jobs, scheduler, wait_workers,
    rebuild, wait, quiet, verbose, **stage_options,
) -> None:
    """Print near-duplicate pairs: doc_a, doc_b, estimated and exact Jaccard.

    With CORPUS, missing or out-of-date stages are built first (with the
    stage options given here); without it, the --index is used as it is.
    Records go to stdout, one per line; the summary and warnings to stderr.

    \b
    Examples:
      simdoc pairs sample_corpus
      simdoc pairs sample_corpus --threshold 0.8 --format jsonl > pairs.jsonl
      simdoc pairs --index /tmp/idx --all-candidates | sort -t$'\\t' -k4,4n
      simdoc pairs crawl/ --index crawl.idx --new     # nightly: what is new since the last --new report
      simdoc pairs crawl/ --index crawl.idx --new --stamp >> new.tsv   # ... each record with the run's time
      simdoc pairs site-a/ site-b/ notes.txt          # ids: site-a/..., site-b/..., notes.txt
      find . -name '*.md' -print0 | simdoc pairs --files0-from - --index md.idx
    """
    started = time.perf_counter()
    run = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if stamp else None
    setup_logging(quiet, verbose)
    check_output_flags(null, fmt, header)
    params = Params.of({**stage_options, "verify": not no_verify, "new_only": new_only})
    corpus = corpus_arg(corpus, files_from, files0_from)
    if corpus is None and index is None and not env_index():
        raise click.UsageError("give a CORPUS, an --index, or both")
    if index is None:
        index = default_index_path(corpus) if corpus is not None else need_index(None)
    announce_index(index)
    if rebuild and corpus is None:
        raise click.UsageError("--rebuild needs the CORPUS (the shingles are rebuilt from it)")
    index = pairs_index(corpus, index)
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus, needs_corpus=params.pairs.verify) as engine:
        res = run_pairs(corpus, index, params, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait)
    report_stages(res.stages, verbose)
    if verbose and res.banding:
        log.debug(f"banding: {res.banding.describe()}")
    fmt = "null" if null else (fmt or ("table" if sys.stdout.isatty() else "tsv"))
    _warn_big_groups(res)
    try:
        write_records(res.records(), fmt, sys.stdout, with_new=new_only, header=header, run=run)
        sys.stdout.flush()
    except BrokenPipeError:
        reader_went_away()
    if new_only:
        # Only a report written in full counts: a run killed before this line leaves its
        # documents new for the next --new report.
        mark_reported(res.index, res.generation, wait)
    _summary(res, time.perf_counter() - started)
    note_skipped(res.n_skipped, index, quiet, res.n_damaged)


def _warn_big_groups(res: PairsResult) -> None:
    """Said before the records, so that a person watching a flood of pairs knows why."""
    big = [g for g in res.groups if len(g) > 1000]
    if big:
        largest = max(big, key=len)
        log.warning(
            f"{count(len(big), 'group')} of more than 1,000 exact copies "
            f"(largest: {len(largest):,} documents, first {res.doc_ids[largest[0]]}): their "
            f"{res.n_group_pairs():,} pairs, all with jaccard 1, are streamed; "
            "`simdoc clusters` lists each group on one line"
        )


def _summary(res: PairsResult, seconds: float) -> None:
    """The summary line; ``seconds`` since the command started, printing the pairs included."""
    pairs = count(len(res), "pair") + ("" if res.jaccard is not None else " (estimated)")
    skipped = f" ({count(res.n_skipped, 'file skipped')})" if res.n_skipped else ""
    msg = (
        f"simdoc: {count(res.n_docs, 'document')}{skipped}, {count(res.n_candidates, 'candidate')}, "
        f"{pairs} ({res.cut()}) in {seconds:.2f} s"
    )
    log.info(msg)
    if res.stats.large_buckets:
        hold = "holds" if res.stats.large_buckets == 1 else "hold"
        log.warning(
            f"{count(res.stats.large_buckets, 'LSH bucket', 'LSH buckets')} {hold} 10,000 or more documents "
            f"(largest: {res.stats.largest_bucket}); "
            "these are usually exact copies or boilerplate"
        )


# ---------------------------------------------------------------- every command, registered here


"""The ``simdoc`` command: click commands that parse options and call the library.

Exit status: 0 success (with or without pairs), 1 internal error (a bug),
2 usage error, 3 corpus error, 4 index error, 5 index busy, 130 interrupted.
"""

from __future__ import annotations

import gc
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from simdoc import __version__
from simdoc.check import check_index
from simdoc.errors import SimdocError
from simdoc.lsh import DEFAULT_THRESHOLD
from simdoc.output import FORMATS, write_records
from simdoc.pipeline import (
    PairsResult,
    StageResult,
    build_index,
    build_shingles,
    build_signatures,
    default_index_path,
    find_pairs,
)
from simdoc.shingling import UNITS
from simdoc.store import IndexStore

log = logging.getLogger("simdoc")
MAX_WARNINGS = 20


class _Group(click.Group):
    """Turns SimdocError into `Error: ...` on stderr and its exit code; no traceback."""

    def invoke(self, ctx: click.Context):
        try:
            _check_environment()
            return super().invoke(ctx)
        except SimdocError as exc:
            for w in getattr(exc, "warnings", [])[:MAX_WARNINGS]:
                click.echo(f"warning: {w}", err=True)
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)


def _check_environment() -> None:
    """A bad SIMDOC_DIRECT_FROM or SIMDOC_PREFETCH is a usage error before any work, whatever the command."""
    from simdoc.direct import direct_from
    from simdoc.memory import prefetch_enabled

    direct_from()
    prefetch_enabled()


class _StderrHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        prefix = "warning: " if record.levelno >= logging.WARNING else ""
        click.echo(f"{prefix}{record.getMessage()}", err=True)


def _setup_logging(quiet: bool, verbose: bool) -> None:
    log.handlers[:] = [_StderrHandler()]
    log.propagate = False
    log.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def _report(stages: list[StageResult], verbose: bool) -> None:
    warnings = [w for s in stages for w in s.warnings]
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    for w in shown:
        log.warning(w)
    if len(warnings) > len(shown):
        log.warning(f"... and {len(warnings) - len(shown)} more warnings (--verbose shows all)")
    for s in stages:
        if s.built:
            log.debug(f"{s.stage}: {s.detail} ({s.seconds:.2f} s)")
        else:
            log.debug(f"{s.stage}: up to date")


# ---------------------------------------------------------------- shared options


def _opt(*decls, **kw) -> Callable:
    return click.option(*decls, **kw)


index_option = _opt(
    "--index",
    "index",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Index directory. Default: $SIMDOC_INDEX, else ~/.cache/simdoc/<corpus name>-<hash of its path>.",
)
jobs_option = _opt("--jobs", "-j", type=int, default=None, help="Worker processes. Default: all cores.")
quiet_option = _opt(
    "--quiet", "-q", is_flag=True, help="Print nothing on stderr but errors (and how many files were skipped, if any)."
)
verbose_option = _opt("--verbose", "-v", is_flag=True, help="Per-stage timings and every warning on stderr.")
wait_option = _opt(
    "--wait",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Seconds to wait for another run writing the same index (then exit 5).",
)
scheduler_option = _opt(
    "--scheduler",
    envvar="SIMDOC_SCHEDULER",
    default=None,
    metavar="ADDRESS",
    help="Run the work on a Dask cluster: host:port of its scheduler, or local[N] for an in-process "
    "cluster of N workers. Default: $SIMDOC_SCHEDULER, else this machine. Needs simdoc[dask].",
)
rebuild_option = _opt(
    "--rebuild", is_flag=True, help="Rebuild stages whose stored parameters differ from the ones asked for."
)
shingle_options = [
    _opt("--unit", type=click.Choice(UNITS), default=None, help="Shingle unit. Default: char."),
    _opt("--k", "k", type=click.IntRange(1, 256), default=None, help="Shingle length in units. Default: char 5, word 3, stopword 3."),
    _opt("--lowercase/--no-lowercase", default=None, help="Lowercase before shingling. Default: lowercase."),
    _opt("--max-bytes", type=click.IntRange(1), default=None, help="Read at most this many bytes of a file, or of one JSON Lines or WARC document (with a warning). Default: all."),
    _opt(
        "--include",
        multiple=True,
        metavar="GLOB",
        callback=lambda ctx, param, value: list(value) or None,
        help="Only documents whose path matches (fnmatch; * crosses /). Repeatable.",
    ),
    _opt(
        "--exclude",
        multiple=True,
        metavar="GLOB",
        callback=lambda ctx, param, value: list(value) or None,
        help="Leave out documents whose path matches; wins over --include. Repeatable.",
    ),
    _opt("--text-field", default=None, help="JSON Lines files: the field holding a document's text. Default: text."),
    _opt("--id-field", default=None, help="JSON Lines files: the field holding a document's id. Default: the line number."),
    _opt(
        "--follow-symlinks/--no-follow-symlinks",
        default=None,
        help="Follow symbolic links (loops are cut and reported). Default: links are reported, not followed.",
    ),
]
signature_options = [
    _opt("--num-perm", type=click.IntRange(1, 65536), default=None, help="MinHash signature length. Default: 128."),
    _opt("--seed", type=click.IntRange(0, 2**64 - 1), default=None, help="Seed of the hash family. Default: 1."),
    _opt(
        "--scheme",
        type=click.Choice(["classic", "oph"]),
        default=None,
        help="MinHash scheme: oph (one permutation hashed into num_perm bins, with densification) or classic "
        "(num_perm permutations, ~7x slower signatures). Default: the index's, else oph.",
    ),
]
threshold_option = _opt(
    "--threshold",
    "-t",
    type=float,
    default=None,
    help=f"Jaccard threshold in (0, 1]. Default: the index's, else {DEFAULT_THRESHOLD}.",
)
banding_options = [
    _opt("--bands", "-b", type=click.IntRange(1), default=None, help="LSH bands (with --rows; overrides --threshold's choice)."),
    _opt("--rows", "-r", type=click.IntRange(1), default=None, help="Rows per band (with --bands)."),
]


def _apply(options: list[Callable]) -> Callable:
    def deco(f: Callable) -> Callable:
        for o in reversed(options):
            f = o(f)
        return f

    return deco


def _need_index(index: Path | None) -> Path:
    if index is not None:
        return index
    import os

    env = os.environ.get("SIMDOC_INDEX")
    if env:
        return Path(env)
    raise click.UsageError("--index is required here (or set SIMDOC_INDEX)")


# ---------------------------------------------------------------- commands


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simdoc")
def cli() -> None:
    """Find near-duplicate documents: shingles, MinHash, LSH, exact Jaccard.

    \b
    Examples:
    The one command most people need:
      simdoc pairs my_corpus/            # build the index, print pairs
    or stage by stage, with the index where you want it:
      simdoc shingle my_corpus/ --index idx
      simdoc signature --index idx
      simdoc index --index idx --threshold 0.8
      simdoc pairs --index idx
    """


@cli.command()
@click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))
@_opt("--files-from", type=click.File("rb"), default=None, help="Read the files of the corpus from this list ('-': stdin), one per line.")
@_opt("--null", "-0", "null", is_flag=True, help="With --files-from: the list is NUL-separated.")
@index_option
@_apply(shingle_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def shingle(corpus, files_from, null, index, quiet, verbose, **options) -> None:
    """Turn every document under CORPUS into its set of hashed shingles.

    \b
    Example:
      simdoc shingle sample_corpus --index /tmp/idx --unit word --k 3
    """
    _setup_logging(quiet, verbose)
    corpus = _corpus_arg(corpus, files_from, null)
    if corpus is None:
        raise click.UsageError("give a CORPUS (folders or files) or --files-from")
    index = index or default_index_path(corpus)
    res = build_shingles(corpus, index, progress=_show_progress(quiet), **options)
    _report([res], verbose)
    n_skipped = len(IndexStore(index).read_manifest()["stages"]["shingle"].get("skipped", []))
    up_to_date = "up to date" + (f" ({skipped_text(n_skipped)})" if n_skipped else "")
    log.info(f"shingle: {res.detail if res.built else up_to_date} -> {index}")
    note_skipped(n_skipped, index, quiet)


@cli.command()
@index_option
@_apply(signature_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def signature(index, num_perm, seed, scheme, jobs, scheduler, rebuild, wait, quiet, verbose) -> None:
    """Compute the MinHash signature matrix of the shingled documents.

    \b
    Example:
      simdoc signature --index /tmp/idx --num-perm 256 --seed 7
    """
    _setup_logging(quiet, verbose)
    index = _need_index(index)
    res = build_signatures(
        index,
        num_perm=num_perm,
        seed=seed,
        scheme=scheme,
        jobs=jobs,
        rebuild=rebuild,
        progress=_show_progress(quiet),
        wait=wait,
        scheduler=scheduler,
    )
    _report([res], verbose)
    log.info(f"signature: {res.detail if res.built else 'up to date'}")


@cli.command("index")
@index_option
@threshold_option
@_apply(banding_options)
@scheduler_option
@wait_option
@quiet_option
@verbose_option
def index_cmd(index, threshold, bands, rows, scheduler, wait, quiet, verbose) -> None:
    """Band the signatures into LSH buckets for a Jaccard threshold.

    Reports on stderr the chosen bands b and rows r, the S-curve midpoint
    (1/b)^(1/r) and the probability that pairs at J = T-0.1, T and T+0.1
    become candidates.

    \b
    Example:
      simdoc index --index /tmp/idx --threshold 0.8
      simdoc index --index /tmp/idx --bands 20 --rows 5
    """
    _setup_logging(quiet, verbose)
    index = _need_index(index)
    res, report = build_index(index, threshold=threshold, bands=bands, rows=rows, wait=wait, scheduler=scheduler)
    _report([res], verbose)
    log.info(f"index: {report.describe()}" + ("" if res.built else " (up to date)"))


@cli.command()
@click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))
@_opt("--files-from", type=click.File("rb"), default=None, help="Read the files of the corpus from this list ('-': stdin), one per line (NUL-separated with -0).")
@index_option
@threshold_option
@_opt("--format", "-f", "fmt", type=click.Choice(FORMATS), default=None, help="Output format. Default: table on a terminal, tsv otherwise.")
@_opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@_opt("--all-candidates", is_flag=True, help="Print every candidate pair with both numbers, whatever its similarity.")
@_opt("--measure", type=click.Choice(["set", "bag"]), default="set", help="Verified similarity: set or bag Jaccard.")
@_opt("--null", "-0", "null", is_flag=True, help="NUL-terminate every field and write names as raw bytes (for xargs -0); with --files-from, the list is NUL-separated too.")
@_opt("--new", "new_only", is_flag=True, help="Only pairs with a document the latest update added or changed; adds a 5th field: a, b or both.")
@_apply(shingle_options)
@_apply(signature_options)
@_apply(banding_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def pairs(corpus, files_from, index, fmt, no_verify, null, new_only, quiet, verbose, **options) -> None:
    """Print near-duplicate pairs: doc_a, doc_b, estimated and exact Jaccard.

    With CORPUS, missing or out-of-date stages are built first (with the
    stage options given here); without it, the --index is used as it is.
    Records go to stdout, one per line; the summary and warnings to stderr.

    \b
    Examples:
      simdoc pairs sample_corpus
      simdoc pairs sample_corpus --threshold 0.8 --format jsonl > pairs.jsonl
      simdoc pairs --index /tmp/idx --all-candidates | sort -t$'\\t' -k4,4n
      simdoc pairs crawl/ --index crawl.idx --new     # nightly: what appeared today
      simdoc pairs site-a/ site-b/ notes.txt          # ids: site-a/..., site-b/..., notes.txt
      find . -name '*.md' -print0 | simdoc pairs --files-from - -0 --index md.idx
    """
    started = time.perf_counter()
    _setup_logging(quiet, verbose)
    corpus = _corpus_arg(corpus, files_from, null)
    if corpus is None and index is None and not _env_index():
        raise click.UsageError("give a CORPUS, an --index, or both")
    if corpus is None and index is None:
        index = _need_index(None)
    index = index if index is not None else default_index_path(corpus)
    if options["rebuild"] and corpus is None:
        raise click.UsageError("--rebuild needs the CORPUS (the shingles are rebuilt from it)")
    res = find_pairs(
        corpus,
        index,
        verify=not no_verify,
        new_only=new_only,
        progress=_show_progress(quiet),
        **options,
    )
    _report(res.stages, verbose)
    if verbose and res.banding:
        log.debug(f"banding: {res.banding.describe()}")
    if null and fmt is not None:
        raise click.UsageError("--null and --format go separately: -0 writes NUL-terminated fields")
    fmt = "null" if null else (fmt or ("table" if sys.stdout.isatty() else "tsv"))
    _warn_big_groups(res)
    try:
        rows = ((p.doc_a, p.doc_b, p.estimated, p.jaccard, p.new) for p in res)
        write_records(rows, fmt, sys.stdout, with_new=new_only)
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_went_away()
    _summary(res, time.perf_counter() - started)
    note_skipped(res.n_skipped, index, quiet)


def skipped_text(n_skipped: int) -> str:
    return f"{n_skipped} file{'s' if n_skipped != 1 else ''} skipped"


def note_skipped(n_skipped: int, index: Path, quiet: bool) -> None:
    """With --quiet, the one line besides errors: how many files the index skipped (cron keeps stderr)."""
    if quiet and n_skipped:
        click.echo(
            f"simdoc: {skipped_text(n_skipped)}; `simdoc stats --skipped --index {shlex.quote(str(index))}` lists them",
            err=True,
        )


def _reader_went_away() -> None:
    """The reader closed the pipe (`| head`): stop quietly with status 0, as ripgrep does."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@index_option
@threshold_option
@_opt("--files-from", type=click.File("rb"), default=None, help="Read the paths to query from this file ('-': stdin), one per line.")
@_opt("--null", "-0", "null", is_flag=True, help="With --files-from: paths are separated by NUL bytes, not newlines.")
@_opt("--format", "-f", "fmt", type=click.Choice(FORMATS), default=None, help="Output format. Default: table on a terminal, tsv otherwise.")
@_opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@_opt("--all-candidates", is_flag=True, help="Print every candidate, whatever its similarity.")
@quiet_option
@verbose_option
def query(files, index, threshold, files_from, null, fmt, no_verify, all_candidates, quiet, verbose) -> None:
    """Print the indexed near-duplicates of each FILE, without changing the index.

    Records: query, doc, estimated, jaccard (the query as given, the indexed
    document's id). FILE '-' reads one document's text from stdin. The
    threshold defaults to the one the index was banded for.

    \b
    Examples:
      simdoc query new-page.html --index crawl.idx
      curl -s https://example.org/ | simdoc query - --index crawl.idx
      find incoming -name '*.txt' -print0 | simdoc query --files-from - -0 --index crawl.idx
    """
    from simdoc.corpus import read_document
    from simdoc.query import query_documents

    _setup_logging(quiet, verbose)
    index = _need_index(index)
    names = [str(f) for f in files]
    if files_from is not None:
        raw = files_from.read()
        sep = b"\0" if null else b"\n"
        names += [os.fsdecode(p) for p in raw.split(sep) if p.strip(b"\r\n" if not null else b"")]
    if not names:
        raise click.UsageError("give at least one FILE ('-' for stdin) or --files-from")
    documents, warnings = [], []
    for name in names:
        if name == "-":
            documents.append(("-", sys.stdin.buffer.read().decode("utf-8", "replace")))
            continue
        res = read_document(name)
        if res.text is None:
            warnings.append(f"{name}: {res.warning}")
            continue
        if res.warning:
            warnings.append(f"{name}: {res.warning}")
        documents.append((name, res.text))
    matches, more = query_documents(index, documents, threshold, verify=not no_verify, all_candidates=all_candidates)
    for w in warnings + more:
        log.warning(w)
    fmt = fmt or ("table" if sys.stdout.isatty() else "tsv")
    try:
        rows = ((m.query, m.doc, m.estimated, m.jaccard) for m in matches)
        write_records(rows, fmt, sys.stdout, names=("query", "doc"))
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_went_away()
    log.info(f"simdoc: {len(documents)} queries, {len(matches)} matches")
    if documents == [] and names:
        sys.exit(3)


@cli.command()
@index_option
@quiet_option
@verbose_option
def check(index, quiet, verbose) -> None:
    """Verify an index: every file against the manifest (size, dtype, shape,
    CRC-32) and the arrays against each other. Exit 0 if sound, 4 if not;
    each problem is one line on stdout.

    \b
    Example:
      simdoc check --index /tmp/idx && echo sound
    """
    _setup_logging(quiet, verbose)
    index = _need_index(index)
    facts, problems = check_index(index)
    for f in facts:
        log.debug(f)
    for p in problems:
        click.echo(p)
    if problems:
        click.echo(f"Error: the index at {index} is damaged ({len(problems)} problems)", err=True)
        click.echo("  hint: rebuild it with `simdoc pairs CORPUS --index ... --rebuild`", err=True)
        sys.exit(4)
    log.info(f"check: the index at {index} is sound ({len(facts)} checks)")


def _corpus_arg(corpus: tuple, files_from, null: bool):
    """One folder or file as given, several of them as a list, or None; --files-from adds to them."""
    items = list(corpus)
    if files_from is not None:
        raw = files_from.read()
        sep = b"\0" if null else b"\n"
        items += [Path(os.fsdecode(p.rstrip(b"\r") if not null else p)) for p in raw.split(sep) if p.strip()]
        if not items:
            raise click.UsageError("--files-from gave no files")
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _env_index() -> bool:
    import os

    return bool(os.environ.get("SIMDOC_INDEX"))


def _warn_big_groups(res: PairsResult) -> None:
    """Said before the records, so that a person watching a flood of pairs knows why."""
    big = [g for g in res.groups if len(g) > 1000]
    if big:
        largest = max(big, key=len)
        log.warning(
            f"{len(big)} group{'s' if len(big) != 1 else ''} of more than 1,000 exact copies "
            f"(largest: {len(largest):,} documents, first {res.doc_ids[largest[0]]}): their "
            f"{res.n_group_pairs():,} pairs, all with jaccard 1, are streamed; "
            "`simdoc clusters` lists each group on one line"
        )


def _summary(res: PairsResult, seconds: float) -> None:
    """The summary line; ``seconds`` since the command started, printing the pairs included."""
    what = "pairs" if res.jaccard is not None else "pairs (estimated)"
    skipped = f" ({skipped_text(res.n_skipped)})" if res.n_skipped else ""
    cut = "all candidates" if res.all_candidates else f"{res.measure} jaccard >= {res.threshold:g}"
    msg = f"simdoc: {res.n_docs} documents{skipped}, {res.n_candidates} candidates, {len(res)} {what} ({cut}) in {seconds:.2f} s"
    log.info(msg)
    if res.stats.large_buckets:
        log.warning(
            f"{res.stats.large_buckets} LSH buckets hold 10,000 or more documents (largest: {res.stats.largest_bucket}); "
            "these are usually exact copies or boilerplate"
        )


def main() -> None:
    # A command keeps a few objects per document alive to its end and makes no cycles
    # worth collecting; the cycle collector would walk them all again and again, and
    # once more at exit (~0.2 s of a 7 s run at 10^5 documents, perf). Frozen objects
    # are left out of that last collection.
    gc.disable()
    try:
        cli.main(prog_name="simdoc")
    finally:
        gc.freeze()


from simdoc import cli_reports  # noqa: E402,F401  (registers clusters, dedup, tune, stats, show)

if __name__ == "__main__":  # pragma: no cover
    main()

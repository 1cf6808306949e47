"""The ``simdoc`` command: click commands that parse options and call the library.

Exit status: 0 success (with or without pairs), 1 internal error (a bug),
2 usage error, 3 corpus error, 4 index error, 5 index busy, 6 output could
not be written (stdout or the index), 130 interrupted.
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
from simdoc.check import check_index, out_of_date
from simdoc.errors import CorpusError, IndexError_, OutputError, SimdocError
from simdoc.filelists import chosen_list
from simdoc.lsh import DEFAULT_THRESHOLD
from simdoc.output import FORMATS, check_header, write_records
from simdoc.pipeline import (
    PairsResult,
    StageResult,
    build_index,
    build_shingles,
    build_signatures,
    default_index_path,
    find_pairs,
    mark_reported,
    open_index,
)
from simdoc.shingling import UNITS
from simdoc.stdio import discard_stdout, guarded_stdout, open_closed_descriptors
from simdoc.store import IndexStore
from simdoc.wording import count, plural

log = logging.getLogger("simdoc")
MAX_WARNINGS = 20


class _Group(click.Group):
    """Turns SimdocError into `Error: ...` on stderr and its exit code; no traceback."""

    def main(self, *args, **kwargs):
        # The guard spans --help and --version too, and the last flush after the command.
        try:
            with guarded_stdout():
                return super().main(*args, **kwargs)
        except OutputError as exc:
            _say_error(exc)
            sys.exit(exc.exit_code)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SimdocError as exc:
            _say_error(exc)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            _reader_went_away()
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)


def _say_error(exc: SimdocError) -> None:
    if isinstance(exc, OutputError) and exc.stdout:
        discard_stdout()
    for w in getattr(exc, "warnings", [])[:MAX_WARNINGS]:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"Error: {exc}", err=True)


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
        more = len(warnings) - len(shown)
        log.warning(f"... and {more} more {plural(more, 'warning')} (--verbose shows all)")
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
    "cluster of N workers. Default: $SIMDOC_SCHEDULER, else this machine. Needs Dask (the dask extra).",
)
header_option = _opt(
    "--header/--no-header",
    default=None,
    help="Start tsv output with a line of field names (as csv and the table do; --no-header leaves theirs out). "
    "Default: a header for csv and the table, none for tsv.",
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


def file_list_options(what: str) -> list[Callable]:
    """--files-from and --files0-from, for a list of ``what``."""
    return [
        _opt(
            "--files-from",
            type=click.File("rb"),
            default=None,
            metavar="FILE|-",
            help=f"Read {what} from this list ('-': stdin), one per line.",
        ),
        _opt(
            "--files0-from",
            type=click.File("rb"),
            default=None,
            metavar="FILE|-",
            help=f"Read {what} from this list ('-': stdin), NUL-separated (as find -print0 writes).",
        ),
    ]


corpus_list_options = file_list_options("the files of the corpus")


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


def _announce(index: Path) -> Path:
    """With -v, say which index directory this run uses (most are found, not named)."""
    log.debug(f"index directory: {Path(index).absolute()}")
    return index


def _index_of(corpus: tuple, index: Path | None) -> Path:
    """The index of a command that reads one: --index, else the default index of the CORPUS
    (one or more paths, not read), else $SIMDOC_INDEX."""
    if index is not None:
        return _announce(index)
    if corpus:
        path = default_index_path(corpus[0] if len(corpus) == 1 else list(corpus))
        if not IndexStore(path).exists():
            names = " ".join(shlex.quote(str(c)) for c in corpus)
            raise IndexError_(
                f"no simdoc index of {names} at {path}",
                hint=f"build it with `simdoc pairs {names}`, or name the index with --index",
            )
        return _announce(path)
    if _env_index():
        return _announce(Path(os.environ["SIMDOC_INDEX"]))
    raise click.UsageError("give a CORPUS or --index (or set SIMDOC_INDEX)")


# A reader's CORPUS only names its default index: the corpus itself is not read.
reader_corpus_argument = click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))


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
@_apply(corpus_list_options)
@_opt("--null", "-0", "null", is_flag=True, hidden=True)  # kept only to say where NUL-separated lists went
@index_option
@_apply(shingle_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def shingle(corpus, files_from, files0_from, null, index, quiet, verbose, **options) -> None:
    """Turn every document under CORPUS into its set of hashed shingles.

    \b
    Example:
      simdoc shingle sample_corpus --index /tmp/idx --unit word --k 3
    """
    _setup_logging(quiet, verbose)
    if null:
        raise click.UsageError(
            "-0/--null shapes output, and `simdoc shingle` prints no records; "
            "read a NUL-separated list of files with --files0-from"
        )
    corpus = _corpus_arg(corpus, files_from, files0_from)
    if corpus is None:
        raise click.UsageError("give a CORPUS (folders or files), --files-from or --files0-from")
    index = _announce(index or default_index_path(corpus))
    res = build_shingles(corpus, index, progress=_show_progress(quiet), **options)
    _report([res], verbose)
    n_skipped = len(IndexStore(index).read_manifest()["stages"]["shingle"].get("skipped", []))
    up_to_date = "up to date" + (f" ({skipped_text(n_skipped)})" if n_skipped else "")
    log.info(f"shingle: {res.detail if res.built else up_to_date} -> {index}")
    note_skipped(n_skipped, index, quiet)


@cli.command()
@reader_corpus_argument
@index_option
@_apply(signature_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def signature(corpus, index, num_perm, seed, scheme, jobs, scheduler, rebuild, wait, quiet, verbose) -> None:
    """Compute the MinHash signature matrix of the shingled documents.

    \b
    Example:
      simdoc signature --index /tmp/idx --num-perm 256 --seed 7
      simdoc signature my_corpus --num-perm 256    # the default index of my_corpus (not read)
    """
    _setup_logging(quiet, verbose)
    index = _index_of(corpus, index)
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
@reader_corpus_argument
@index_option
@threshold_option
@_apply(banding_options)
@scheduler_option
@wait_option
@quiet_option
@verbose_option
def index_cmd(corpus, index, threshold, bands, rows, scheduler, wait, quiet, verbose) -> None:
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
    _setup_logging(quiet, verbose)
    index = _index_of(corpus, index)
    res, report = build_index(index, threshold=threshold, bands=bands, rows=rows, wait=wait, scheduler=scheduler)
    _report([res], verbose)
    log.info(f"index: {report.describe()}" + ("" if res.built else " (up to date)"))


@cli.command()
@click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))
@_apply(corpus_list_options)
@index_option
@threshold_option
@_opt("--format", "-f", "fmt", type=click.Choice(FORMATS), default=None, help="Output format. Default: table on a terminal, tsv otherwise.")
@_opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@_opt("--all-candidates", is_flag=True, help="Print every candidate pair with both numbers, whatever its similarity.")
@_opt("--measure", type=click.Choice(["set", "bag"]), default="set", help="Verified similarity: set or bag Jaccard.")
@_opt("--null", "-0", "null", is_flag=True, help="NUL-terminate every field and write names as raw bytes (for xargs -0). Output only: a NUL-separated list of files is read with --files0-from.")
@_opt("--new", "new_only", is_flag=True, help="Only pairs with a document the latest update added or changed; adds a 5th field: a, b or both.")
@header_option
@_apply(shingle_options)
@_apply(signature_options)
@_apply(banding_options)
@jobs_option
@scheduler_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def pairs(corpus, files_from, files0_from, index, fmt, no_verify, null, new_only, header, quiet, verbose, **options) -> None:
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
      find . -name '*.md' -print0 | simdoc pairs --files0-from - --index md.idx
    """
    started = time.perf_counter()
    _setup_logging(quiet, verbose)
    check_header(header, "null" if null else fmt)
    corpus = _corpus_arg(corpus, files_from, files0_from)
    if corpus is None and index is None and not _env_index():
        raise click.UsageError("give a CORPUS, an --index, or both")
    if index is None:
        index = default_index_path(corpus) if corpus is not None else _need_index(None)
    _announce(index)
    if options["rebuild"] and corpus is None:
        raise click.UsageError("--rebuild needs the CORPUS (the shingles are rebuilt from it)")
    if null and fmt is not None:
        raise click.UsageError("--null and --format go separately: -0 writes NUL-terminated fields")
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
    fmt = "null" if null else (fmt or ("table" if sys.stdout.isatty() else "tsv"))
    _warn_big_groups(res)
    try:
        rows = ((p.doc_a, p.doc_b, p.estimated, p.jaccard, p.new) for p in res)
        write_records(rows, fmt, sys.stdout, with_new=new_only, header=header)
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_went_away()
    if new_only:
        # Only a report written in full counts: a run killed before this line leaves its
        # documents new for the next --new report.
        mark_reported(res.index, res.generation, options.get("wait") or 0.0)
    _summary(res, time.perf_counter() - started)
    note_skipped(res.n_skipped, index, quiet)


def skipped_text(n_skipped: int) -> str:
    return count(n_skipped, "file skipped")


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
@_opt(
    "--corpus",
    "corpus",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Use the default index of this corpus (repeat for a corpus of several paths); it is not read.",
)
@threshold_option
@_apply(file_list_options("the paths to query"))
@_opt("--format", "-f", "fmt", type=click.Choice(FORMATS), default=None, help="Output format. Default: table on a terminal, tsv otherwise.")
@_opt("--null", "-0", "null", is_flag=True, help="NUL-terminate every field and write names as raw bytes (for xargs -0). Output only: a NUL-separated list of paths is read with --files0-from.")
@_opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@_opt("--all-candidates", is_flag=True, help="Print every candidate, whatever its similarity.")
@_opt("--text-field", default=None, help="JSON Lines queries: the field holding a document's text. Default: the index's.")
@_opt("--id-field", default=None, help="JSON Lines queries: the field holding a document's id. Default: the index's, else the line number.")
@header_option
@quiet_option
@verbose_option
def query(
    files, index, corpus, threshold, files_from, files0_from, fmt, null, no_verify, all_candidates, text_field, id_field,
    header, quiet, verbose,
) -> None:
    """Print the indexed near-duplicates of each FILE, without changing the index.

    Records: query, doc, estimated, jaccard (the query as given, the indexed
    document's id). FILE '-' reads one document's text from stdin. A FILE is
    read as `simdoc pairs` would read it: each member of a JSON Lines or
    WARC file is a query of its own (FILE#LINE or FILE#ID with --id-field,
    FILE#URI), an HTML page is its visible text. The threshold defaults to
    the one the index was banded for.

    \b
    Examples:
      simdoc query new-page.html --index crawl.idx
      simdoc query draft.txt --corpus my_corpus      # the default index of my_corpus
      simdoc query todays-crawl.warc.gz --index crawl.idx
      simdoc query new.jsonl --id-field id --index data.idx
      curl -s https://example.org/ | simdoc query - --index crawl.idx
      find incoming -name '*.txt' -print0 | simdoc query --files0-from - --index crawl.idx
    """
    from simdoc.file_texts import read_file_texts
    from simdoc.query import query_documents

    _setup_logging(quiet, verbose)
    check_header(header, "null" if null else fmt)
    index = _index_of(corpus, index)
    if null and fmt is not None:
        raise click.UsageError("--null and --format go separately: -0 writes NUL-terminated fields")
    listed = chosen_list(files_from, files0_from)
    if listed is not None and not listed and not files:
        raise _empty_list(files_from, files0_from)
    names = [str(f) for f in files] + (listed or [])
    if not names:
        raise click.UsageError("give at least one FILE ('-' for stdin), --files-from or --files0-from")
    # Read the queries the way the index read its documents.
    stored = open_index(index).stage("shingle")["params"]
    documents, warnings = [], []
    for name in names:
        if name == "-":
            documents.append(("-", sys.stdin.buffer.read().decode("utf-8", "replace")))
            continue
        got = read_file_texts(
            name,
            max_bytes=stored.get("max_bytes"),
            follow_symlinks=bool(stored.get("follow_symlinks")),
            text_field=text_field or stored.get("text_field") or "text",
            id_field=id_field or stored.get("id_field"),
        )
        documents += got.documents
        warnings += got.warnings
    matches, more = query_documents(index, documents, threshold, verify=not no_verify, all_candidates=all_candidates)
    for w in warnings + more:
        log.warning(w)
    fmt = "null" if null else (fmt or ("table" if sys.stdout.isatty() else "tsv"))
    try:
        rows = ((m.query, m.doc, m.estimated, m.jaccard) for m in matches)
        write_records(rows, fmt, sys.stdout, names=("query", "doc"), header=header)
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_went_away()
    log.info(f"simdoc: {count(len(documents), 'query')}, {count(len(matches), 'match')}")
    if documents == [] and names:
        click.echo(f"Error: no query could be read from {count(len(names), 'file')} (see the warnings above)", err=True)
        sys.exit(3)


@cli.command()
@reader_corpus_argument
@index_option
@quiet_option
@verbose_option
def check(corpus, index, quiet, verbose) -> None:
    """Verify an index: every file against the manifest (size, dtype, shape,
    CRC-32) and the arrays against each other. Exit 0 if sound, 4 if not;
    each problem is one line on stdout.

    \b
    Example:
      simdoc check --index /tmp/idx && echo sound
      simdoc check my_corpus                      # the default index of my_corpus
    """
    _setup_logging(quiet, verbose)
    index = _index_of(corpus, index)
    facts, problems = check_index(index)
    stale = out_of_date(facts)
    for f in facts:
        # A stage out of date is no damage (exit 0), but the readers refuse it until a
        # `pairs` run rebuilds it: say so without -v.
        (log.info if f in stale else log.debug)(f"check: {f}" if f in stale else f)
    for p in problems:
        click.echo(p)
    if problems:
        click.echo(f"Error: the index at {index} is damaged ({count(len(problems), 'problem')})", err=True)
        click.echo("  hint: rebuild it with `simdoc pairs CORPUS --index ... --rebuild`", err=True)
        sys.exit(4)
    log.info(f"check: the index at {index} is sound ({count(len(facts), 'check')})")


def _corpus_arg(corpus: tuple, files_from, files0_from=None):
    """One folder or file as given, several of them as a list, or None; --files-from or --files0-from adds to them."""
    items = list(corpus)
    listed = chosen_list(files_from, files0_from)
    if listed is not None:
        items += [Path(p) for p in listed]
        if not items:
            raise _empty_list(files_from, files0_from)
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _empty_list(files_from, files0_from=None) -> CorpusError:
    """An empty list is "no documents" (exit 3), not a usage error: `find ... | simdoc` on a quiet day."""
    given, flag = (files0_from, "--files0-from") if files0_from is not None else (files_from, "--files-from")
    name = "stdin" if getattr(given, "name", "-") in ("-", "<stdin>") else given.name
    return CorpusError(f"{flag} {name} lists no files: no documents", hint="give a list with at least one path")


def _env_index() -> bool:
    import os

    return bool(os.environ.get("SIMDOC_INDEX"))


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
    cut = "all candidates" if res.all_candidates else f"{res.measure} jaccard >= {res.threshold:g}"
    msg = (
        f"simdoc: {count(res.n_docs, 'document')}{skipped}, {count(res.n_candidates, 'candidate')}, "
        f"{pairs} ({cut}) in {seconds:.2f} s"
    )
    log.info(msg)
    if res.stats.large_buckets:
        hold = "holds" if res.stats.large_buckets == 1 else "hold"
        log.warning(
            f"{count(res.stats.large_buckets, 'LSH bucket')} {hold} 10,000 or more documents "
            f"(largest: {res.stats.largest_bucket}); "
            "these are usually exact copies or boilerplate"
        )


def main() -> None:
    # A command keeps a few objects per document alive to its end and makes no cycles
    # worth collecting; the cycle collector would walk them all again and again, and
    # once more at exit (~0.2 s of a 7 s run at 10^5 documents, perf). Frozen objects
    # are left out of that last collection.
    gc.disable()
    open_closed_descriptors()
    try:
        cli.main(prog_name="simdoc")
    finally:
        gc.freeze()


from simdoc import cli_reports  # noqa: E402,F401  (registers clusters, dedup, tune, stats, show)
from simdoc import cli_cache  # noqa: E402,F401  (registers cache list, cache clean)

if __name__ == "__main__":  # pragma: no cover
    main()

"""What the simdoc commands share: option decorators, logging to stderr, finding the index.

The options several commands take (``--index``, ``--threshold``, the
shingle, signature and banding options, ``--files-from``/``--files0-from``...),
each defined here once and applied to a command as a decorator or, for a
list of them, with :func:`with_options`; ``--format`` and ``-0/--null`` too
(:func:`format_option`, :func:`null_option`), whose combinations a command
checks first of all (:func:`check_output_flags`). The helpers turn what the
options say into what the library takes: :func:`corpus_arg`, :func:`index_of`
and :func:`check_corpus_index` resolve CORPUS and ``--index``,
:func:`setup_logging` and :func:`report_stages` put warnings and timings on
stderr. Imported by every command module of :mod:`simdoc.cli`; it imports
none of them.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from simdoc.cli.seconds import NON_NEGATIVE
from simdoc.corpus.filelists import chosen_list, listed
from simdoc.corpus.objects import configure, is_url, parse_option
from simdoc.engines.dask_waiting import DEFAULT_WAIT_WORKERS
from simdoc.engines.dask_contract import ANSWER_FLOOR
from simdoc import kernel_choice
from simdoc.errors import CorpusError, IndexError_, UsageError
from simdoc.output import FORMATS, check_header, visible_text
from simdoc.params import DEFAULT_THRESHOLD
from simdoc.shingling import UNITS
from simdoc.stages.common import default_index_path
from simdoc.stages.results import StageResult
from simdoc.store.directory import IndexStore
from simdoc.wording import count, plural

log = logging.getLogger("simdoc")
MAX_WARNINGS = 20


class _StderrHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        prefix = "warning: " if record.levelno >= logging.WARNING else ""
        # A file's name in a message may hold ESC or U+202E: escaped, as printed names are.
        click.echo(f"{prefix}{visible_text(record.getMessage())}", err=True)


def setup_logging(quiet: bool, verbose: bool) -> None:
    log.handlers[:] = [_StderrHandler()]
    log.propagate = False
    log.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)
    kernel_choice.announce(show_progress(quiet))


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def warn_capped(warnings: Sequence[str], verbose: bool, what: str = "") -> None:
    """Log ``warnings``: all of them with ``verbose``, else the first :data:`MAX_WARNINGS` and one
    line counting the rest, so that thousands of them (a big corpus's) do not bury the summary.

    ``what`` says what they are about in that line, with how many there are in all
    (``"of documents left out"``: "... and 9 more warnings of documents left out, 29 in all").
    """
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    for w in shown:
        log.warning(w)
    if len(warnings) > len(shown):
        more = len(warnings) - len(shown)
        of = f" {what}, {len(warnings)} in all" if what else ""
        log.warning(f"... and {more} more {plural(more, 'warning')}{of} (--verbose shows all)")


def report_stages(stages: list[StageResult], verbose: bool) -> None:
    for s in stages:
        for n in s.notes:
            log.info(n)
    # A file skipped is warned about once (simdoc.stages.skipped); --verbose lists them all.
    warn_capped([w for s in stages for w in s.warnings + (s.repeated if verbose else [])], verbose)
    for s in stages:
        if s.built:
            log.debug(f"{s.stage}: {s.detail} ({s.seconds:.2f} s)")
        else:
            log.debug(f"{s.stage}: up to date")


# ---------------------------------------------------------------- shared options


opt = click.option  # every option below is declared with it


class CorpusPath(click.ParamType):
    """A CORPUS argument: a path (as ``click.Path(path_type=Path)`` gives it), or a URL kept as
    typed (``s3://bucket/prefix/``: a Path would fold its ``//``)."""

    name = "path"

    def __init__(self, allow_dash: bool = False, file_okay: bool = True) -> None:
        self._path = click.Path(path_type=Path, allow_dash=allow_dash, file_okay=file_okay)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and is_url(value):
            return value
        return self._path.convert(value, param, ctx)


corpus_type = CorpusPath()


def _storage_options(ctx, param, values) -> None:
    """--storage-option KEY=VALUE, for this run only (never written to the index)."""
    try:
        configure(dict(parse_option(v) for v in values))
    except UsageError as exc:
        raise click.BadParameter(exc.message, ctx, param) from None


storage_option = opt(
    "--storage-option",
    multiple=True,
    metavar="KEY=VALUE",
    expose_value=False,
    callback=_storage_options,
    help="A corpus at a URL (s3://bucket/prefix/): an fsspec storage option, VALUE as JSON where it parses "
    "(endpoint_url=http://host:9000, anon=true, key=..., secret=...); repeatable. Not kept in the index.",
)

index_option = opt(
    "--index",
    "index",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Index directory. Default: $SIMDOC_INDEX, else ~/.cache/simdoc/<corpus name>-<hash of its path>.",
)
jobs_option = opt("--jobs", "-j", type=int, default=None, help="Worker processes. Default: all cores.")


def quiet_flag(help: str = "Print nothing on stderr but errors.") -> Callable:
    """--quiet/-q, with what it silences for the command at hand."""
    return opt("--quiet", "-q", is_flag=True, help=help)


def verbose_flag(help: str) -> Callable:
    """--verbose/-v, with what it adds for the command at hand."""
    return opt("--verbose", "-v", is_flag=True, help=help)


# The commands that read a corpus and build stages; the others say what the two flags do for them.
quiet_option = quiet_flag("Print nothing on stderr but errors (and how many files were skipped, if any).")
verbose_option = verbose_flag("Per-stage timings, the index directory used, and every warning on stderr.")
wait_option = opt(
    "--wait",
    type=NON_NEGATIVE,
    default=0.0,
    show_default=True,
    help="Seconds to wait for another run writing the same index (then exit 5).",
)
_scheduler_flag = opt(
    "--scheduler",
    envvar="SIMDOC_SCHEDULER",
    default=None,
    metavar="ADDRESS",
    help="Run the work on a Dask cluster: host:port of its scheduler, or local[N] for an in-process "
    "cluster of N workers. Default: $SIMDOC_SCHEDULER, else this machine. Needs Dask (the dask extra).",
)
wait_workers_option = opt(
    "--wait-workers",
    type=NON_NEGATIVE,
    default=None,
    metavar="SECONDS",
    help=f"With --scheduler: seconds to wait for a first Dask worker before giving up (exit 7), and "
    f"for each worker to answer simdoc's check (at least {ANSWER_FLOOR:g}); during the run, for a worker "
    f"again once every worker has left (exit 7). Default: {DEFAULT_WAIT_WORKERS:g}.",
)


def scheduler_option(f: Callable) -> Callable:
    """--scheduler and --wait-workers, which go together."""
    return _scheduler_flag(wait_workers_option(f))


RECORD_FORMATS = FORMATS  # tsv, csv, jsonl, table: records of fields (pairs, query)
REPORT_FORMATS = ("text", "json")  # a report for people, or one JSON object (tune, stats, show)


def format_option(choices: Sequence[str], help: str, default: str | None = None) -> Callable:
    """--format/-f, into ``fmt``: one spelling for every command that can print in more than one way."""
    return opt("--format", "-f", "fmt", type=click.Choice(list(choices)), default=default, help=help)


def null_option(help: str | None = None) -> Callable:
    """-0/--null, into ``null``: NUL-terminated output. Without ``help`` it is hidden (a command that
    prints no records takes it only to say where NUL-separated input lists went)."""
    return opt("--null", "-0", "null", is_flag=True, hidden=help is None, help=help)


def check_output_flags(null: bool, fmt: str | None, header: bool | None = None, *, null_format: str | None = None) -> None:
    """Refuse output flags that contradict each other: a command's first check, before any work.

    -0 is a format of its own, so it goes with no --format; except where it
    only changes how ``null_format`` (dedup's path list) ends its lines.
    """
    if null and fmt is not None and fmt != null_format:
        if null_format is None:
            raise click.UsageError("--null and --format go separately: -0 writes NUL-terminated fields")
        raise click.UsageError(f"-0/--null goes with the default path list (--format {null_format})")
    check_header(header, "null" if null and null_format is None else fmt)


header_option = opt(
    "--header/--no-header",
    default=None,
    help="Start tsv output with a line of field names (as csv and the table do; --no-header leaves theirs out). "
    "Default: a header for csv and the table, none for tsv.",
)
rebuild_option = opt(
    "--rebuild", is_flag=True, help="Rebuild stages whose stored parameters differ from the ones asked for."
)
shingle_options = [
    opt("--unit", type=click.Choice(UNITS), default=None, help="Shingle unit. Default: char."),
    opt("--k", "k", type=click.IntRange(1, 256), default=None, help="Shingle length in units. Default: char 5, word 3, stopword 3."),
    opt("--lowercase/--no-lowercase", default=None, help="Lowercase before shingling. Default: lowercase."),
    opt(
        "--unicode",
        type=click.Choice(["none", "NFC", "NFKC"]),
        default=None,
        help="Unicode normalisation before shingling: NFC makes canonically equivalent texts equal, NFKC also folds "
        "compatibility forms (ligatures, full-width letters, superscripts). Default: NFC.",
    ),
    opt(
        "--min-length",
        type=click.IntRange(0),
        default=None,
        help="Leave out documents shorter than this many shingle units (characters, or words), as normalised; "
        "`simdoc stats --skipped` lists them. Default: 0 (every document).",
    ),
    opt("--max-bytes", type=click.IntRange(1), default=None, help="Read at most this many bytes of a file, or of one JSON Lines or WARC document (with a warning). Default: all."),
    opt(
        "--include",
        multiple=True,
        metavar="GLOB",
        callback=lambda ctx, param, value: list(value) or None,
        help="Index only the documents whose path matches (fnmatch; * crosses /); repeatable. An index setting, "
        "not an output filter: the index keeps its globs (others need --rebuild or another --index), and only "
        "the files they select are warned about or counted as skipped.",
    ),
    opt(
        "--exclude",
        multiple=True,
        metavar="GLOB",
        callback=lambda ctx, param, value: list(value) or None,
        help="Leave the documents whose path matches out of the index; wins over --include. Repeatable. "
        "An index setting, as --include is.",
    ),
    opt("--text-field", default=None, help="JSON Lines files: the field holding a document's text. Default: text."),
    opt(
        "--main-content/--no-main-content",
        default=None,
        help="HTML pages and WARC records: keep only a page's main text (navigation, menus and footers dropped). "
        "Default: all visible text.",
    ),
    opt(
        "--all-responses/--no-all-responses",
        default=None,
        help="WARC files: also index HTTP responses whose status is not 2xx, and revisit records. "
        "Default: left out, and listed by `simdoc stats --skipped`.",
    ),
    opt("--id-field", default=None, help="JSON Lines files: the field holding a document's id. Default: the line number."),
    opt(
        "--follow-symlinks/--no-follow-symlinks",
        default=None,
        help="Follow symbolic links (loops are cut and reported). Default: links are reported, not followed.",
    ),
    storage_option,
]
signature_options = [
    opt("--num-perm", type=click.IntRange(1, 65536), default=None, help="MinHash signature length. Default: 128."),
    opt("--seed", type=click.IntRange(0, 2**64 - 1), default=None, help="Seed of the hash family. Default: 1."),
    opt(
        "--scheme",
        type=click.Choice(["classic", "oph"]),
        default=None,
        help="MinHash scheme: oph (one permutation hashed into num_perm bins, with densification) or classic "
        "(num_perm permutations, ~7x slower signatures). Default: the index's, else oph.",
    ),
]
threshold_option = opt(
    "--threshold",
    "-t",
    type=float,
    default=None,
    help=f"Jaccard threshold in (0, 1]. Default: the index's, else {DEFAULT_THRESHOLD}.",
)
banding_options = [
    opt("--bands", "-b", type=click.IntRange(1), default=None, help="LSH bands (with --rows; overrides --threshold's choice)."),
    opt("--rows", "-r", type=click.IntRange(1), default=None, help="Rows per band (with --bands)."),
]


def file_list_options(what: str) -> list[Callable]:
    """--files-from and --files0-from, for a list of ``what``."""
    return [
        opt(
            "--files-from",
            type=click.File("rb"),
            default=None,
            metavar="FILE|-",
            help=f"Read {what} from this list ('-': stdin), one per line.",
        ),
        opt(
            "--files0-from",
            type=click.File("rb"),
            default=None,
            metavar="FILE|-",
            help=f"Read {what} from this list ('-': stdin), NUL-separated (as find -print0 writes).",
        ),
    ]


corpus_list_options = file_list_options("the files of the corpus")


def with_options(options: list[Callable]) -> Callable:
    """One decorator for a list of options; they appear in --help in the order listed."""

    def deco(f: Callable) -> Callable:
        for o in reversed(options):
            f = o(f)
        return f

    return deco


def need_index(index: Path | None) -> Path:
    if index is not None:
        return index
    env = os.environ.get("SIMDOC_INDEX")
    if env:
        return Path(env)
    raise click.UsageError("--index is required here (or set SIMDOC_INDEX)")


def announce_index(index: Path) -> Path:
    """With -v, say which index directory this run uses (most are found, not named)."""
    log.debug(f"index directory: {Path(index).absolute()}")
    return index


def index_of(corpus: tuple, index: Path | None) -> Path:
    """The index of a command that reads one: --index, else the default index of the CORPUS
    (one or more paths, not read), else $SIMDOC_INDEX."""
    if index is not None:
        return announce_index(index)
    if corpus:
        path = default_index_path(corpus[0] if len(corpus) == 1 else list(corpus))
        if not IndexStore(path).exists():
            names = " ".join(shlex.quote(str(c)) for c in corpus)
            if len(corpus) == 1 and IndexStore(corpus[0]).exists():  # an index given where a corpus goes
                hint = f"{names} is an index itself: name it with --index {names}"
            else:
                hint = f"build it with `simdoc pairs {names}`, or name the index with --index"
            raise IndexError_(f"no simdoc index of {names} at {path}", hint=hint)
        return announce_index(path)
    if env_index():
        return announce_index(Path(os.environ["SIMDOC_INDEX"]))
    raise click.UsageError("give a CORPUS or --index (or set SIMDOC_INDEX)")


def check_corpus_index(corpus: Path | None, index: Path | None, rebuild: bool) -> Path:
    """The index directory of a command that builds stages as `pairs` does (clusters, dedup, show), with its rules."""
    if corpus is None and index is None and not env_index():
        raise click.UsageError("give a CORPUS, an --index, or both")
    if rebuild and corpus is None:
        raise click.UsageError("--rebuild needs the CORPUS (the shingles are rebuilt from it)")
    if index is not None:
        return announce_index(index)
    return announce_index(default_index_path(corpus) if corpus is not None else need_index(None))


# A reader's CORPUS only names its default index: the corpus itself is not read.
reader_corpus_argument = click.argument("corpus", nargs=-1, type=corpus_type)


# ---------------------------------------------------------------- helpers


def skipped_text(n_skipped: int) -> str:
    return count(n_skipped, "file skipped")


def note_skipped(n_skipped: int, index: Path, quiet: bool, n_damaged: int = 0) -> None:
    """With --quiet, the one line besides errors: how many files the index skipped, or read only in
    part because they are damaged or cut short (cron keeps stderr)."""
    what = ([skipped_text(n_skipped)] if n_skipped else []) + ([count(n_damaged, "file") + " damaged or cut short, read in part"] if n_damaged else [])
    if quiet and what:
        click.echo(f"simdoc: {', '.join(what)}; `simdoc stats --skipped --index {shlex.quote(str(index))}` lists them", err=True)


def reader_went_away() -> None:
    """The reader closed the pipe (`| head`): stop quietly with status 0, as ripgrep does."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def corpus_arg(corpus: tuple, files_from, files0_from=None):
    """One folder or file as given, several of them as a list, or None; --files-from or --files0-from adds to them
    (as ListedPath or ListedURL: a name listed that is gone is a file skipped, not an error)."""
    items = list(corpus)
    names = chosen_list(files_from, files0_from)
    if names is not None:
        items += [listed(p) for p in names]
        if not items:
            raise empty_list(files_from, files0_from)
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def empty_list(files_from, files0_from=None) -> CorpusError:
    """An empty list is "no documents" (exit 3), not a usage error: `find ... | simdoc` on a quiet day."""
    given, flag = (files0_from, "--files0-from") if files0_from is not None else (files_from, "--files-from")
    name = "stdin" if getattr(given, "name", "-") in ("-", "<stdin>") else given.name
    return CorpusError(f"{flag} {name} lists no files: no documents", hint="give a list with at least one path")


def env_index() -> bool:
    return bool(os.environ.get("SIMDOC_INDEX"))


def emit(lines) -> None:
    """Write records to stdout; a reader that goes away (`| head`) ends the command quietly."""
    try:
        for line in lines:
            sys.stdout.write(line)
        sys.stdout.flush()
    except BrokenPipeError:
        reader_went_away()

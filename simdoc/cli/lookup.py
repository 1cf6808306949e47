"""``simdoc query`` (look documents up without adding them) and ``simdoc check`` (verify an index).

Plain click commands, registered on the ``simdoc`` group by :mod:`simdoc.cli`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from simdoc.cli.options import (
    RECORD_FORMATS,
    check_output_flags,
    empty_list,
    file_list_options,
    format_option,
    header_option,
    index_of,
    index_option,
    null_option,
    opt,
    quiet_option,
    reader_corpus_argument,
    reader_went_away,
    setup_logging,
    threshold_option,
    verbose_option,
    with_options,
)
from simdoc.corpus.filelists import chosen_list
from simdoc.output import write_records
from simdoc.params import DEFAULT_TEXT_FIELD
from simdoc.reports.check import check_index, out_of_date
from simdoc.store.loaded import open_index
from simdoc.store.locks import lock_file_problems
from simdoc.wording import count

log = logging.getLogger("simdoc")

@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@index_option
@opt(
    "--corpus",
    "corpus",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Use the default index of this corpus (repeat for a corpus of several paths); it is not read.",
)
@threshold_option
@with_options(file_list_options("the paths to query"))
@format_option(RECORD_FORMATS, "Output format. Default: table on a terminal, tsv otherwise.")
@null_option(
    "NUL-terminate every field and write names as raw bytes (for xargs -0). "
    "Output only: a NUL-separated list of paths is read with --files0-from."
)
@opt("--no-verify", is_flag=True, help="Skip exact Jaccard; filter and sort by the MinHash estimate.")
@opt("--all-candidates", is_flag=True, help="Print every candidate, whatever its similarity.")
@opt("--text-field", default=None, help="JSON Lines queries: the field holding a document's text. Default: the index's.")
@opt("--id-field", default=None, help="JSON Lines queries: the field holding a document's id. Default: the index's, else the line number.")
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
    from simdoc.corpus.file_texts import read_file_texts
    from simdoc.reports.query import query_documents

    setup_logging(quiet, verbose)
    check_output_flags(null, fmt, header)
    index = index_of(corpus, index)
    listed = chosen_list(files_from, files0_from)
    if listed is not None and not listed and not files:
        raise empty_list(files_from, files0_from)
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
            text_field=text_field or stored.get("text_field") or DEFAULT_TEXT_FIELD,
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
        reader_went_away()
    log.info(f"simdoc: {count(len(documents), 'query')}, {count(len(matches), 'match')}")
    if documents == [] and names:
        click.echo(f"Error: no query could be read from {count(len(names), 'file')} (see the warnings above)", err=True)
        sys.exit(3)


@click.command()
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
    setup_logging(quiet, verbose)
    index = index_of(corpus, index)
    facts, problems = check_index(index)
    stale = out_of_date(facts)
    for f in facts:
        # A stage out of date is no damage (exit 0), but the readers refuse it until a
        # `pairs` run rebuilds it: say so without -v.
        (log.info if f in stale else log.debug)(f"check: {f}" if f in stale else f)
    for p in problems:
        click.echo(p)
    if problems and problems == lock_file_problems(Path(index)):  # its data is sound; no writer can take it
        click.echo(f"Error: the index at {index} cannot be updated ({count(len(problems), 'problem')})", err=True)
        click.echo("  hint: remove what the lines above name; simdoc makes new lock files", err=True)
        sys.exit(4)
    if problems:
        click.echo(f"Error: the index at {index} is damaged ({count(len(problems), 'problem')})", err=True)
        click.echo("  hint: rebuild it with `simdoc pairs CORPUS --index ... --rebuild`", err=True)
        sys.exit(4)
    log.info(f"check: the index at {index} is sound ({count(len(facts), 'check')})")



"""``simdoc query`` (look documents up without adding them) and ``simdoc check`` (verify an index).

Plain click commands, registered on the ``simdoc`` group by :mod:`simdoc.cli`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from simdoc.cli.options import (
    RECORD_FORMATS,
    CorpusPath,
    check_output_flags,
    empty_list,
    file_list_options,
    format_option,
    header_option,
    index_of,
    index_option,
    null_option,
    opt,
    quiet_flag,
    reader_corpus_argument,
    storage_option,
    reader_went_away,
    setup_logging,
    threshold_option,
    verbose_flag,
    with_options,
)
from simdoc.corpus.filelists import chosen_list
from simdoc.output import write_records
from simdoc.params import DEFAULT_TEXT_FIELD
from simdoc.reports.check import check_index, out_of_date
from simdoc.store.loaded import open_index
from simdoc.store.locks import lock_file_problems
from simdoc.wording import count

if TYPE_CHECKING:
    from simdoc.corpus.long_text import LongText

log = logging.getLogger("simdoc")

@click.command()
@click.argument("files", nargs=-1, type=CorpusPath(allow_dash=True))  # a URL (s3://...) stays one
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
@storage_option
@quiet_flag("Print nothing on stderr but errors (no warnings, no summary line).")
@verbose_flag("Also print the index directory used, on stderr.")
def query(
    files, index, corpus, threshold, files_from, files0_from, fmt, null, no_verify, all_candidates, text_field, id_field,
    header, quiet, verbose,
) -> None:
    """Print the indexed near-duplicates of each FILE, without changing the index.

    Records: query, doc, estimated, jaccard (the query as given, the indexed
    document's id). FILE '-' reads one document's text from stdin. A FILE is
    read as `simdoc pairs` would read it: each member of a JSON Lines or
    WARC file is a query of its own (FILE/#LINE, or FILE/#ID with --id-field;
    FILE/#URI), an HTML page is its visible text. The threshold defaults to
    the one the index was banded for (else 0.6, said on stderr).

    \b
    Examples:
      simdoc query new-page.html --index crawl.idx
      simdoc query draft.txt --corpus my_corpus      # the default index of my_corpus
      simdoc query todays-crawl.warc.gz --index crawl.idx
      simdoc query new.jsonl --id-field id --index data.idx
      curl -s https://example.org/ | simdoc query - --index crawl.idx
      find incoming -name '*.txt' -print0 | simdoc query --files0-from - --index crawl.idx
    """
    from simdoc.reports.query import iter_matches

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
    read = _Queries(names, stored, text_field, id_field)
    chosen = []
    matches = iter_matches(
        index, read, threshold, verify=not no_verify, all_candidates=all_candidates, warn=log.warning,
        chosen=chosen.append,
    )
    fmt = "null" if null else (fmt or ("table" if sys.stdout.isatty() else "tsv"))
    # The records are written as each batch of queries is done (memory does not grow with
    # their number); warnings go to stderr as they arise.
    n_matches = 0
    try:
        rows = ((m.query, m.doc, m.estimated, m.jaccard) for m in matches)
        n_matches = write_records(rows, fmt, sys.stdout, names=("query", "doc"), header=header)
        sys.stdout.flush()
    except BrokenPipeError:
        reader_went_away()
    cut = "all candidates" if all_candidates or not chosen else chosen[0].describe()
    unread = f" ({count(read.n_unread, 'file')} gave none: see the warnings)" if read.n_unread else ""
    log.info(f"simdoc: {count(read.n_read, 'query')}{unread}, {count(n_matches, 'match')} ({cut})")
    if quiet and read.n_unread and read.n_read:  # never silent: a file named gave no query
        click.echo(f"simdoc: {count(read.n_unread, 'file')} named gave no query; run without -q to read why", err=True)
    if read.n_read == 0:
        click.echo(f"Error: no query could be read from {count(len(names), 'file')} (see the warnings above)", err=True)
        sys.exit(3)


class _Queries:
    """The query documents of the files named, read one file at a time as they are taken.

    A Parquet file gives all its documents at once (as `simdoc pairs` reads
    it); each is let go once it is taken. A JSON Lines or WARC file over
    4 MiB, or compressed, has its texts spilled to a temporary file as it is
    read, and each read back as it is taken (:class:`simdoc.corpus.file_texts.SpilledMembers`). A long plain file, or
    long text on stdin, is not held but read again as it is used
    (:mod:`simdoc.corpus.long_text`).
    """

    def __init__(self, names: list[str], stored: dict, text_field: str | None, id_field: str | None) -> None:
        self.names = names
        self.stored = stored
        self.text_field = text_field or stored.get("text_field") or DEFAULT_TEXT_FIELD
        self.id_field = id_field or stored.get("id_field")
        self.n_given = 0
        self.n_none = 0  # files (or stdin) that gave no query: each said why in a warning
        self.long: list[LongText] = []  # found unreadable only when first used

    @property
    def n_read(self) -> int:
        return self.n_given - sum(t.failed for t in self.long)

    @property
    def n_unread(self) -> int:
        """Files named that gave no query (skipped, or holding no document)."""
        return self.n_none + sum(t.failed for t in self.long)

    def __iter__(self) -> Iterator[tuple[str, str | LongText]]:
        from simdoc.corpus.file_texts import SpilledMembers, read_file_texts
        from simdoc.corpus.long_text import LongText, long_file, read_stdin

        max_bytes, follow = self.stored.get("max_bytes"), bool(self.stored.get("follow_symlinks"))
        for name in self.names:
            text = read_stdin(sys.stdin.buffer) if name == "-" else long_file(name, name, max_bytes, follow)
            if text is not None:
                if isinstance(text, LongText):
                    self.long.append(text)
                self.n_given += 1
                yield name, text
                continue
            got = read_file_texts(
                name,
                max_bytes=max_bytes,
                follow_symlinks=follow,
                text_field=self.text_field,
                id_field=self.id_field,
                main_content=bool(self.stored.get("main_content")),
                all_responses=bool(self.stored.get("all_responses")),
                spill=True,
            )
            for w in got.warnings:
                log.warning(w)
            # A list is taken from its end, each text let go once taken (``got`` holds none of them).
            documents = got.documents if isinstance(got.documents, SpilledMembers) else list(reversed(got.documents))
            del got
            before = self.n_given
            try:
                yield from self._documents(documents)
            finally:
                self.n_none += self.n_given == before

    def _documents(self, documents) -> Iterator[tuple[str, str]]:
        """The documents of one file: spilled ones read back one at a time, or a list (reversed) popped."""
        from simdoc.corpus.file_texts import SpilledMembers

        if isinstance(documents, SpilledMembers):
            try:
                for document in documents:
                    self.n_given += 1
                    yield document
            finally:
                documents.close()
            return
        while documents:
            self.n_given += 1
            yield documents.pop()


@click.command()
@reader_corpus_argument
@index_option
@quiet_flag("Print nothing on stderr but errors (problems still go to stdout).")
@verbose_flag("Also print each check made and the index directory, on stderr.")
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



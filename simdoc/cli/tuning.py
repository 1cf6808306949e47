"""``simdoc tune`` (the banding for a threshold, without an index) and ``simdoc stats`` (an index described).

Plain click commands, registered on the ``simdoc`` group by :mod:`simdoc.cli`;
what they print is computed by :mod:`simdoc.reports.tuning`.
"""

from __future__ import annotations

import logging
import re
import sys
import time

import click

from simdoc.cli.options import (
    REPORT_FORMATS,
    banding_options,
    emit,
    format_option,
    index_of,
    index_option,
    opt,
    quiet_flag,
    reader_corpus_argument,
    setup_logging,
    signature_options,
    verbose_flag,
    with_options,
)
from simdoc.lsh import DEFAULT_RECALL
from simdoc.output import json_line, tsv_field
from simdoc.params import DEFAULT_THRESHOLD, SignatureParams
from simdoc.reports.stats import format_stats, index_stats
from simdoc.reports.tuning import format_tune, render_s_curve, tune
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index

log = logging.getLogger("simdoc")


# ---------------------------------------------------------------- tune


_PLOT_ROW = re.compile(r"^[ \d.]{4} [|+]")  # a row of the plot: 4-character label, blank, axis


def _styled(lines: list[str]) -> None:
    """Print the tune report on a terminal: curve in cyan, threshold marks in yellow (rich honours NO_COLOR)."""
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    for line in lines:
        text = Text(line)
        text.highlight_regex(r"\*+", "cyan")
        text.highlight_regex(r"<- T\S*|\^ T=\S+|T=\S+ \^", "yellow")
        if _PLOT_ROW.match(line):  # the threshold column, right of the axis
            for i, ch in enumerate(line[6:], start=6):
                if ch in "|+":
                    text.stylize("yellow", i, i + 1)
        console.print(text)


@click.command("tune")
@opt("--threshold", "-t", type=float, default=None, help=f"Jaccard threshold T in (0, 1]. Default: {DEFAULT_THRESHOLD}.")
@signature_options[0]  # --num-perm
@with_options(banding_options)
@format_option(REPORT_FORMATS, "text (with the S-curve) or one JSON object. Default: text.", default="text")
@quiet_flag("Print nothing on stderr but errors (no warning that recall at T is low).")
@verbose_flag("Also say on stderr how the bands and rows were chosen.")
def tune_cmd(threshold, num_perm, bands, rows, fmt, quiet, verbose) -> None:
    """Show the bands and rows for a threshold, and the pairs they will miss or add.

    Prints the b and r that `simdoc index` would choose (or evaluates the
    --bands/--rows given), the probability that a pair of similarity s
    becomes a candidate, 1-(1-s^r)^b, at several s, the false-negative rate
    1-P(T) at the threshold, the false-positive rate P(T-0.2), and the
    S-curve with the threshold marked. Needs no index.

    \b
    Examples:
      simdoc tune --threshold 0.8
      simdoc tune --threshold 0.5 --num-perm 256
      simdoc tune --threshold 0.8 --bands 20 --rows 5 --format json
    """
    setup_logging(quiet, verbose)
    report = tune(DEFAULT_THRESHOLD if threshold is None else threshold, SignatureParams(num_perm).resolved().num_perm, bands, rows)
    if not report.explicit:
        log.debug(
            f"tune: of all b*r <= {report.num_perm} with P(T) >= {DEFAULT_RECALL}, the least false-positive area below T"
        )
    if not report.recall_reached:
        log.warning(
            f"P(J={report.threshold:g}) = {1 - report.false_negative_rate:.4f} is below {DEFAULT_RECALL}: "
            + ("raise --num-perm" if not report.explicit else "more bands or fewer rows raise it")
        )
    if fmt == "json":
        emit([json_line(report.as_dict())])
        return
    lines = format_tune(report) + [""] + ["P(candidate) by similarity J"] + render_s_curve(report.bands, report.rows, report.threshold)
    if sys.stdout.isatty():
        _styled(lines)
    else:
        emit(line + "\n" for line in lines)


# ---------------------------------------------------------------- stats


@click.command()
@reader_corpus_argument
@index_option
@opt("--top", type=click.IntRange(0), default=5, help="How many of the largest buckets to list. Default: 5.")
@format_option(REPORT_FORMATS, "text or one JSON object. Default: text.", default="text")
@opt(
    "--skipped",
    is_flag=True,
    help="Instead, list the files the index skipped, from its manifest: id<TAB>reason per line "
    "(--format json: one object per line).",
)
@quiet_flag()
@verbose_flag("Also print the index directory and how long reading it took, on stderr.")
def stats(corpus, index, top, fmt, skipped, quiet, verbose) -> None:
    """Describe an index: documents, shingles per document (with repeats), LSH bucket sizes.

    The bucket-size histogram counts the buckets of every band by size;
    the largest buckets, with one member each, are usually exact copies or
    shared boilerplate, and cost candidate pairs quadratic in their size.

    \b
    Examples:
      simdoc stats --index /tmp/idx
      simdoc stats --index /tmp/idx --top 20 --format json
      simdoc stats my_corpus                      # the default index of my_corpus
      simdoc stats --index /tmp/idx --skipped     # id<TAB>reason of each file skipped
    """
    setup_logging(quiet, verbose)
    t0 = time.perf_counter()
    index = index_of(corpus, index)
    if skipped:
        with IndexStore(index).reading():
            passed_over = sorted(open_index(index).stage("shingle").get("skipped", []), key=lambda s: s["id"])
        if fmt == "json":
            emit(json_line({"id": s["id"], "reason": s.get("reason")}) for s in passed_over)
        else:
            emit(f"{tsv_field(s['id'])}\t{tsv_field(s.get('reason') or '')}\n" for s in passed_over)
        return
    with IndexStore(index).reading():
        result = index_stats(open_index(index), top)
    log.debug(f"stats: {index} read in {time.perf_counter() - t0:.2f} s")
    if result.buckets is not None and not result.buckets.current:
        log.warning(f"the LSH buckets are out of date: run {result.buckets.next_step} (or `simdoc pairs`)")
    if fmt == "json":
        emit([json_line(result.as_dict())])
    else:
        emit(line + "\n" for line in format_stats(result))

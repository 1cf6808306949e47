"""The report commands: clusters, dedup, tune, stats, show.

Plain click commands, added to the ``simdoc`` group by :mod:`simdoc.cli`,
where every command is registered. As there, each command parses options,
calls the library and writes records: data on stdout, summaries and warnings
on stderr, errors as :class:`~simdoc.errors.SimdocError` turned into
``Error: ...`` by the group. The options they share with the other commands
come from :mod:`simdoc.cli.options`.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shlex
import sys
import textwrap
import time
from pathlib import Path

import click

from simdoc.cli.options import (
    REPORT_FORMATS,
    announce_index,
    check_output_flags,
    banding_options,
    corpus_arg,
    corpus_list_options,
    emit,
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
    verbose_option,
    wait_option,
    with_options,
)
from simdoc.corpus.file_texts import read_file_texts
from simdoc.engines import open_engine
from simdoc.errors import CorpusError, IndexError_
from simdoc.lsh import DEFAULT_RECALL
from simdoc.output import tsv_field, tsv_header
from simdoc.minhash import MinHasher
from simdoc.params import DEFAULT_THRESHOLD, Params, ShingleParams, SignatureParams
from simdoc.reports.clusters import (
    KEEP_POLICIES,
    DedupDecision,
    cluster_pairs,
    plan_dedup,
)
from simdoc.reports.evidence import (
    DEFAULT_CONTEXT,
    DEFAULT_MIN_WORDS,
    PairEvidence,
    Segment,
    pair_evidence,
    render_plain,
    text_evidence,
)
from simdoc.reports.tuning import (
    format_stats,
    format_tune,
    index_stats,
    render_s_curve,
    tune,
)
from simdoc.stages.common import default_index_path
from simdoc.stages.pairs import pairs_index, refresh_signatures, run_pairs
from simdoc.stages.reread import DocumentReader, reader_of
from simdoc.stages.results import PairsResult
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index
from simdoc.wording import count

log = logging.getLogger("simdoc")
PLAIN_WIDTH = 80  # `show` wraps document text to this width when stdout is not a terminal

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


def _check_corpus_index(corpus: Path | None, index: Path | None, rebuild: bool) -> Path:
    """The index directory to use, with the same rules as `pairs`."""
    if corpus is None and index is None and not env_index():
        raise click.UsageError("give a CORPUS, an --index, or both")
    if rebuild and corpus is None:
        raise click.UsageError("--rebuild needs the CORPUS (the shingles are rebuilt from it)")
    if index is not None:
        return announce_index(index)
    return announce_index(default_index_path(corpus) if corpus is not None else need_index(None))


def _verified_pairs(
    corpus: tuple, files_from, files0_from, index: Path | None, stage_options: dict, *, jobs, scheduler, wait_workers,
    rebuild: bool, wait: float, quiet: bool, verbose: bool,
) -> tuple[PairsResult, Path]:
    """The verified pairs of `pairs` run with these options, for a command that groups them."""
    params = Params.of({**stage_options, "verify": True, "all_candidates": False})
    corpus = corpus_arg(corpus, files_from, files0_from)
    index = pairs_index(corpus, _check_corpus_index(corpus, index, rebuild))
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus) as engine:
        res = run_pairs(corpus, index, params, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait)
    report_stages(res.stages, verbose)
    if verbose and res.banding:
        log.debug(f"banding: {res.banding.describe()}")
    return res, index


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


def _cut(res: PairsResult) -> str:
    return f"{res.measure} jaccard >= {res.threshold:g}"


def _skipped(res: PairsResult) -> str:
    return f" ({skipped_text(res.n_skipped)})" if res.n_skipped else ""


# ---------------------------------------------------------------- clusters


@click.command()
@click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))
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
    res, index = _verified_pairs(
        corpus, files_from, files0_from, index, stage_options, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers,
        rebuild=rebuild, wait=wait, quiet=quiet, verbose=verbose,
    )
    found = cluster_pairs(res)
    if null:
        _emit_null([str(c.cluster_id), str(c.size), *c.members] for c in found)
    elif fmt in (None, "tsv"):
        lines = ("\t".join([str(c.cluster_id), str(c.size), *map(tsv_field, c.members)]) + "\n" for c in found)
        if header:  # the members fill the third field and every one after it
            lines = itertools.chain([tsv_header(("cluster_id", "size", "members"))], lines)
        emit(lines)
    else:
        lines = (
            json.dumps({"cluster_id": c.cluster_id, "size": c.size, "members": list(c.members)}, ensure_ascii=False) + "\n"
            for c in found
        )
        emit(lines)
    held = sum(c.size for c in found)
    log.info(
        f"simdoc: {count(res.n_docs, 'document')}{_skipped(res)}, {count(len(res), 'pair')} ({_cut(res)}), "
        f"{count(len(found), 'cluster')} holding {count(held, 'document')} in {time.perf_counter() - started:.2f} s"
    )
    note_skipped(res.n_skipped, index, quiet)


# ---------------------------------------------------------------- dedup


@click.command()
@click.argument("corpus", nargs=-1, type=click.Path(path_type=Path))
@with_options(corpus_list_options)
@opt(
    "--keep",
    type=click.Choice(KEEP_POLICIES),
    default="first",
    help="Which member of a cluster to keep: first (smallest id), longest/shortest (bytes), "
    "newest/oldest (modification time); ties go to the smallest id. Default: first.",
)
@null_option("End each path with NUL instead of newline (for `xargs -0`).")
@opt("--absolute", is_flag=True, help="Print absolute paths instead of paths relative to the corpus.")
@format_option(
    ("paths", "tsv", "jsonl"),
    "paths: one droppable path per line; tsv: drop<TAB>keep; jsonl: one cluster per line. Default: paths.",
    default="paths",
)
@header_option
@with_options(pair_options)
def dedup(
    corpus, files_from, files0_from, keep, null, absolute, fmt, header, index, jobs, scheduler, wait_workers, rebuild, wait,
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
    """
    started = time.perf_counter()
    setup_logging(quiet, verbose)
    check_output_flags(null, fmt, header, null_format="paths")
    res, index = _verified_pairs(
        corpus, files_from, files0_from, index, stage_options, jobs=jobs, scheduler=scheduler, wait_workers=wait_workers,
        rebuild=rebuild, wait=wait, quiet=quiet, verbose=verbose,
    )
    with IndexStore(index).reading():
        loaded = open_index(index)
        records = loaded.doc_records()
        root = loaded.stage("shingle").get("corpus", "")
        reader = reader_of(loaded)
    if [r["id"] for r in records] != res.doc_ids:
        # Another run updated the index between the pairs and this read: sizes and
        # times would belong to other documents than the clusters.
        raise IndexError_(f"the index at {index} changed while dedup ran", hint="run dedup again")
    decisions = _still_indexed(plan_dedup(cluster_pairs(res), records, keep), reader)

    def name(doc_id: str) -> str:
        return os.path.join(root, *doc_id.split("/")) if absolute else doc_id

    n_drop = sum(len(d.drop) for d in decisions)
    sizes = {r["id"]: r["size"] for r in records}
    drop_bytes = sum(sizes[x] for d in decisions for x in d.drop)
    if fmt == "paths":
        unsafe = [x for d in decisions for x in d.drop if not null and ("\n" in x or "\r" in x)]
        for x in unsafe:
            # Split at the newline, such a name could make `xargs` remove another file.
            log.warning(f"{x!r} has a line break in its name: left out; use -0 to list it")
        # Paths as the file system's bytes, whatever the locale: they are for rm, not for reading.
        paths = ([name(x)] for d in decisions for x in d.drop if x not in unsafe)
        _emit_null(paths, end=b"\0" if null else b"\n")
        lines = ()
    elif fmt == "tsv":
        lines = (f"{tsv_field(name(x))}\t{tsv_field(name(d.keep))}\n" for d in decisions for x in d.drop)
        if header:
            lines = itertools.chain([tsv_header(("drop", "keep"))], lines)
    else:
        lines = (
            json.dumps({"cluster_id": d.cluster_id, "keep": name(d.keep), "drop": [name(x) for x in d.drop]}, ensure_ascii=False)
            + "\n"
            for d in decisions
        )
    emit(lines)
    log.info(
        f"simdoc: {count(len(decisions), 'cluster')}: keep {len(decisions)}, "
        f"drop {count(n_drop, 'document')} ({count(drop_bytes, 'byte')}) ({_cut(res)}, --keep {keep}){_skipped(res)} "
        f"in {time.perf_counter() - started:.2f} s"
    )
    note_skipped(res.n_skipped, index, quiet)


def _still_indexed(decisions: list[DedupDecision], reader: DocumentReader) -> list[DedupDecision]:
    """The decisions, with only documents whose files are still the ones indexed (see
    ``DocumentReader.unchanged``), each one left out named in a warning.

    A path printed for `xargs rm` must name the document that was compared:
    exact copies and pairs from the verified-pairs table are not read again,
    and the corpus may have changed since (or the manifest name another
    folder). A cluster whose document to keep is not as indexed is left out
    whole, so that its last copy is never listed.
    """
    number = {doc_id: i for i, doc_id in enumerate(reader.table.ids)}
    out = []
    for d in decisions:
        if not reader.unchanged(number[d.keep]):
            log.warning(
                f"{d.keep}: changed or gone since it was indexed, and it is the one to keep: its cluster is left out "
                "(run `simdoc dedup CORPUS` to index the corpus again)"
            )
            continue
        drop = []
        for x in d.drop:
            if reader.unchanged(number[x]):
                drop.append(x)
            else:
                log.warning(f"{x}: changed or gone since it was indexed: left out (run `simdoc dedup CORPUS` to index it again)")
        if drop:
            out.append(DedupDecision(d.cluster_id, d.keep, tuple(drop)))
    return out


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
@quiet_option
@verbose_option
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
        emit([json.dumps(report.as_dict()) + "\n"])
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
@quiet_option
@verbose_option
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
            emit(json.dumps({"id": s["id"], "reason": s.get("reason")}, ensure_ascii=False) + "\n" for s in passed_over)
        else:
            emit(f"{tsv_field(s['id'])}\t{tsv_field(s.get('reason') or '')}\n" for s in passed_over)
        return
    with IndexStore(index).reading():
        result = index_stats(open_index(index), top)
    log.debug(f"stats: {index} read in {time.perf_counter() - t0:.2f} s")
    if result.buckets is not None and not result.buckets.current:
        log.warning(f"the LSH buckets are out of date: run {result.buckets.next_step} (or `simdoc pairs`)")
    if fmt == "json":
        emit([json.dumps(result.as_dict(), ensure_ascii=False) + "\n"])
    else:
        emit(line + "\n" for line in format_stats(result))


# ---------------------------------------------------------------- show


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _show_header(ev: PairEvidence) -> list[str]:
    o = ev.overlap
    how = f"{ev.num_perm} permutations" if ev.scheme == "classic" else f"one permutation, {ev.num_perm} bins"
    est = f"{ev.estimated:.4f}  (MinHash, {how})" if ev.estimated is not None else "n/a (no signatures)"
    first = f" in its first {ev.searched_bytes} bytes" if ev.searched_bytes else ""
    if o is None:
        gone = "n/a  (a document could not be read)"
        lines = [
            f"A  {ev.doc_a}  ({count(ev.words_a, 'word')})",
            f"B  {ev.doc_b}  ({count(ev.words_b, 'word')})",
            f"set jaccard      {gone}",
            f"bag jaccard      {gone}",
            f"estimated        {est}",
        ]
    else:
        lines = [
            f"A  {ev.doc_a}  ({count(ev.words_a, 'word')}{first if ev.cut_a else ''}, {count(o.n_a, 'shingle')})",
            f"B  {ev.doc_b}  ({count(ev.words_b, 'word')}{first if ev.cut_b else ''}, {count(o.n_b, 'shingle')})",
            f"set jaccard      {o.set_jaccard:.4f}  ({o.n_common} of {o.n_union} distinct shingles shared)",
            f"bag jaccard      {o.bag_jaccard:.4f}  (identical bags score 0.5)",
            f"estimated        {est}",
            f"A in B           {o.containment_a:.4f}  (|A∩B|/|A|: share of A's shingles found in B)",
            f"B in A           {o.containment_b:.4f}  (|A∩B|/|B|)",
        ]
    if ev.indexed is not None:
        lines.append(f"as indexed       set jaccard {ev.indexed[0]:.4f}, bag jaccard {ev.indexed[1]:.4f}  (verified then)")
    if not ev.passages:
        searched = f" in the first {ev.searched_bytes} bytes of each document" if ev.searched_bytes else ""
        lines.append(f"shared passages  none of {ev.min_words} or more words{searched}")
        return lines
    shared = ev.shared_words
    searched = f", in the first {ev.searched_bytes} bytes of each document" if ev.searched_bytes else ""
    lines.append(
        f"shared passages  {len(ev.passages)} of {ev.min_words} or more words: {count(shared, 'word')}, "
        f"{_pct(shared, ev.words_a)} of A and {_pct(shared, ev.words_b)} of B{searched}"
    )
    lines.append("")
    lines.append(f"{'passage':>7}  {'A words':>13}  {'B words':>13}  {'words':>6}")
    for p in ev.passages:
        a, b = f"{p.a_start + 1}-{p.a_end}", f"{p.b_start + 1}-{p.b_end}"
        lines.append(f"{p.number:>7}  {a:>13}  {b:>13}  {p.words:>6}")
    return lines


def _rich_document(segments: list[Segment]):
    from rich.text import Text

    out = Text()
    for i, seg in enumerate(segments):
        if i:
            out.append(" ")
        style = "bold green" if seg.kind == "shared" else ""
        if seg.kind == "shared":
            out.append(f"[{seg.passage}]", style="bold magenta")
            out.append(" ")
        out.append(seg.head, style=style)
        if seg.elided:
            out.append((" " if seg.head else "") + f"(... {seg.elided} words ...)", style="dim")
            if seg.tail:
                out.append(" ")
                out.append(seg.tail, style=style)
    return out


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[CORPUS] DOC_A DOC_B")
@index_option
@opt("--min-words", type=click.IntRange(1), default=DEFAULT_MIN_WORDS, help=f"Shortest shared passage, in words. Default: {DEFAULT_MIN_WORDS}.")
@opt("--context", type=click.IntRange(1), default=DEFAULT_CONTEXT, help=f"Words kept at each end of a long stretch. Default: {DEFAULT_CONTEXT}.")
@opt("--full", is_flag=True, help="Print both documents whole, without shortening long stretches.")
@format_option(REPORT_FORMATS, "text or one JSON object. Default: text.", default="text")
@with_options(shingle_options)
@with_options(signature_options)
@jobs_option
@rebuild_option
@wait_option
@quiet_option
@verbose_option
def show(
    args, index, min_words, context, full, fmt, num_perm, seed, scheme, jobs, rebuild, wait, quiet, verbose, **shingle_options
) -> None:
    """Show the evidence for one pair: similarities and the passages they share.

    DOC_A and DOC_B are document ids as `simdoc pairs` prints them (or paths
    to the files). Prints set and bag Jaccard, the MinHash estimate, the
    containment each way, the shared passages (maximal common runs of words,
    found even when moved), and both documents with the shared passages
    marked: highlighted on a terminal, as [[n: ...]] otherwise. With CORPUS,
    the shingle and signature stages are brought up to date first. With
    neither CORPUS nor --index (nor $SIMDOC_INDEX), DOC_A and DOC_B are two
    files, read as `simdoc pairs` would read them and compared with the
    shingle and MinHash options given (or their defaults); no index is used.

    \b
    Examples:
      simdoc show sample_corpus policies/remote-work-policy-2023.txt policies/remote-work-policy-2024.txt
      simdoc show --index /tmp/idx web/harbor-festival.txt web/mirror-harbor-festival.txt --full
      simdoc show draft-v1.txt draft-v2.txt --unit word --k 3
    """
    setup_logging(quiet, verbose)
    if len(args) < 2:
        raise click.UsageError(f"give DOC_A DOC_B, or CORPUS... DOC_A DOC_B ({len(args)} arguments given)")
    shingle = ShingleParams(**shingle_options)
    signature = SignatureParams(num_perm=num_perm, seed=seed, scheme=scheme)
    *corpora, doc_a, doc_b = args
    if not corpora and index is None and not env_index():
        ev = _file_evidence(doc_a, doc_b, shingle.resolved(), signature.resolved(), min_words)
    else:
        ev = _index_evidence(
            corpora, doc_a, doc_b, shingle, signature, index=index, min_words=min_words, jobs=jobs, rebuild=rebuild,
            wait=wait, quiet=quiet, verbose=verbose,
        )
    for w in ev.warnings:
        log.warning(w)
    if fmt == "json":
        emit([json.dumps(ev.as_dict(), ensure_ascii=False) + "\n"])
        return
    _print_evidence(ev, None if full else context)


def _file_evidence(
    doc_a: str, doc_b: str, shingle: ShingleParams, signature: SignatureParams, min_words: int
) -> PairEvidence:
    """The evidence for two files outside any index (`simdoc show A B`), with resolved parameters."""
    texts = []
    for name in (doc_a, doc_b):
        if not os.path.lexists(name):
            raise click.UsageError(
                f"{name} is not a file; without a CORPUS or --index, DOC_A and DOC_B are two files to compare "
                "(give CORPUS... DOC_A DOC_B or --index IDX to name documents by id)"
            )
        got = read_file_texts(
            name,
            max_bytes=shingle.max_bytes,
            follow_symlinks=shingle.follow_symlinks,
            text_field=shingle.text_field,
            id_field=shingle.id_field,
        )
        if not got.documents:
            raise CorpusError(f"cannot compare {name}: " + ("; ".join(got.warnings) or "it holds no document"))
        if len(got.documents) > 1:
            raise click.UsageError(
                f"{name} holds {len(got.documents)} documents; to compare two of them, name them in a corpus: "
                f"simdoc show {shlex.quote(name)} {shlex.quote(got.documents[0][0])} {shlex.quote(got.documents[1][0])}"
            )
        for w in got.warnings:
            log.warning(w)
        texts.append(got.documents[0][1])
    hasher = MinHasher(signature.num_perm, signature.seed, scheme=signature.scheme)
    return text_evidence(doc_a, texts[0], doc_b, texts[1], shingle.spec, hasher, min_words)


def _index_evidence(
    corpora, doc_a: str, doc_b: str, shingle: ShingleParams, signature: SignatureParams, *, index, min_words: int, jobs,
    rebuild: bool, wait: float, quiet: bool, verbose: bool,
) -> PairEvidence:
    """The evidence for two documents of an index, bringing its stages up to date from CORPUS first (as `pairs` does)."""
    corpus = corpus_arg(tuple(Path(c) for c in corpora), None)
    index = _check_corpus_index(corpus, index, rebuild)
    # No --scheduler here, but $SIMDOC_SCHEDULER is honoured, as by every command that builds stages.
    with open_engine(jobs, index=index, corpus=corpus, needs_corpus=corpus is not None) as engine:
        stages = refresh_signatures(
            corpus, index, shingle, signature, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait
        )
    report_stages(stages, verbose)
    with IndexStore(index).reading():
        return pair_evidence(open_index(index), doc_a, doc_b, min_words)


def _print_evidence(ev: PairEvidence, ctx: int | None) -> None:
    header = _show_header(ev)
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(highlight=False)
        for line in header:
            console.print(line, markup=False)
        for side, doc in (("a", ev.doc_a), ("b", ev.doc_b)):
            console.print()
            console.print(f"{side.upper()}: {doc}", style="bold", markup=False)
            console.print(_rich_document(ev.segments(side, ctx)))
        return
    lines = list(header)
    for side, doc in (("a", ev.doc_a), ("b", ev.doc_b)):
        lines += ["", f"{side.upper()}: {doc}"]
        if (ev.text_a if side == "a" else ev.text_b) is None:
            lines.append("  (could not be read)")
            continue
        body = render_plain(ev.segments(side, ctx))
        lines += textwrap.wrap(body, PLAIN_WIDTH, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    emit(line + "\n" for line in lines)

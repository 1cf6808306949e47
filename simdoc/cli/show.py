"""``simdoc show``: the evidence for one pair, for people (or as JSON).

A plain click command, registered on the ``simdoc`` group by :mod:`simdoc.cli`;
the evidence is computed by :mod:`simdoc.reports.evidence`, and an index's
stages are brought up to date first as `simdoc pairs` does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import sys
import textwrap

import click

from simdoc.cli.options import (
    REPORT_FORMATS,
    check_corpus_index,
    corpus_arg,
    emit,
    env_index,
    format_option,
    index_option,
    jobs_option,
    opt,
    quiet_option,
    rebuild_option,
    report_stages,
    setup_logging,
    corpus_type,
    shingle_options,
    show_progress,
    signature_options,
    verbose_option,
    wait_option,
    with_options,
)
from simdoc.corpus.file_texts import read_file_texts
from simdoc.corpus.objects import is_url
from simdoc.corpus.walk import resolve_sources
from simdoc.engines import open_engine
from simdoc.errors import CorpusError, IndexError_
from simdoc.minhash import MinHasher
from simdoc.output import escape_name, json_line, visible_text
from simdoc.params import ShingleParams, SignatureParams
from simdoc.reports.evidence import PairEvidence, pair_evidence, text_evidence
from simdoc.reports.passages import (
    DEFAULT_CONTEXT,
    DEFAULT_MIN_WORDS,
    Segment,
    render_plain,
)
from simdoc.stages.pairs import refresh_signatures
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index
from simdoc.wording import count

log = logging.getLogger("simdoc")
PLAIN_WIDTH = 80  # `show` wraps document text to this width when stdout is not a terminal


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _show_header(ev: PairEvidence) -> list[str]:
    o = ev.overlap
    how = f"{ev.num_perm} permutations" if ev.scheme == "classic" else f"one permutation, {ev.num_perm} bins"
    est = f"{ev.estimated:.4f}  (MinHash, {how})" if ev.estimated is not None else "n/a (no signatures)"
    first = f" in its first {ev.searched_bytes} bytes" if ev.searched_bytes else ""
    name_a, name_b = escape_name(ev.doc_a), escape_name(ev.doc_b)  # one line each, no control character
    if o is None:
        gone = "n/a  (a document could not be read)"
        lines = [
            f"A  {name_a}  ({count(ev.words_a, 'word')})",
            f"B  {name_b}  ({count(ev.words_b, 'word')})",
            f"set jaccard      {gone}",
            f"bag jaccard      {gone}",
            f"estimated        {est}",
        ]
    else:
        lines = [
            f"A  {name_a}  ({count(ev.words_a, 'word')}{first if ev.cut_a else ''}, {count(o.n_a, 'shingle')})",
            f"B  {name_b}  ({count(ev.words_b, 'word')}{first if ev.cut_b else ''}, {count(o.n_b, 'shingle')})",
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
            out.append((" " if seg.head else "") + f"(... {count(seg.elided, 'word')} ...)", style="dim")
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
    the shingle and signature stages are brought up to date first; an
    --index needs the CORPUS too (the documents are read from the corpus
    named here, never from a folder the index names). With
    neither CORPUS nor --index (nor $SIMDOC_INDEX), DOC_A and DOC_B are two
    files, read as `simdoc pairs` would read them and compared with the
    shingle and MinHash options given (or their defaults); no index is used.

    \b
    Examples:
      simdoc show sample_corpus policies/remote-work-policy-2023.txt policies/remote-work-policy-2024.txt
      simdoc show sample_corpus --index /tmp/idx web/harbor-festival.txt web/mirror-harbor-festival.txt --full
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
    elif not corpora:
        # The documents are read and printed: from the corpus the user names, never from a
        # folder that only the index names (a manifest can be made to name any folder).
        raise click.UsageError(
            "show reads the two documents from their corpus: name it (simdoc show CORPUS DOC_A DOC_B --index IDX); "
            "an index alone is not trusted to say where its documents are"
        )
    else:
        ev = _index_evidence(
            corpora, doc_a, doc_b, shingle, signature, index=index, min_words=min_words, jobs=jobs, rebuild=rebuild,
            wait=wait, quiet=quiet, verbose=verbose,
        )
    for w in ev.warnings:
        log.warning(w)
    if fmt == "json":
        emit([json_line(ev.as_dict())])
        return
    _print_evidence(ev, None if full else context)


def _file_evidence(
    doc_a: str, doc_b: str, shingle: ShingleParams, signature: SignatureParams, min_words: int
) -> PairEvidence:
    """The evidence for two files outside any index (`simdoc show A B`), with resolved parameters."""
    texts = []
    for name in (doc_a, doc_b):
        if not is_url(name) and not os.path.lexists(name):
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
            main_content=bool(shingle.main_content),
            all_responses=bool(shingle.all_responses),
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
    corpus = corpus_arg(tuple(corpus_type.convert(c, None, None) for c in corpora), None)  # a URL stays one
    index = check_corpus_index(corpus, index, rebuild)
    # No --scheduler here, but $SIMDOC_SCHEDULER is honoured, as by every command that builds stages.
    with open_engine(jobs, index=index, corpus=corpus, needs_corpus=corpus is not None) as engine:
        stages = refresh_signatures(
            corpus, index, shingle, signature, engine=engine, rebuild=rebuild, progress=show_progress(quiet), wait=wait
        )
    report_stages(stages, verbose)
    with IndexStore(index).reading():
        loaded = open_index(index)
        root = loaded.stage("shingle").get("corpus")
        if root != resolve_sources(corpus)[0]:
            # Checked when the stages were brought up to date; another writer may have rebuilt it since.
            raise IndexError_(f"the index at {index} is now the index of {root}, not of the corpus named", hint="run show again")
        return pair_evidence(loaded, doc_a, doc_b, min_words)


def _visible(segments: list[Segment]) -> list[Segment]:
    """The segments with their control characters shown escaped (a text's ESC would drive the terminal)."""
    return [dataclasses.replace(seg, head=visible_text(seg.head), tail=visible_text(seg.tail)) for seg in segments]


def _print_evidence(ev: PairEvidence, ctx: int | None) -> None:
    header = _show_header(ev)
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(highlight=False)
        for line in header:
            console.print(line, markup=False)
        for side, doc in (("a", escape_name(ev.doc_a)), ("b", escape_name(ev.doc_b))):
            console.print()
            console.print(f"{side.upper()}: {doc}", style="bold", markup=False)
            console.print(_rich_document(_visible(ev.segments(side, ctx))))
        return
    lines = list(header)
    for side, doc in (("a", escape_name(ev.doc_a)), ("b", escape_name(ev.doc_b))):
        lines += ["", f"{side.upper()}: {doc}"]
        if (ev.text_a if side == "a" else ev.text_b) is None:
            lines.append("  (could not be read)")
            continue
        body = render_plain(_visible(ev.segments(side, ctx)))
        lines += textwrap.wrap(body, PLAIN_WIDTH, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    emit(line + "\n" for line in lines)

"""``--min-length``: which documents a reading task read are too short, and leaving them out.

A reading task (:mod:`simdoc.stages.scan`) knows each document's window count once it has signed
it; from that count it tells most documents' length in units without normalising them again
(:func:`short_documents`), and :func:`leave_out` drops the short ones from its results, each file
saying which members it left out, or that it is not a document itself.
"""

from __future__ import annotations

from simdoc.params import ShingleParams
from simdoc.shinglesets import ShingleSets
from simdoc.stages.scan_results import DocOut, FileOutcome


def short_documents(
    docs: list[DocOut], texts: list, streamed: dict[int, ShingleSets], paths: dict[int, str], spec, reading: ShingleParams
) -> set[int]:
    """The documents (numbers in ``docs``) with fewer than ``reading.min_length`` units (characters,
    or words) in their normalised text; an empty one is not counted (it is never a candidate).

    Told by each document's window count where it can (with k units or more, a char or word
    document of n windows has n + k - 1 units); a document of one window, or a stopword
    document (whose windows start only at stop words), is normalised here to be counted.
    """
    from simdoc.corpus.files import read_document
    from simdoc.shingling import normalise

    k, least = spec.k, reading.min_length
    short = set()
    at_text = 0
    for i, d in enumerate(docs):
        text = None
        if i not in streamed:
            text = texts[at_text]
            at_text += 1
        n = d.n_shingles
        if n == 0:
            continue
        if (n >= 2 and n + k - 1 >= least) or least <= 1:
            continue  # at least n + k - 1 units (exactly that many for char and word)
        if spec.unit != "stopword" and n >= 2:
            short.add(i)  # exactly n + k - 1 units, fewer than asked
            continue
        if text is None:  # a streamed file of at most one window: small, read it whole
            got = read_document(paths[i], reading.max_bytes, bool(reading.follow_symlinks))
            text = got.text if got.text is not None else ""
        if isinstance(text, bytes):
            text = text.decode("ascii")
        norm = normalise(text, spec.lowercase, spec.unicode)
        units = len(norm) if spec.unit == "char" else len(norm.split(" ")) if norm else 0
        if units < least:
            short.add(i)
    return short


def leave_out(files: list[FileOutcome], docs: list[DocOut], short: set[int], least: int, unit: str) -> list[DocOut]:
    """``docs`` without the ``short`` ones; each file says which it left out (a member) or that
    it is not a document (a file of one)."""
    what = f"shorter than --min-length {least} ({'characters' if unit == 'char' else 'words'}), left out"
    kept: list[DocOut] = []
    at = 0
    for f in files:
        for i in range(at, at + f.n_docs):
            if i not in short:
                kept.append(docs[i])
            elif docs[i].source:
                f.left_out.append((docs[i].id, what))
            else:
                f.status, f.warning = "short", what
        if f.how != "warc":  # with its lines (rows) skipped, sorted as ids: as simdoc.stages.ranges.join gives them
            f.left_out.sort()
        dropped = sum(1 for i in range(at, at + f.n_docs) if i in short)
        at += f.n_docs
        f.n_docs -= dropped
    return kept

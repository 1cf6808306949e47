"""The evidence for one pair: how similar, and which passages they share.

For two documents A and B of an index this gives

* from the documents themselves, re-read from the corpus and shingled with
  the index's parameters to 64-bit hashes (the index keeps no shingles, see
  :mod:`simdoc.stages.verify`): the set Jaccard ``|A∩B| / |A∪B|``, the bag Jaccard
  (MMDS §3.1.1, at most 1/2), and the containment each way, ``|A∩B| / |A|``
  ("how much of A is in B") and ``|A∩B| / |B|``: a short document quoted
  whole inside a long one has a low Jaccard but a containment near 1;
* from the same texts: the shared passages, i.e. maximal runs of at least
  ``min_words`` words that occur in both;
* from the index: the MinHash estimate, and, when a document changed or is
  gone, the set and bag Jaccard verified when the pair was indexed (the
  verified-pairs table), if the pair was verified.

How passages are found (greedy string tiling over normalised words) is
:mod:`simdoc.reports.passages`.

Everything but :func:`pair_evidence` (which reads the two files) is pure;
:func:`text_evidence` gives the same for two texts outside any index.
A document that changed since it was indexed is compared as it is today,
with a warning; one that cannot be read gives no numbers or passages.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simdoc.corpus.read import read_again
from simdoc.errors import UsageError
from simdoc.output import unescape_name
from simdoc.reports.passages import (
    DEFAULT_CONTEXT,
    DEFAULT_MIN_WORDS,
    Passage,
    Segment,
    common_runs,
    document_segments,
    join_spans,
    split_words,
)
from simdoc.shingling import ShingleSpec
from simdoc.reports.overlap import ShingleOverlap, texts_overlap
from simdoc.stages.reread import confined_path

if TYPE_CHECKING:
    from simdoc.minhash import MinHasher
    from simdoc.store.loaded import LoadedIndex

# Of each document, the passage search looks at this much text: it holds some 80 bytes
# per byte searched (every word, its place and its word-grams), which for a 200 MB
# one-line file was 6.5 GB. The similarity numbers are always the whole documents'.
PASSAGE_BYTES = 1 << 20


# ---------------------------------------------------------------- passages


# ---------------------------------------------------------------- segments for display


# ---------------------------------------------------------------- one pair of an index


@dataclass
class PairEvidence:
    """Everything ``simdoc show`` prints about one pair.

    Attributes
    ----------
    doc_a, doc_b : str
        Document ids.
    overlap : ShingleOverlap or None
        From the texts as re-read today; None if one could not be read.
    estimated : float or None
        MinHash estimate, when the index has current signatures.
    num_perm : int or None
        Signature length.
    passages : list of Passage
    words_a, words_b : int
        Words in each document as re-read (0 if it could not be read).
    min_words : int
    warnings : list of str
        Why passages are missing or may not match the numbers.
    scheme : str or None
        MinHash scheme of the signatures ("classic" or "oph").
    indexed : tuple of float or None
        (set, bag) Jaccard verified for the texts as indexed, given only when a
        document changed or is gone and the verified-pairs table holds the pair.
    cut_a, cut_b : bool
        Only the first :data:`PASSAGE_BYTES` of the document were searched
        for passages (``words_a``, ``words_b`` count those words).
    """

    doc_a: str
    doc_b: str
    overlap: ShingleOverlap | None
    estimated: float | None
    num_perm: int | None
    passages: list[Passage]
    words_a: int
    words_b: int
    min_words: int
    warnings: list[str] = field(default_factory=list)
    text_a: str | None = field(default=None, repr=False)
    text_b: str | None = field(default=None, repr=False)
    spans_a: list[tuple[int, int]] = field(default_factory=list, repr=False)
    spans_b: list[tuple[int, int]] = field(default_factory=list, repr=False)
    scheme: str | None = None
    indexed: tuple[float, float] | None = None
    cut_a: bool = False  # only the first PASSAGE_BYTES of A were searched for passages
    cut_b: bool = False

    @property
    def searched_bytes(self) -> int | None:
        """How much of each document the passage search looked at, if it did not look at all of one."""
        return PASSAGE_BYTES if self.cut_a or self.cut_b else None

    @property
    def shared_words(self) -> int:
        return sum(p.words for p in self.passages)

    def segments(self, side: str, context: int | None = DEFAULT_CONTEXT) -> list[Segment]:
        """Display segments of document ``"a"`` or ``"b"`` (empty if it could not be read)."""
        text, spans = (self.text_a, self.spans_a) if side == "a" else (self.text_b, self.spans_b)
        if text is None:
            return []
        if side == "a":
            ranges = [(p.a_start, p.a_end, p.number) for p in self.passages]
        else:
            ranges = [(p.b_start, p.b_end, p.number) for p in self.passages]
        return document_segments(text, spans, ranges, context)

    def as_dict(self) -> dict:
        o = self.overlap

        def num(name: str, digits: int | None = 4):
            if o is None:
                return None
            value = getattr(o, name)
            return round(value, digits) if digits is not None else value

        out = {
            "doc_a": self.doc_a,
            "doc_b": self.doc_b,
            "set_jaccard": num("set_jaccard"),
            "bag_jaccard": num("bag_jaccard"),
            "estimated": None if self.estimated is None else round(self.estimated, 4),
            "containment_a": num("containment_a"),
            "containment_b": num("containment_b"),
            "shingles_a": num("n_a", None),
            "shingles_b": num("n_b", None),
            "shingles_common": num("n_common", None),
            "words_a": self.words_a,
            "words_b": self.words_b,
            "min_words": self.min_words,
            "passages_searched_bytes": self.searched_bytes,
            "cut_a": self.cut_a,
            "cut_b": self.cut_b,
            "passages": [
                {
                    "number": p.number,
                    "a_start": p.a_start,
                    "a_end": p.a_end,
                    "b_start": p.b_start,
                    "b_end": p.b_end,
                    "words": p.words,
                    "text": p.text,
                }
                for p in self.passages
            ],
        }
        if self.indexed is not None:
            out["indexed_set_jaccard"], out["indexed_bag_jaccard"] = (round(x, 4) for x in self.indexed)
        return out


def resolve_doc(arg: str, doc_ids: Sequence[str], corpus_root: str | None, skipped: dict[str, str] | None = None) -> int:
    """The document number of ``arg``: a document id, as it is or as `simdoc pairs` prints it
    (:func:`simdoc.output.escape_name`: ``\\xNN`` for a byte that is not UTF-8, ``\\t``...), or a
    path to a file of the corpus. ``skipped``: the paths the index skipped, and why (its shingle
    stage's ``skipped``), to say why such a one is no document.

    Raises
    ------
    UsageError
        ``arg`` names no document of the index.
    """
    names = [arg] + ([unescape_name(arg)] if "\\" in arg else [])
    if corpus_root is not None and os.path.exists(arg):
        try:
            names.append(Path(os.path.realpath(arg)).relative_to(os.path.realpath(corpus_root)).as_posix())
        except ValueError:
            pass
    for name in names:
        # (A table's ids look an id up in their arrays: no dict of them all, no string a row.)
        with contextlib.suppress(ValueError):
            return doc_ids.index(name)
    for name in names:
        if skipped and name in skipped:
            raise UsageError(
                f"{arg} is not a document of the index, which skipped it: {skipped[name] or 'no reason recorded'}",
                hint="only the documents an index read can be compared; `simdoc stats --skipped` lists what it skipped",
            )
    raise UsageError(
        f"{arg} is not a document of the index",
        hint="give its id as `simdoc pairs` prints it (its path relative to the corpus), or a path to the file",
    )


CHANGED = "{doc} changed since it was indexed: the numbers and passages are from today's text"


def _read(
    root: str | None, doc_id: str, how: str, digest: bytes, params: dict, source: str | None, offset: int, length: int = -1,
) -> tuple[str | None, str | None]:
    """Today's text of an indexed document (None if it cannot be read) and a warning, if any.

    Read as the index read it (:func:`simdoc.corpus.read.read_again`: a
    ``--max-bytes`` prefix, links followed or not, a WARC member at its
    offset or else by id); a text whose digest is not the one indexed is
    still shown, with a warning saying so.
    """
    if root is None:
        return None, f"{doc_id}: the index does not record its corpus folder; no passages"
    follow = params.get("follow_symlinks", False)
    path = confined_path(root, source if source is not None else doc_id, follow)
    if path is None:
        return None, f"{doc_id}: a symbolic link now leads it out of the corpus; not read, no passages"
    got = read_again(
        path, doc_id, how, digest, source=source, offset=offset, length=length, max_bytes=params.get("max_bytes"), follow=follow,
        fields=(params.get("text_field", "text"), params.get("id_field")), search=True,
        main_content=bool(params.get("main_content")), all_responses=bool(params.get("all_responses")),
    )
    if got.text is None:
        return None, f"{doc_id}: {got.problem}; no passages"
    return got.text, None if got.same else CHANGED.format(doc=doc_id)


def pair_evidence(
    loaded: LoadedIndex,
    doc_a: str,
    doc_b: str,
    min_words: int = DEFAULT_MIN_WORDS,
) -> PairEvidence:
    """Similarity numbers and shared passages of two documents of an index.

    Parameters
    ----------
    loaded : LoadedIndex
        Needs the shingle stage; the signature stage is used if current.
    doc_a, doc_b : str
        Document ids, or paths to files of the corpus.
    min_words : int
        Shortest passage reported, in words.
    """
    if min_words < 1:
        raise UsageError(f"--min-words must be at least 1, got {min_words}")
    shingle = loaded.stage("shingle")
    root = shingle.get("corpus")
    docs = loaded.docs()
    ids = docs.ids
    skipped = {s["id"]: s.get("reason") or "" for s in shingle.get("skipped", [])}
    a, b = resolve_doc(doc_a, ids, root, skipped), resolve_doc(doc_b, ids, root, skipped)
    if a == b:
        raise UsageError(f"{doc_a} and {doc_b} are the same document", hint="give two different documents")
    estimated = num_perm = scheme = None
    sig = loaded.manifest["stages"].get("signature")
    if sig is not None and sig.get("built_from") == shingle.get("build_id"):
        from simdoc.similarity import shown_estimate

        sigs = loaded.signatures()
        estimated, num_perm = shown_estimate(sigs[a], sigs[b], bool(docs.n_shingles[a] and docs.n_shingles[b])), sigs.shape[1]
        scheme = sig["params"].get("scheme", "classic")
    from simdoc.store.doctable import HOW

    warnings = []
    texts = []
    for d in (a, b):
        text, warn = _read(
            root, ids[d], HOW[int(docs.how[d])], bytes(docs.digest[d]), shingle["params"], docs.sources[d] or None,
            int(docs.offset[d]), int(docs.length[d]),
        )
        texts.append(text)
        warnings += [warn] if warn else []
    text_a, text_b = texts
    overlap = None
    if text_a is not None and text_b is not None:
        overlap = texts_overlap(text_a, text_b, loaded.spec())
    indexed = _indexed_jaccard(loaded, a, b) if warnings else None
    lowercase = shingle["params"].get("lowercase", True)
    return _with_passages(
        ids[a], ids[b], text_a, text_b, overlap, estimated, num_perm, scheme, lowercase, min_words, warnings, indexed
    )


def text_evidence(
    doc_a: str,
    text_a: str,
    doc_b: str,
    text_b: str,
    spec: ShingleSpec,
    hasher: MinHasher,
    min_words: int = DEFAULT_MIN_WORDS,
) -> PairEvidence:
    """Similarity numbers and shared passages of two texts that belong to no index.

    Parameters
    ----------
    doc_a, doc_b : str
        Names to show for the two texts.
    text_a, text_b : str
        The texts, as an index would read them (see :mod:`simdoc.corpus.file_texts`).
    spec : ShingleSpec
        How to shingle them.
    hasher : MinHasher
        The signatures behind the estimate.
    min_words : int
        Shortest passage reported, in words.
    """
    from simdoc.shingling import shingle_texts
    from simdoc.similarity import shown_estimate

    if min_words < 1:
        raise UsageError(f"--min-words must be at least 1, got {min_words}")
    from simdoc.corpus import streaming
    from simdoc.minhash import SignatureFold

    sigs = []
    for text in (text_a, text_b):  # a long text signed a piece at a time: the same bytes
        if len(text) <= streaming.LARGE_CHARS:
            sigs.append(hasher.signatures(shingle_texts([text], spec, form="stream"))[0])
            continue
        fold = SignatureFold(hasher)
        streaming.windows_in_pieces(text, spec, lambda data, _counts: fold.add(data))
        sigs.append(fold.result())
    overlap = texts_overlap(text_a, text_b, spec)
    estimated = shown_estimate(sigs[0], sigs[1], bool(overlap.n_a and overlap.n_b))
    return _with_passages(
        doc_a, doc_b, text_a, text_b, overlap, estimated, hasher.num_perm, hasher.scheme, spec.lowercase, min_words, []
    )


def _with_passages(
    doc_a, doc_b, text_a, text_b, overlap, estimated, num_perm, scheme, lowercase: bool, min_words: int,
    warnings: list[str], indexed: tuple[float, float] | None = None,
) -> PairEvidence:
    from simdoc.corpus.formats import cut_utf8

    # The passage search costs some 80 bytes of memory per byte of text: it looks at the
    # first PASSAGE_BYTES of each document (the numbers above are from all of it).
    cut = []
    searched = []
    for doc, text in ((doc_a, text_a), (doc_b, text_b)):
        part = cut_utf8(text, PASSAGE_BYTES) if text is not None and len(text) > PASSAGE_BYTES // 4 else text
        cut.append(part is not None and len(part) < len(text))
        searched.append(part)
        if cut[-1]:
            warnings.append(f"{doc}: only its first {PASSAGE_BYTES} bytes are searched for shared passages")
    text_a, text_b = searched
    keys_a, spans_a = split_words(text_a, lowercase) if text_a is not None else ([], [])
    keys_b, spans_b = split_words(text_b, lowercase) if text_b is not None else ([], [])
    runs = common_runs(keys_a, keys_b, min_words)
    passages = [
        Passage(n, i, i + length, j, j + length, join_spans(text_a, spans_a, i, i + length))
        for n, (i, j, length) in enumerate(runs, start=1)
    ]
    return PairEvidence(
        doc_a, doc_b, overlap, estimated, num_perm, passages, len(keys_a), len(keys_b), min_words, warnings,
        text_a, text_b, spans_a, spans_b, scheme, indexed, cut[0], cut[1],
    )


def _indexed_jaccard(loaded: LoadedIndex, a: int, b: int) -> tuple[float, float] | None:
    """(set, bag) Jaccard of documents a and b as indexed, if the pair was verified (or they are copies)."""
    from simdoc.store.verified import pair_keys

    docs = loaded.docs()
    ident = docs.identities()[[a, b]]
    if np.array_equal(ident[0], ident[1]):  # exact copies: the same bag twice (nothing, if empty)
        return (1.0, 0.5) if int(docs.n_shingles[a]) else (0.0, 0.0)
    found, jac = loaded.verified_pairs().lookup(pair_keys(ident, np.array([0]), np.array([1])))
    return (float(jac[0, 0]), float(jac[0, 1])) if found[0] else None

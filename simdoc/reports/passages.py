"""Shared passages of two texts: maximal common runs of words, found by greedy string tiling.

Words are compared after the index's normalisation (lowercasing unless the
index was built with ``--no-lowercase``) with punctuation stripped from
their ends, so "fox." matches "fox". All maximal common runs of at least
``min_words`` words are taken longest first (the method of plagiarism
detectors such as JPlag), and a run that overlaps one already taken is cut
to its unclaimed parts: paragraphs that were moved are still found, which
an in-order diff (``difflib``) would miss, and no word belongs to two
passages. :func:`document_segments` then cuts a text into shared and own
segments for display. Pure functions: no I/O, no printing.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass

import numpy as np

from simdoc.errors import UsageError
from simdoc.wording import count

DEFAULT_MIN_WORDS = 5


DEFAULT_CONTEXT = 12


# Per word-gram, at most this many positions in B are tried: a line repeated
# hundreds of times would otherwise cost a quadratic number of comparisons.
MAX_POSITIONS = 64


_WORD = re.compile(r"\S+")


_PUNCT = "\"'`.,;:!?()[]{}<>«»“”‘’„…–—-*_/\\|#&%$@^~+="


def split_words(text: str, lowercase: bool = True) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` as comparison keys, and each word's (start, end) in ``text``.

    >>> split_words("The fox. THE fox!")
    (['the', 'fox', 'the', 'fox'], [(0, 3), (4, 8), (9, 12), (13, 17)])
    """
    keys, spans = [], []
    for m in _WORD.finditer(text):
        word = m.group()
        key = word.lower() if lowercase else word
        keys.append(key.strip(_PUNCT) or key)  # a word of punctuation only stays itself
        spans.append(m.span())
    return keys, spans


@dataclass(frozen=True)
class Passage:
    """A run of words found in both documents.

    Attributes
    ----------
    number : int
        1, 2, ... in order of position in A.
    a_start, a_end : int
        Word positions in A, half-open, counted from 0.
    b_start, b_end : int
        Word positions in B.
    text : str
        The words as written in A, joined by single blanks.
    """

    number: int
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    text: str = ""

    @property
    def words(self) -> int:
        return self.a_end - self.a_start


def common_runs(keys_a: list[str], keys_b: list[str], min_words: int = DEFAULT_MIN_WORDS) -> list[tuple[int, int, int]]:
    """Non-overlapping common runs of at least ``min_words`` words, by greedy string tiling.

    Returns
    -------
    list of (a_start, b_start, length)
        Sorted by ``a_start``. No word of A, and no word of B, is in two runs.

    Examples
    --------
    >>> a = "one two three four five six seven".split()
    >>> b = "five six seven and one two three four".split()
    >>> common_runs(a, b, 3)
    [(0, 4, 4), (4, 0, 3)]
    """
    if min_words < 1:
        raise UsageError(f"--min-words must be at least 1, got {min_words}")
    m = min_words
    na, nb = len(keys_a), len(keys_b)
    if na < m or nb < m:
        return []
    starts: dict[tuple[str, ...], list[int]] = {}
    for j in range(nb - m + 1):
        pos = starts.setdefault(tuple(keys_b[j : j + m]), [])
        if len(pos) < MAX_POSITIONS:
            pos.append(j)
    heap: list[tuple[int, int, int]] = []  # (-length, a_start, b_start)
    for i in range(na - m + 1):
        for j in starts.get(tuple(keys_a[i : i + m]), ()):
            if i and j and keys_a[i - 1] == keys_b[j - 1]:
                continue  # not left-maximal: found from an earlier start
            n = m
            while i + n < na and j + n < nb and keys_a[i + n] == keys_b[j + n]:
                n += 1
            heap.append((-n, i, j))
    heapq.heapify(heap)
    used_a = np.zeros(na, dtype=bool)
    used_b = np.zeros(nb, dtype=bool)
    runs = []
    while heap:
        neg, i, j = heapq.heappop(heap)
        n = -neg
        free = ~(used_a[i : i + n] | used_b[j : j + n])
        if free.all():
            used_a[i : i + n] = True
            used_b[j : j + n] = True
            runs.append((i, j, n))
            continue
        # Overlaps a longer run already taken: put back its unclaimed pieces.
        edges = np.flatnonzero(np.diff(np.concatenate(([0], free.view(np.int8), [0]))))
        for s, e in zip(edges[::2], edges[1::2]):
            if e - s >= m:
                heapq.heappush(heap, (-(int(e) - int(s)), i + int(s), j + int(s)))
    runs.sort()
    return runs


@dataclass(frozen=True)
class Segment:
    """A stretch of one document as shown: shared (in passage ``passage``) or its own.

    ``head`` is shown; with ``elided > 0``, that many words are left out
    after it and ``tail`` follows.
    """

    kind: str  # "shared" or "own"
    passage: int | None
    head: str
    elided: int = 0
    tail: str = ""


def join_spans(text: str, spans: list[tuple[int, int]], start: int, stop: int) -> str:
    return " ".join(text[s:e] for s, e in spans[start:stop])


def document_segments(
    text: str,
    spans: list[tuple[int, int]],
    ranges: list[tuple[int, int, int]],
    context: int | None = DEFAULT_CONTEXT,
) -> list[Segment]:
    """Cut a document into own and shared segments, shortening long stretches.

    Parameters
    ----------
    text : str
    spans : list of (start, end)
        Character span of each word (from :func:`split_words`).
    ranges : list of (start, end, passage number)
        Shared word ranges of this document, any order, not overlapping.
    context : int or None
        A stretch longer than ``2 * context`` words keeps only its first and
        last ``context`` words (the document's first and last stretches of own
        text keep only the side next to a passage). None: show everything.
    """
    out: list[Segment] = []
    pos = 0
    n = len(spans)
    ordered = sorted(ranges)

    def add(kind: str, number: int | None, s: int, e: int) -> None:
        if e <= s:
            return
        length = e - s
        keep_head = keep_tail = length
        if context is not None:
            if kind == "own" and s == 0 and e == n and not ordered:
                keep_head, keep_tail = min(length, 2 * context), 0
            elif kind == "own" and s == 0:
                keep_head, keep_tail = 0, min(length, context)
            elif kind == "own" and e == n:
                keep_head, keep_tail = min(length, context), 0
            elif length > 2 * context:
                keep_head = keep_tail = context
        if keep_head + keep_tail >= length:
            out.append(Segment(kind, number, join_spans(text, spans, s, e)))
        else:
            out.append(
                Segment(
                    kind,
                    number,
                    join_spans(text, spans, s, s + keep_head),
                    length - keep_head - keep_tail,
                    join_spans(text, spans, e - keep_tail, e),
                )
            )

    for s, e, number in ordered:
        add("own", None, pos, s)
        add("shared", number, s, e)
        pos = e
    add("own", None, pos, n)
    return out


def render_plain(segments: list[Segment]) -> str:
    """Segments as one line of plain text: ``[[1: shared words]]``, ``(... 40 words ...)``."""
    parts = []
    for seg in segments:
        body = seg.head
        if seg.elided:
            body = " ".join(x for x in (seg.head, f"(... {count(seg.elided, 'word')} ...)", seg.tail) if x)
        parts.append(f"[[{seg.passage}: {body}]]" if seg.kind == "shared" else body)
    return " ".join(parts)

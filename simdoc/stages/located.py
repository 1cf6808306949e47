"""Members of plain JSON Lines files read again at their places, looked up as columns (issue 29).

Verification of 10^6 records wants ~10^5 members at a time. Where each one
lives comes from the docs table's columns for all of them at once (its file:
the run of rows it is in; its offset, length and digest), never a row at a
time; each file's lines are read in on-disk order, by few large reads
(:func:`simdoc.corpus.jsonl_at.lines_at`), parsed as the scan parsed them,
and their texts' digests compared with the table's in one array operation.
The usual lines are parsed by the compiled scanner of the scan
(:mod:`simdoc.kernels_json`) and all the texts' digests taken by one call of
the BLAKE2b kernel; what is left in Python per member is a slice or two.

A member not found so (its line moved or was edited, its file is compressed
or gone, the text is not the one indexed) is left to the caller, which reads
it the general way (:meth:`simdoc.stages.reread.DocumentReader.read_batch`
looks for it by its id and calls it stale if it is not there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simdoc.digests import blake2b_16
from simdoc.corpus.files import compression_of
from simdoc.corpus.jsonl_at import line_utf8
from simdoc.store.doctable import HOW, DocsTable

JSONL = HOW.index("jsonl")


@dataclass
class Located:
    """The members read where they are, with the digest indexed, as columns."""

    docs: np.ndarray  # int64: the members read, in the order asked
    raw: bytes  # their texts' UTF-8 bytes one after another (as the digest and the kernels take a text)
    offsets: np.ndarray  # int64 (len(docs) + 1,): where each one's bytes start in ``raw``, then the end
    rest: np.ndarray  # int64: the others asked for (not found so, or not in a plain JSON Lines file)

    def text(self, k: int) -> str:
        """The text of the k-th member read, as the scan had it (lone surrogates included)."""
        return self.raw[self.offsets[k] : self.offsets[k + 1]].decode("utf-8", "surrogatepass")

    @property
    def texts(self) -> list[str]:
        return [self.text(k) for k in range(len(self.docs))]


def jsonl_members(
    table: DocsTable, docs: np.ndarray, confined: Callable[[str], str | None], text_field: str = "text",
    max_bytes: int | None = None, follow_symlinks: bool = False,
) -> Located:
    """The members of plain JSON Lines files among ``docs`` read at their places (see the module
    docstring); ``confined`` gives a source's path to open, or None (not to be opened)."""
    docs = np.asarray(docs, dtype=np.int64)
    c = table.columns
    jsonl = np.flatnonzero(np.asarray(c["how"][docs]) == JSONL)
    runs = table.names.run_of(docs[jsonl])
    by_run = np.argsort(runs, kind="stable")  # each file's members together (a file is a run of rows)
    order, runs = jsonl[by_run], runs[by_run]
    bounds = [0, *(np.flatnonzero(np.diff(runs)) + 1).tolist(), len(runs)] if len(runs) else [0]
    at: list[int] = []  # positions in docs of the members a text was found for
    encoded: list[bytes] = []  # their texts' UTF-8 (surrogates passed)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        path = confined(table.names.file(int(runs[lo])))
        if path is None or compression_of(path) is not None:  # (a compressed file is one stream: read whole)
            continue
        group = order[lo:hi]
        rows = docs[group]
        got = line_utf8(path, np.asarray(c["offset"][rows]), np.asarray(c["length"][rows]), text_field, max_bytes, follow_symlinks)
        for k, text in zip(group.tolist(), got):
            if text is not None:
                at.append(k)
                encoded.append(text)
    # A member's digest is BLAKE2b-128 of its text's UTF-8 (simdoc.corpus.read.text_digest), taken
    # here of the bytes the kernels shingle next, all by one call.
    ends = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=ends[1:])
    raw = b"".join(encoded)
    at_a = np.asarray(at, dtype=np.int64)
    same = (blake2b_16(raw, ends) == np.asarray(table.digest[docs[at_a]]).reshape(-1, 16)).all(axis=1)
    keep = np.flatnonzero(same)
    found = np.zeros(len(docs), dtype=bool)
    found[at_a[keep]] = True
    if len(keep) < len(at):  # the texts whose digest is not the one indexed: dropped from the buffer
        kept = [encoded[k] for k in keep.tolist()]
        raw = b"".join(kept)
        ends = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, kept), dtype=np.int64, count=len(kept)), out=ends[1:])
    return Located(docs[at_a[keep]], raw, ends, docs[~found])

"""Members of a plain JSON Lines file read where the docs table says they are, as columns (issue 29).

A member's line is at (offset, length) in its file, as a web archive's CDX
index finds a record. Verification wants tens of thousands of them at once:
:func:`lines_at` takes their places as arrays, plans the reads with numpy
(lines close together in the file are read by one read of the bytes from the
first to the last, :data:`BLOCK_BYTES` at most) and reads them in on-disk
order, whatever order they were asked in; :func:`line_texts` parses each
line as the scan did. The parse of a line is the only per-member work left
in Python, and :func:`member_text` is its one place (a compiled scanner of
JSON lines can take it over there).

The file is never parsed whole here: a line no longer where it was gives
None, and the caller looks for that member by its id (or calls it stale).
"""

from __future__ import annotations

import codecs
import os

import numpy as np

from simdoc.kernel_choice import wanted
from simdoc.corpus import jsonl_ranges
from simdoc.corpus.encodings import UNDECODABLE
from simdoc.corpus.files import ReadResult, as_file, open_regular
from simdoc.corpus.formats import MEMBER_BYTES, _JsonlMembers

BLOCK_BYTES = 1 << 18  # the most one read of lines near each other covers (about: its last line may end past it)
_GAP_BYTES = 1 << 13  # lines further apart than this are read apart


def blocks(offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The reads that cover the lines at ``offsets`` (``lengths``): the lines in file order (their
    positions in the arrays), the first line of each read (into that order, then the number of
    lines), and each read's first byte and end."""
    offsets = np.asarray(offsets, dtype=np.int64)
    order = np.argsort(offsets, kind="stable")
    o = offsets[order]
    e = o + np.asarray(lengths, dtype=np.int64)[order]
    n = len(o)
    if not n:
        return order, np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    new = np.ones(n, dtype=bool)
    if BLOCK_BYTES > 0:
        # A read starts where the gap after everything before is too wide...
        new[1:] = o[1:] - np.maximum.accumulate(e)[:-1] > _GAP_BYTES
        # ...and every BLOCK_BYTES from the first line of a run of lines close together.
        run_first = o[np.flatnonzero(new)][np.cumsum(new) - 1]
        step = (o - run_first) // BLOCK_BYTES
        new[1:] |= step[1:] != step[:-1]
    first = np.flatnonzero(new)
    return order, np.append(first, n), o[first], np.maximum.reduceat(e, first)


def lines_at(path: str, offsets: np.ndarray, lengths: np.ndarray, follow_symlinks: bool = False) -> list[bytes | None]:
    """The bytes at each (offset, length) of ``path`` (arrays), in the order asked, read in file
    order by the reads :func:`blocks` plans: short where the file ends early, None for a place
    that is not one (a negative offset, a length past :data:`MEMBER_BYTES`) and for all of them
    once the file cannot be opened or read."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out: list[bytes | None] = [None] * len(offsets)
    valid = np.flatnonzero((offsets >= 0) & (lengths >= 0) & (lengths <= MEMBER_BYTES))
    if not len(valid):
        return out
    opened = open_regular(path, follow_symlinks, ranged=True)  # an object: one ranged request a read
    if isinstance(opened, ReadResult):
        return out
    order, first, starts, ends = blocks(offsets[valid], lengths[valid])
    which = valid[order].tolist()
    at = offsets[valid][order].tolist()
    ln = lengths[valid][order].tolist()
    handle = opened[0]
    with as_file(handle, buffering=0) as f:
        for b, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist())):
            try:  # a descriptor: one pread a block (an object's file: a ranged request)
                if isinstance(handle, int):
                    block = os.pread(handle, hi - lo, lo)
                else:
                    f.seek(lo)
                    block = f.read(hi - lo)
            except OSError:
                return out
            for k in range(int(first[b]), int(first[b + 1])):
                a = at[k] - lo
                out[which[k]] = block[a : a + ln[k]]
    return out


def member_text(line: bytes | None, offset: int, length: int, text_field: str = "text", max_bytes: int | None = None) -> str | None:
    """The text of the member whose line is ``line`` (read at ``offset``, indexed as ``length``
    bytes long), parsed as the scan parsed it; None if it is not that line any more (short) or
    holds no member. Its key is not needed: the caller checks the text's digest."""
    if line is None or len(line) != length:
        return None
    if offset == 0 and line.startswith(codecs.BOM_UTF8):
        line = line[len(codecs.BOM_UTF8) :]
    # The usual line by one scanner call (jsonl_ranges.FAST: tests turn it off to compare).
    text = jsonl_ranges._usual_text(line, text_field) if jsonl_ranges.FAST else None
    if text is not None and (max_bytes is None or len(text) <= max_bytes // 4):  # else it may need cutting
        return text
    members = _JsonlMembers("", text_field, None, max_bytes)
    members.add(1, line.decode("utf-8", UNDECODABLE), offset, length)
    return members.docs[0][1] if members.docs else None


def line_texts(
    path: str, offsets: np.ndarray, lengths: np.ndarray, text_field: str = "text", max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> list[str | None]:
    """The text of the member at each (offset, length) of ``path``, in the order asked (None: not
    found there): :func:`lines_at`, then :func:`member_text` of each line."""
    lines = lines_at(path, offsets, lengths, follow_symlinks)
    return [
        member_text(line, o, k, text_field, max_bytes)
        for line, o, k in zip(lines, np.asarray(offsets).tolist(), np.asarray(lengths).tolist())
    ]


def line_utf8(
    path: str, offsets: np.ndarray, lengths: np.ndarray, text_field: str = "text", max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> list[bytes | None]:
    """:func:`line_texts` as UTF-8 (surrogates passed: the bytes a text's digest is of): the usual
    lines (:mod:`simdoc.kernels_json`) by one scanner call, the others by :func:`member_text`."""
    offsets, lengths = np.asarray(offsets, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    lines = lines_at(path, offsets, lengths, follow_symlinks)
    out: list[bytes | None] = [None] * len(lines)
    whole = [i for i, (line, n) in enumerate(zip(lines, lengths.tolist())) if line is not None and len(line) == n]
    joined = b"\n".join([lines[i] for i in whole])
    scanned = None
    if jsonl_ranges.FAST and whole and wanted():
        from simdoc.kernels_json import scan_lines  # here: numba is imported only by a run that calls a kernel

        scanned = scan_lines(joined, len(joined), text_field, MEMBER_BYTES)
    # One line a member: a line that holds a newline now (edited since) would shift the rest.
    if scanned is not None and len(scanned.starts) == len(whole):
        longest = None if max_bytes is None else max_bytes // 4  # a longer text may need cutting: member_text
        usual = scanned.usual & (scanned.chars <= longest if longest is not None else True)
        texts, starts, ends = scanned.texts.tobytes(), scanned.text_starts.tolist(), scanned.text_ends.tolist()
        for j, i in enumerate(whole):
            if usual[j]:
                out[i] = texts[starts[j] : ends[j]]
                lines[i] = None
    for i in whole:
        if lines[i] is not None:
            text = member_text(lines[i], int(offsets[i]), int(lengths[i]), text_field, max_bytes)
            out[i] = None if text is None else text.encode("utf-8", "surrogatepass")
    return out


def texts_at(
    path: str, at: dict[str, tuple[int, int]], text_field: str = "text", max_bytes: int | None = None,
    follow_symlinks: bool = False,
) -> dict[str, str | None]:
    """:func:`line_texts` of members named by their ids (id -> (offset, length) of its line)."""
    ids = list(at)
    places = np.array([at[i] for i in ids], dtype=np.int64).reshape(-1, 2)
    return dict(zip(ids, line_texts(path, places[:, 0], places[:, 1], text_field, max_bytes, follow_symlinks)))

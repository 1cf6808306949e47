"""A task's small plain files read together in one compiled loop, each as :func:`~simdoc.corpus.files.read_plain` gives it.

The shingle stage reads most files of a folder corpus whole (``how`` is
``whole``: small, local, not compressed, not HTML, not a file of members).
:class:`PlainBatch` reads all of a task's such files into one buffer by
:func:`simdoc.kernels_read.read_files` (the system calls of ``read_plain``,
with no Python between them), and :meth:`PlainBatch.take` then gives each
file's outcome exactly as ``read_plain`` would: its digest, status and
warning, and its text. A text that is ASCII or strict UTF-8 (with no
byte-order mark) stays in the buffer (a :class:`Span`),
from where :func:`sign_spans` signs the batch's spans in the one compiled
pass without a ``bytes`` object a file or a copy of them joined; any other
text is decoded as ``read_plain`` decodes it. A file the compiled loop left
(it changed, or is not what the walk saw) is read again by ``read_plain``,
which tells why.

For c100k (3.7 KB files): the reading went from ~11 us a file to ~6.5, and
the join of the batch's texts (2.7 us a file) is gone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simdoc.kernel_choice import wanted
from simdoc.bytesign import sign_joined, sign_texts
from simdoc.corpus.files import BINARY_SNIFF, NOFOLLOW, PLAIN_OPEN, plain_text, read_plain
from simdoc.corpus.objects import is_url
from simdoc.minhash import MinHasher
from simdoc.shingling import ShingleSpec
from simdoc.workspace import workspace

LARGEST = 1 << 24  # read_plain reads a file this long or longer its general way


@dataclass(frozen=True)
class Span:
    """A text left in a :class:`PlainBatch`'s buffer: its bytes ``buffer[start:end]``, ASCII or
    strict UTF-8 without a byte-order mark (the bytes of the ``str`` read_plain decodes)."""

    batch: PlainBatch
    start: int
    end: int
    ascii: bool

    def __len__(self) -> int:
        return self.end - self.start

    def bytes(self) -> bytes:
        return self.batch.buffer[self.start : self.end].tobytes()


class PlainBatch:
    """Files read by :func:`simdoc.kernels_read.read_files`; ``take(k)`` gives file k's outcome."""

    def __init__(self, paths: list[str], sizes: Sequence[int], follow_symlinks: bool) -> None:
        from simdoc import kernels_read

        self.paths = paths
        sizes = np.asarray(sizes, dtype=np.int64)
        out = workspace().get("read", int(sizes.sum()) + 1, np.uint8)
        flags = PLAIN_OPEN if follow_symlinks else PLAIN_OPEN | NOFOLLOW
        self.buffer, self.starts, self.state = kernels_read.read_files(paths, sizes, flags, BINARY_SNIFF, out)
        self._view = memoryview(self.buffer)
        self._starts = self.starts.tolist()
        self._state = self.state.tolist()
        self._read, self._ascii, self._utf8, self._nul = kernels_read.READ, kernels_read.ASCII, kernels_read.UTF8, kernels_read.NUL
        self.follow_symlinks = follow_symlinks

    def all_text(self) -> bool:
        """Whether every file was read here, and is text a :class:`Span` holds (no NUL among its
        first bytes; ASCII, or strict UTF-8 with no byte-order mark)."""
        from simdoc import kernels_read

        read = kernels_read.READ
        return bool(np.isin(self.state, (read | kernels_read.ASCII, read | kernels_read.UTF8)).all())

    def all_ascii(self) -> bool:
        from simdoc import kernels_read

        return bool((self.state & kernels_read.ASCII).all())

    def digests(self) -> list[bytes]:
        """Each file's BLAKE2b-128 (of what was read: for files :meth:`all_ascii_text` tells read)."""
        view, at = self._view, self._starts
        return [hashlib.blake2b(view[at[k] : at[k + 1]], digest_size=16).digest() for k in range(len(self.paths))]

    def take(self, k: int) -> tuple[str | bytes | Span | None, bytes, str | None, str]:
        """File k's ``read_plain`` result (text, digest, warning, status); a text that is ASCII,
        or strict UTF-8 with no byte-order mark, as a :class:`Span`."""
        state = self._state[k]
        if not state & self._read:  # left for read_plain: it reads the file again and says what it found
            return read_plain(self.paths[k], None, self.follow_symlinks)
        a, b = self._starts[k], self._starts[k + 1]
        digest = hashlib.blake2b(self._view[a:b], digest_size=16).digest()
        if state & (self._ascii | self._utf8) and not state & self._nul:
            return Span(self, a, b, bool(state & self._ascii)), digest, None, "ok"
        return plain_text(self._view[a:b].tobytes(), digest)


def read_together(
    files: Sequence[tuple[str, str, int, bytes | None]], hows: Sequence[str], largest: int, follow_symlinks: bool
) -> tuple[PlainBatch | None, list[int]]:
    """A task's files (id, path, size, digest indexed or None) that are read whole, local and at
    most ``largest`` bytes, read in one :class:`PlainBatch`, and each file's number in it (-1:
    read on its own). None where fewer than two are, without the compiled loop, or where every
    file is read again to see whether its bytes are the ones indexed (a run that finds them so
    signs nothing, and loads no numba)."""
    at = [-1] * len(files)
    if all(expected is not None for *_, expected in files) or not available():
        return None, at
    paths, sizes = [], []
    for i, ((_, path, size, _), how) in enumerate(zip(files, hows)):
        if how == "whole" and 0 <= size <= largest and size < LARGEST and (path[:1] == "/" or not is_url(path)):
            at[i] = len(paths)
            paths.append(path)
            sizes.append(size)
    if len(paths) < 2:
        return None, [-1] * len(files)
    return PlainBatch(paths, sizes, follow_symlinks), at


_USABLE: list = []  # [whether the compiled loop works here], found out once a process


def available() -> bool:
    """Whether the compiled loop can be had (numba, Linux, a C library with ``statx``): else
    files are read one by one. Found out once, by reading a file of Python's own with it: the
    loop is linked to the C library's functions when first called, and an old one (glibc before
    2.28) has no ``statx``. Not in a stage too small to load the kernels for (:mod:`simdoc.kernel_choice`)."""
    if not wanted():
        return False
    if not _USABLE:
        _USABLE.append(_works())
    return _USABLE[0]


def _works() -> bool:
    from simdoc import kernels_read

    if not kernels_read.AVAILABLE:
        return False
    path = os.__file__
    try:
        size = os.stat(path).st_size
        state = kernels_read.read_files([path, path], np.array([size, size]), PLAIN_OPEN, BINARY_SNIFF)[2]
    except Exception:  # noqa: BLE001 - no statx in this C library, say: files are read one by one
        return False
    return bool(state[0] & kernels_read.READ)


def sign_spans(texts: Sequence[str | bytes | Span], spec: ShingleSpec, hasher: MinHasher, out: np.ndarray) -> np.ndarray:
    """:func:`simdoc.bytesign.sign_texts` of texts some of which are :class:`Span` s: those signed
    from their batch's buffer (in place when they lie one after another there, as a task's
    files do), the others as ``sign_texts`` signs them. Returns each text's window count."""
    spans = [i for i, t in enumerate(texts) if t.__class__ is Span]
    if not spans:
        return sign_texts(texts, spec, hasher, out)
    windows = np.zeros(len(texts), dtype=np.int64)
    others = [i for i, t in enumerate(texts) if t.__class__ is not Span]
    if others:
        rows = np.empty((len(others), out.shape[1]), dtype=out.dtype)
        windows[others] = sign_texts([texts[i] for i in others], spec, hasher, rows)
        out[others] = rows
    batch = texts[spans[0]].batch
    starts = np.fromiter((texts[i].start for i in spans), dtype=np.int64, count=len(spans))
    ends = np.fromiter((texts[i].end for i in spans), dtype=np.int64, count=len(spans))
    if all(texts[i].batch is batch for i in spans) and (len(spans) == 1 or (starts[1:] == ends[:-1]).all()):
        raw, offsets = batch.buffer[: ends[-1]], np.append(starts, ends[-1])
    else:  # not one run of one buffer: the spans copied together
        raw = b"".join(texts[i].bytes() for i in spans)
        offsets = np.zeros(len(spans) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
    rows = np.empty((len(spans), out.shape[1]), dtype=out.dtype)
    windows[spans] = sign_joined(raw, offsets, spec, hasher, rows, ascii=all(texts[i].ascii for i in spans))
    out[spans] = rows
    return windows

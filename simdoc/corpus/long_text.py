"""A query document too long to hold: read again, as a stream, each time it is shingled.

``simdoc query`` holds a query's text only up to
:data:`simdoc.corpus.streaming.LARGE_CHARS` bytes. A longer plain file, or a
compressed one (on disk, or an object at a URL), is read as ``simdoc pairs`` streams a file
(:func:`simdoc.corpus.streaming.stream_document`); a longer text on stdin,
which cannot be read twice, is first copied to an anonymous temporary file
(no name to find or leave behind; the system frees it when simdoc exits, however
it ends). Each use reads the text again, a chunk at a time: once to sign it,
then once per pass of each exact comparison (a range of hashes at a time, see
:func:`simdoc.similarity.jaccard_in_passes`), so that memory does not grow
with its length. A file whose bytes are not those of its first reading is not
compared further: the sums of two passes over two versions would be no
Jaccard of either.
"""

from __future__ import annotations

import codecs
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np

from simdoc.corpus import streaming
from simdoc.corpus.encodings import UNDECODABLE, unicode_bom, wide_decoder, wide_end, wide_text
from simdoc.corpus.objects import is_url, object_stat
from simdoc.corpus.read import how_read
from simdoc.corpus.streaming import Part, shingle_pieces, stream_document
from simdoc.errors import OutputError
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec

Sink = Callable[[np.ndarray, np.ndarray], None]


class LongText:
    """One long document, read again each time it is shingled (:meth:`shingle`).

    ``failed``: its first reading found it unreadable (and said why);
    ``changed``: a later reading found other bytes (and said so, once).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.failed = False
        self.changed = False

    def shingle(
        self, spec: ShingleSpec, form: str, warn: Callable[[str], None], part: Part | None = None, sink: Sink | None = None
    ) -> ShingleSets | None:
        """Its one-row sets (``form``, ``part``, ``sink`` as for
        :func:`simdoc.corpus.streaming.stream_document`), read again; None if it
        cannot be read or changed since its first reading (``warn`` is told why)."""
        raise NotImplementedError


class LongFile(LongText):
    """A file of the file system, streamed as ``simdoc pairs`` streams one."""

    def __init__(self, path: str, name: str, max_bytes: int | None, follow_symlinks: bool) -> None:
        super().__init__(name)
        self.path, self.max_bytes, self.follow_symlinks = path, max_bytes, follow_symlinks
        self.digest: str | None = None  # of the bytes its first reading read

    def shingle(
        self, spec: ShingleSpec, form: str, warn: Callable[[str], None], part: Part | None = None, sink: Sink | None = None
    ) -> ShingleSets | None:
        res, sets = stream_document(self.path, spec, self.max_bytes, self.follow_symlinks, form, part=part, sink=sink)
        if self.digest is None:  # the first reading: what it found is said once, as for any query file
            for w in (res.warning or "").split("; "):
                if w:
                    warn(f"{self.name}: {w}")
            self.failed = res.text is None
            self.digest = res.digest
            return None if self.failed else sets
        if res.text is None or res.digest != self.digest:
            if not self.changed:
                self.changed = True
                warn(f"{self.name}: changed while it was read; its candidates are not compared (query it again)")
            return None
        return sets


class SpilledText(LongText):
    """Text read from a stream (stdin) into an anonymous temporary file, decoded as UTF-8
    (a leading byte-order mark dropped, a byte that is not UTF-8 kept as itself), as a short
    text from stdin is."""

    def __init__(self, name: str, file: BinaryIO) -> None:
        super().__init__(name)
        self.file = file

    def shingle(
        self, spec: ShingleSpec, form: str, warn: Callable[[str], None], part: Part | None = None, sink: Sink | None = None
    ) -> ShingleSets | None:
        return shingle_pieces(self._pieces(), spec, form, part, sink)

    def _pieces(self) -> Iterator[str]:
        self.file.seek(0)
        wide = unicode_bom(self.file.read(4))  # UTF-16 or UTF-32, as from a file
        self.file.seek(0)
        # A leading byte-order mark is dropped, as from a file.
        decoder = codecs.getincrementaldecoder("utf-8-sig")(UNDECODABLE) if wide is None else wide_decoder(wide)
        while chunk := self.file.read(streaming.CHUNK_BYTES):
            yield decoder.decode(chunk)
        yield decoder.decode(b"", final=True) if wide is None else wide_end(decoder, wide)[0]


def long_file(path: str, name: str, max_bytes: int | None, follow_symlinks: bool) -> LongFile | None:
    """``path`` as a :class:`LongFile` if a query should not hold its text: a plain file (not
    JSON Lines, WARC, Parquet or HTML) over LARGE_CHARS bytes, or compressed; else None (read it
    whole, as before: its documents are at most LARGE_CHARS characters, or members).
    An object (``s3://...``) is told by its size in the store, and streamed the same way
    (:func:`simdoc.corpus.files.open_regular` opens it), one request for each reading."""
    if is_url(path):
        st = object_stat(path)
        if st is None:
            return None  # the whole reading says why
        size = st.st_size
    else:
        try:
            size = os.stat(path).st_size
        except OSError:
            return None  # the whole reading says why
    how = how_read(path, size)
    if how == "streamed" or (how == "whole" and size > streaming.LARGE_CHARS):
        return LongFile(path, name, max_bytes, follow_symlinks)
    return None


def read_stdin(stream: BinaryIO, name: str = "-") -> str | SpilledText:
    """The text on ``stream``: held whole up to LARGE_CHARS bytes, else copied to an anonymous
    temporary file (in TMPDIR) and read from there each time it is shingled. Decoded as a file
    is (:func:`simdoc.corpus.files.read_document`): a leading byte-order mark is no text."""
    head = stream.read(streaming.LARGE_CHARS + 1)
    if len(head) <= streaming.LARGE_CHARS:
        wide = unicode_bom(head)
        return head.decode("utf-8-sig", UNDECODABLE) if wide is None else wide_text(head, wide, False)[0]
    try:
        spill = tempfile.TemporaryFile(prefix="simdoc-stdin-")
        spill.write(head)
        del head
        shutil.copyfileobj(stream, spill, streaming.CHUNK_BYTES)
        spill.flush()
    except OSError as exc:
        raise OutputError(
            f"cannot copy the query on stdin to a temporary file in {tempfile.gettempdir()}: {exc.strerror or exc}",
            hint="set TMPDIR to a directory with room, or give the query as a file",
        ) from None
    return SpilledText(name, spill)

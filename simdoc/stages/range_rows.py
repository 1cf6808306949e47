"""A JSON Lines range's documents as columns, with no object per document (issue 29).

A task reading one range of a big JSON Lines file (:mod:`simdoc.corpus.jsonl_ranges`)
gets its members as columns (:class:`~simdoc.corpus.jsonl_rows.Columns`: line numbers,
where each line is, and the texts' UTF-8 bytes in one buffer, most written there by the
compiled scanner with no ``str`` per record). :func:`rows_batch` turns them into the task's
result in a few passes over arrays: the ids ``SOURCE/#LINE`` made as arrays from the line
numbers, each text's digest taken from its slice of the buffer, every text signed from the
buffer by one call of the kernel (:func:`simdoc.bytesign.sign_joined`). A range of 10^4 records of ~360 characters made a tuple, a member
object, a ``DocOut`` and an id string per record before, which cost more than
signing them.

The result is the one the general path of :func:`simdoc.stages.scan._scan` gives, byte for
byte (the tests compare them); where that path does something these columns do not
(``--min-length``, a text long enough to be signed in pieces, shingle sets kept), the
caller takes the general path.
"""

from __future__ import annotations

import numpy as np

from simdoc.digests import blake2b_16
from simdoc.bytesign import sign_joined
from simdoc.corpus import streaming
from simdoc.corpus.formats import member_id
from simdoc.corpus.jsonl_ranges import Piece, line_ids
from simdoc.corpus.read import FileRead, member_identities
from simdoc.stages.scan_results import BatchResult, FileOutcome
from simdoc.store.doccolumns import DocColumns
from simdoc.store.doctable import HOW, STATUSES


def rows_batch(task, got: FileRead, piece: Piece, how: str, hasher) -> BatchResult | None:
    """The result of ``task`` (one range of one JSON Lines file, ``got`` its members as rows), or
    None where the general path must make it (see the module docstring)."""
    if got.rows is None or task.keep_sets or task.shingle.min_length:
        return None
    rows = got.rows.columns()
    n = len(rows.lines)
    if n and int(rows.chars.max()) > streaming.LARGE_CHARS:
        return None
    doc_id = task.files[0][0]
    res = got.result
    outcome = FileOutcome(bytes.fromhex(res.digest) if res.digest else b"", res.status, res.warning, False, how)
    outcome.left_out = list(got.left_out or [])
    outcome.n_docs = n
    # Each text's digest from its UTF-8 bytes in the buffer, as text_digest encodes it, and its
    # identity (simdoc.corpus.read.member_identities), all in one compiled call each.
    digests = blake2b_16(rows.raw, rows.bounds)
    identities = member_identities(digests, how)
    sigs = np.empty((n, task.signature.num_perm), dtype=np.uint32)
    windows = sign_joined(rows.raw, rows.bounds, task.shingle.spec, hasher, sigs) if n else np.zeros(0, np.int64)
    prefix = member_id(doc_id, "").encode("utf-8", "surrogateescape")
    source = np.frombuffer(doc_id.encode("utf-8", "surrogateescape"), dtype=np.uint8)
    docs = DocColumns(
        *line_ids(prefix, rows.lines),
        np.tile(source, n), np.arange(n + 1, dtype=np.int64) * len(source),
        offset=rows.offsets.reshape(n),
        length=rows.lengths.reshape(n),
        size=np.diff(rows.bounds),
        n_shingles=np.asarray(windows, dtype=np.int64).reshape(n),
        how=np.full(n, HOW.index(how), dtype=np.uint8),
        status=np.full(n, STATUSES.index("ok"), dtype=np.uint8),
        digest=digests,
        identity=identities,
    )
    return BatchResult([outcome], docs, sigs, None, piece=piece)

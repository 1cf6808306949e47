"""A task whose files are all small texts read together: its result made at once.

Most tasks of a folder corpus are so (every one of c100k's). :func:`plain_result`
gives the :class:`~simdoc.stages.scan_results.BatchResult` that the file-by-file
way of :func:`simdoc.stages.scan._scan` gives for such a task, byte for byte
(tests/test_plain_batch.py compares them), as columns made once for the task:
each file one document, its digest, its signature from the batch's buffer in
one compiled pass, its identity from one call of the BLAKE2b kernel. No
:class:`~simdoc.stages.scan_results.DocOut` and no text object is made a file.
"""

from __future__ import annotations

import numpy as np

from simdoc.bytesign import sign_joined
from simdoc.corpus.plain_batch import PlainBatch
from simdoc.corpus.read import member_identities
from simdoc.minhash import MinHasher
from simdoc.stages.scan_results import BatchResult, FileOutcome
from simdoc.store.doccolumns import DocColumns


def plain_result(files: list[tuple[str, str, int, bytes | None]], batch: PlainBatch, hasher: MinHasher, spec, num_perm: int) -> BatchResult:
    """The result of a task of ``files`` (id, path, size, None), all read whole into ``batch``
    as text (:meth:`PlainBatch.all_text`), each signed as ``spec`` and ``hasher`` say."""
    n = len(files)
    digests = batch.digests()
    signatures = np.empty((n, num_perm), dtype=np.uint32)
    offsets = batch.starts  # the files lie one after another in the buffer, in task order
    windows = sign_joined(batch.buffer[: int(offsets[-1])], offsets, spec, hasher, signatures, ascii=batch.all_ascii())
    outcomes = [FileOutcome(d, "ok", None, False, "whole", 1) for d in digests]
    identities = member_identities(np.frombuffer(b"".join(digests), dtype=np.uint8), "whole")
    none = [-1] * n
    docs = DocColumns.build(
        [f[0] for f in files], [""] * n, none, none, [f[2] for f in files], windows, ["whole"] * n, ["ok"] * n, digests, identities
    )
    return BatchResult(outcomes, docs, signatures, None)

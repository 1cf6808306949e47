"""Big files whose stat changed: their digest compared before they are parsed or shingled.

A file whose stat is not the one recorded (``touch``, ``chmod``, a copy
that keeps the bytes, a hard link made or removed), or that was racily clean
when it was listed (:mod:`simdoc.stages.racy`), is read again; if its bytes
still have the digest indexed, its rows are kept and only its stat is
recorded, as git re-hashes such an entry. For a file of many documents the
reading tasks parse and sign every member first, and learn only at the end
that nothing changed (:mod:`simdoc.stages.ranges`): beside a touched 378 MB
JSON Lines file of 10^6 records, a night that added 5,000 records took 12.2 s
that way, more than a rebuild (7.3 s), to keep the rows it had. A streamed
file (over 64 MiB, or compressed) was shingled again whatever its digest
(:mod:`simdoc.corpus.streaming` signs it as it reads).

:func:`confirm_unchanged` compares those files' digests first, one task a
file on the engine (:func:`same_bytes`: BLAKE2b over the bytes as they are
indexed, :func:`simdoc.corpus.read.indexed_file_digest`, ~0.65 s for that
file), and the plan keeps the rows of each one whose bytes are the ones
indexed, with its stat as listed now (``Plan.restat``). A file whose bytes
changed is read as before, for one more read of it (~6% of its parse). Only
files of :data:`CHECK_BYTES` or more are asked: a small file's parse costs
little more than its digest. A file of a bucket is not asked: its ETag
changed with its bytes, and a second GET would cost as much as the read.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simdoc import kernel_choice
from simdoc.corpus.files import compression_of
from simdoc.corpus.objects import is_url
from simdoc.corpus.read import MEMBER_WAYS, how_read, indexed_file_digest
from simdoc.corpus.walk import Entries
from simdoc.engines import Engine
from simdoc.params import ShingleParams
from simdoc.stages.plan import Plan
from simdoc.store.doctable import STAT_COLUMNS

CHECKED = (*MEMBER_WAYS, "streamed")  # (a file read whole compares its digest before it shingles)
CHECK_BYTES = 4 << 20  # a file a reading task's range or more (simdoc.corpus.jsonl_ranges.RANGE_BYTES)


class Check(NamedTuple):
    """One file to compare with the digest indexed (a task of :func:`same_bytes`)."""

    path: str
    how: str
    digest: bytes
    max_bytes: int | None
    follow_symlinks: bool


def same_bytes(check: Check) -> bool:
    """Whether the file's bytes still have the digest indexed (False if it cannot be read)."""
    got = indexed_file_digest(check.path, check.how, check.max_bytes, check.follow_symlinks)
    return got is not None and bytes.fromhex(got) == check.digest


def confirm_unchanged(plan: Plan, engine: Engine, shingle: ShingleParams) -> Plan:
    """``plan`` with the rows kept of each big file of many documents it would read whose bytes are
    the ones indexed (see the module); ``plan`` itself if there is none."""
    if plan.old is None:
        return plan
    asked = np.flatnonzero(~plan.keep & (plan.digest_row >= 0))
    if isinstance(plan.entries, Entries):  # sizes from the walk's columns: no entry made for a small file
        asked = asked[plan.entries.stat[asked, STAT_COLUMNS.index("file_size")] >= CHECK_BYTES]
    checks, at = [], []
    for i in asked.tolist():
        e = plan.entries[i]
        if e.size < CHECK_BYTES or is_url(e.path):
            continue
        how = how_read(e.path, e.size)
        row = int(plan.digest_row[i])
        same_size = int(plan.old.columns["file_size"][row]) == e.size
        if how not in CHECKED or not (same_size or compression_of(e.path) is not None):  # its bytes changed
            continue
        checks.append(Check(e.path, how, bytes(plan.old.file_digest[row]), shingle.max_bytes, bool(shingle.follow_symlinks)))
        at.append(i)
    if not checks:
        return plan
    with kernel_choice.reads(0):  # hashing: no kernel loaded for it (a pool's start would load them)
        same = np.fromiter(engine.map(same_bytes, checks), dtype=bool, count=len(checks))
    if not same.any():
        return plan
    restat = np.zeros(len(plan.keep), dtype=bool)
    restat[np.asarray(at, dtype=np.int64)[same]] = True
    return Plan(plan.entries, plan.keep | restat, plan.digest_row, plan.joined, plan.old, restat)

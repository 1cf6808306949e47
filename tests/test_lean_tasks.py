"""The reading tasks made from the plan's columns are the tasks scan_tasks makes.

:func:`simdoc.stages.lean_tasks.lean_scan_tasks` is the fast way a local
build's tasks are made; :func:`simdoc.stages.scan.scan_tasks` the general
one. On random plans (plain, compressed and JSON Lines files of sizes around
the batch and range bounds, WARC files that cannot be opened, files kept,
digests indexed or not, a fused build or shingle sets kept) both give the same
tasks in the same order: the same batches, ranges, digests and ways of reading.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.entries import Entries, PrefixedPaths
from simdoc.corpus.jsonl_ranges import RANGE_BYTES
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages.lean_tasks import lean, lean_scan_tasks, reading_tasks
from simdoc.stages.plan import Plan, ToRead
from simdoc.stages.scan import BATCH_BYTES, BATCH_DOCS, scan_tasks

SUFFIXES = (".txt", ".md", ".txt.gz", ".jsonl", ".jsonl.gz", ".warc.gz", "")
SIZES = st.one_of(
    st.integers(0, 5000),
    st.sampled_from([BATCH_BYTES - 1, BATCH_BYTES, BATCH_BYTES + 1, RANGE_BYTES + 1, 3 * RANGE_BYTES, BATCH_BYTES // 3]),
)


@st.composite
def plans(draw):
    n = draw(st.integers(0, 2 * BATCH_DOCS + 500))
    # Small files only, in some plans: a batch is then cut at BATCH_DOCS files before BATCH_BYTES.
    sizes = st.integers(0, 100) if draw(st.booleans()) else SIZES
    kinds = draw(st.lists(st.tuples(st.sampled_from(SUFFIXES), sizes, st.integers(0, 7).map(lambda k: k == 0), st.integers(-1, 3)), min_size=n, max_size=n))
    ids = [f"d{i // 700:02d}/f{i:05d}{suffix}" for i, (suffix, _, _, _) in enumerate(kinds)]
    stat = np.zeros((n, 5), dtype=np.int64)
    stat[:, 0] = [size for _, size, _, _ in kinds]
    prefixed = draw(st.booleans())
    paths = PrefixedPaths("/nowhere/corpus/", ids) if prefixed else ["/nowhere/corpus/" + i for i in ids]
    keep = np.array([k for _, _, k, _ in kinds], dtype=bool)
    digest_row = np.array([r for _, _, _, r in kinds], dtype=np.int64)
    old = SimpleNamespace(file_digest=np.arange(4 * 16, dtype=np.uint8).reshape(4, 16))
    plan = Plan(Entries(ids, paths, stat), keep, digest_row, None, old)
    return ToRead(plan, np.flatnonzero(~keep), lean=True)


@settings(max_examples=60, deadline=None)
@given(plans(), st.booleans())
def test_lean_tasks_are_scan_tasks(plan: ToRead, fused: bool) -> None:
    shingle = ShingleParams().resolved()
    signature = SignatureParams(128).resolved() if fused else None
    assert lean(plan, None) and not lean(plan, "/parts")
    expected = list(scan_tasks(plan, shingle, signature, None, lambda e: True, "/nowhere/index"))
    assert list(lean_scan_tasks(plan, shingle, signature, "/nowhere/index")) == expected
    assert list(reading_tasks(plan, shingle, signature, None, lambda e: True, "/nowhere/index")) == expected


def _plan(sizes: list[int], suffix: str = ".txt") -> ToRead:
    ids = [f"f{i:05d}{suffix}" for i in range(len(sizes))]
    stat = np.zeros((len(sizes), 5), dtype=np.int64)
    stat[:, 0] = sizes
    plan = Plan(Entries(ids, PrefixedPaths("/nowhere/", ids), stat), np.zeros(len(sizes), bool), np.full(len(sizes), -1), None, None)
    return ToRead(plan, np.arange(len(sizes)), lean=True)


def test_batches_are_cut_at_the_bounds() -> None:
    shingle, signature = ShingleParams().resolved(), SignatureParams(128).resolved()
    cases = {
        "files": [10] * (2 * BATCH_DOCS + 1),  # cut at BATCH_DOCS files
        "bytes": [BATCH_BYTES // 4 + 1] * 9,  # cut as a batch reaches BATCH_BYTES
        "large": [5, BATCH_BYTES, 5, BATCH_BYTES + 1, BATCH_BYTES - 1, 5],  # a large file alone
    }
    for name, sizes in cases.items():
        plan = _plan(sizes)
        got = [[f[2] for f in t.files] for t in lean_scan_tasks(plan, shingle, signature)]
        assert got == [[f[2] for f in t.files] for t in scan_tasks(plan, shingle, signature)], name
        assert sum(got, []) == sizes and len(got) > 1, name
    ranges = list(lean_scan_tasks(_plan([3 * RANGE_BYTES], ".jsonl"), shingle, signature))
    assert [t.span for t in ranges] == [t.span for t in scan_tasks(_plan([3 * RANGE_BYTES], ".jsonl"), shingle, signature)]
    assert len(ranges) == 3

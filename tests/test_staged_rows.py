"""A range's signature rows left by its worker in a staging file of the index, not sent through
the pool's pipe (issue 29, simdoc.stages.staged_rows): the arrays are byte for byte those of one
task, for any cut and any --jobs; a staging file is never left behind by a run that finishes or
fails, one a killed run left is cleaned up, and a worker with no room sends its rows back."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.corpus import jsonl_ranges
from simdoc.stages import ranges, staged_rows
from simdoc.store.names import OWN_TEMPORARY

WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()


def corpus(root: Path, n: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), size=int(rng.integers(3, 14)))]
        rows.append(json.dumps({"text": " ".join(words) + f" {i % 5}"}) if i % 11 else "")
    (root / "c").mkdir()
    (root / "c" / "big.jsonl").write_text("\n".join(rows) + "\n")
    (root / "c" / "small.txt").write_text("harbour tide table mountain goats climb steep paths\n")
    return root / "c"


def build(corpus: Path, index: Path, range_bytes: int, jobs: int = 1) -> tuple[list, dict[str, bytes]]:
    with mock.patch.object(jsonl_ranges, "RANGE_BYTES", range_bytes):
        pairs = [(p.doc_a, p.doc_b, p.estimated, p.jaccard) for p in simdoc.find_pairs(corpus, index, jobs=jobs, threshold=0.5)]
    return pairs, {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}


def staging_files(index: Path) -> list[str]:
    return [p.name for p in index.iterdir() if p.name.startswith(staged_rows.STAGED_PREFIX)]


class Spy:
    """Counts the staging files the main process took (forked workers do not count here)."""

    def __init__(self) -> None:
        self.n = 0
        self.real = staged_rows.open_staged

    def __call__(self, path: str, n: int) -> np.ndarray:
        assert OWN_TEMPORARY.match(os.path.basename(path)), path  # a temporary the store knows as its own
        self.n += 1
        return self.real(path, n)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(n=st.integers(0, 60), cut_at=st.integers(1, 900), seed=st.integers(0, 3))
def test_staged_rows_give_the_arrays_of_one_task_for_any_cut(tmp_path_factory, n, cut_at, seed):
    base = tmp_path_factory.mktemp("staged")
    c = corpus(base, n, seed)
    whole = build(c, base / "i1", 1 << 40)
    spy = Spy()
    # Staged as a worker of another process would (this one runs the tasks: --jobs 1).
    with mock.patch.object(staged_rows, "_here", return_value=False), mock.patch.object(ranges, "open_staged", spy):
        cut = build(c, base / "i2", cut_at)
    assert cut == whole
    assert staging_files(base / "i2") == []
    if n > 30 and cut_at < 100:
        assert spy.n > 1  # the rows did come through staging files


def test_staged_rows_with_two_workers_are_the_arrays_of_one_job(tmp_path):
    c = corpus(tmp_path, 400)
    one = build(c, tmp_path / "i1", 1 << 40, jobs=1)
    spy = Spy()
    with mock.patch.object(ranges, "open_staged", spy):
        two = build(c, tmp_path / "i2", 1500, jobs=2)
    assert two == one
    assert spy.n > 2
    assert staging_files(tmp_path / "i2") == []


def test_a_worker_with_no_room_sends_its_rows_back(tmp_path):
    c = corpus(tmp_path, 120)
    whole = build(c, tmp_path / "i1", 1 << 40)

    def full(folder: str, rows: np.ndarray) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    spy = Spy()
    with mock.patch.object(staged_rows, "_here", return_value=False), mock.patch.object(staged_rows, "write_staged", full), \
            mock.patch.object(ranges, "open_staged", spy):
        cut = build(c, tmp_path / "i2", 300)
    assert cut == whole
    assert spy.n == 0
    assert staging_files(tmp_path / "i2") == []


def test_a_staging_file_written_in_part_is_removed(tmp_path):
    def half(f, arr, allow_pickle=False):
        f.write(b"\x93NUMPY partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with mock.patch.object(np.lib.format, "write_array", half), pytest.raises(OSError):
        staged_rows.write_staged(str(tmp_path), np.zeros((3, 4), np.uint32))
    assert list(tmp_path.iterdir()) == []


def test_a_staging_file_that_is_not_its_tasks_is_refused_and_unlinked(tmp_path):
    path = staged_rows.write_staged(str(tmp_path), np.arange(12, dtype=np.uint32).reshape(3, 4))
    assert OWN_TEMPORARY.match(os.path.basename(path))
    with pytest.raises(RuntimeError, match="not the 5 signature rows"):
        staged_rows.open_staged(path, 5)
    assert list(tmp_path.iterdir()) == []
    path = staged_rows.write_staged(str(tmp_path), np.arange(12, dtype=np.uint32).reshape(3, 4))
    rows = staged_rows.open_staged(path, 3)
    assert list(tmp_path.iterdir()) == []  # unlinked at once: the mapping stays
    assert rows.tolist() == np.arange(12).reshape(3, 4).tolist()


def test_a_run_that_fails_while_joining_leaves_no_staging_file_and_the_next_is_right(tmp_path):
    c = corpus(tmp_path, 200)
    build(c, tmp_path / "i1", 1 << 40)
    build(c, tmp_path / "i2", 1 << 40)
    with open(c / "big.jsonl", "a") as f:  # the big file changed: read again, by ranges
        f.write(json.dumps({"text": "river stone bridge far from any harbour"}) + "\n")
    whole = build(c, tmp_path / "i1", 1 << 40)  # the same history, with no failure
    taken = []

    def fail_third(path: str, n: int) -> np.ndarray:
        taken.append(path)
        if len(taken) == 3:
            raise KeyboardInterrupt
        return staged_rows.open_staged(path, n)

    with mock.patch.object(staged_rows, "_here", return_value=False), mock.patch.object(ranges, "open_staged", fail_third):
        with pytest.raises(KeyboardInterrupt):
            build(c, tmp_path / "i2", 400)
    assert len(taken) == 3 and staging_files(tmp_path / "i2") == []
    assert build(c, tmp_path / "i2", 400, jobs=2) == whole


def test_staging_files_a_killed_run_left_are_removed_by_the_next_and_never_read(tmp_path):
    c = corpus(tmp_path, 150)
    for index in ("i1", "i2"):
        build(c, tmp_path / index, 1 << 40)
    # What a run killed after its workers wrote and before the join took them leaves behind:
    # rows that are not this build's, shaped as if they were.
    n = 150
    left = [staged_rows.write_staged(str(tmp_path / "i2"), np.full((n + i, 128), 7, np.uint32)) for i in range(2)]
    assert len(staging_files(tmp_path / "i2")) == 2
    with open(c / "big.jsonl", "a") as f:  # the big file changed: read again, by ranges
        f.write(json.dumps({"text": "river stone bridge far from any harbour"}) + "\n")
    again = build(c, tmp_path / "i1", 1 << 40)  # the same history, with nothing left behind
    assert build(c, tmp_path / "i2", 500, jobs=2) == again
    assert not any(os.path.exists(p) for p in left)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=6),
    data=st.data(),
)
def test_stacked_rows_gather_as_one_array_would(sizes, data):
    blocks = [np.arange(k * 3, dtype=np.uint32).reshape(k, 3) + 100 * b for b, k in enumerate(sizes)]
    whole = np.concatenate(blocks)
    rows = np.array(data.draw(st.lists(st.integers(0, max(len(whole) - 1, 0)), max_size=30 if len(whole) else 0)), dtype=np.int64)
    out = np.empty((len(rows), 3), np.uint32)
    got = staged_rows.StackedRows(blocks, 3).gather(rows, out)
    assert got is out
    assert got.tolist() == whole[rows].tolist()


def test_stacked_rows_refuse_a_row_they_do_not_hold():
    stacked = staged_rows.StackedRows([np.zeros((2, 3), np.uint32), np.ones((1, 3), np.uint32)], 3)
    for bad in ([3], [-1]):
        with pytest.raises(IndexError):
            stacked.gather(np.array(bad), np.empty((1, 3), np.uint32))


def _staged_blocks(tmp_path: Path, sizes: list[int], num_perm: int = 8) -> tuple[list[np.ndarray], np.ndarray]:
    """Staging files of ``sizes`` rows, mapped as the join maps them; and all their rows stacked."""
    rng = np.random.default_rng(len(sizes))
    whole = rng.integers(0, 1 << 32, size=(sum(sizes), num_perm), dtype=np.uint32)
    blocks, at = [], 0
    for n in sizes:
        blocks.append(staged_rows.open_staged(staged_rows.write_staged(str(tmp_path), whole[at : at + n]), n))
        at += n
    return blocks, whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5), seed=st.integers(0, 1 << 16), step=st.integers(1, 400))
def test_stacked_rows_gathered_in_slices_are_the_rows_and_each_block_is_let_go_once_taken(tmp_path_factory, sizes, seed, step):
    folder = tmp_path_factory.mktemp("stacked")
    blocks, whole = _staged_blocks(folder, sizes)
    stacked = staged_rows.StackedRows(list(blocks), whole.shape[1])
    order = np.random.default_rng(seed).permutation(len(whole))
    freed = []
    real = staged_rows.discard
    with mock.patch.object(staged_rows, "discard", side_effect=lambda b: freed.append(b) or real(b)):
        for a in range(0, len(order), step):
            rows = order[a : a + step]
            got = stacked.gather(rows, np.empty((len(rows), whole.shape[1]), np.uint32))
            assert got.tolist() == whole[rows].tolist()
            taken = np.zeros(len(whole), bool)
            taken[order[: a + len(rows)]] = True
            ends = np.cumsum(sizes)
            done = [bool(taken[e - n : e].all()) for e, n in zip(ends, sizes)]
            # Let go exactly when all its rows are taken, and discarded once.
            assert [b is None for b in stacked.blocks] == done
            assert len(freed) == sum(done)
            stacked.release()
    assert all(any(f is b for f in freed) for b in blocks)
    with pytest.raises(RuntimeError, match="gathered again"):
        stacked.gather(order[:1], np.empty((1, whole.shape[1]), np.uint32))
    assert list(folder.iterdir()) == []


def test_a_discarded_staging_file_reads_as_zeros_in_its_whole_pages_and_keeps_the_rest(tmp_path):
    from simdoc.memory import discard

    (block,), whole = _staged_blocks(tmp_path, [200], num_perm=128)  # 512 bytes a row, after a 128-byte header
    if not discard(block[10:50]):
        pytest.skip("this file system cannot punch holes (MADV_REMOVE)")
    # The whole pages of rows 10..49's bytes (pages of 4096 bytes: 8 rows, shifted by the header)
    # read as zeros; every other byte is as written.
    page = os.sysconf("SC_PAGE_SIZE")
    first = -(-(128 + 10 * 512) // page) * page - 128
    last = (128 + 50 * 512) // page * page - 128
    data, written = np.asarray(block).view(np.uint8).reshape(-1), whole.view(np.uint8).reshape(-1)
    assert not data[first:last].any()
    assert data[:first].tolist() == written[:first].tolist() and data[last:].tolist() == written[last:].tolist()


def test_discard_of_a_read_only_mapping_frees_nothing(tmp_path):
    from simdoc.memory import discard

    path = tmp_path / "rows.npy"
    np.save(path, np.arange(1, 1 + 64 * 128, dtype=np.uint32).reshape(64, 128))
    rows = np.load(path, mmap_mode="r")
    assert discard(rows) is False
    assert np.load(path).min() == 1
    assert discard(np.ones((64, 128), np.uint32)) is False  # not mapped: nothing to free

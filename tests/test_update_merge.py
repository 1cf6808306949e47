"""A nightly update merges what it kept into the next build instead of doing it all again (issue 29).

* The index stage merges the last build's buckets with the rows banded anew
  (:func:`simdoc.stages.banding.band_kept`): byte for byte what sorting every
  band gives (:func:`~simdoc.stages.banding.band_here`).
* The shingle stage's collector queues the runs it keeps and reads
  (:mod:`simdoc.stages.collector`): an update that keeps and reads files in
  many short runs writes its signature rows in a few writes, not one a run.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_incremental import age, arrays_by_role, build_corpus

import simdoc
import simdoc.stages.banding
import simdoc.stages.index
from simdoc.stages.banding import band_here, band_kept, can_merge
from simdoc.store.directory import IndexStore
from simdoc.store.npyfiles import NpyWriter

NAMES = {"bands": "bands.0123456789abcdef.npy", "buckets": "buckets.0123456789abcdef.npy"}


def _banded(folder: Path, sigs: np.ndarray, bands: int, rows: int, banded: np.ndarray):
    store = IndexStore(folder)
    store.ensure_dir()
    files, pairs = band_here(store, sigs, bands, rows, banded, NAMES, 1)
    return np.load(folder / NAMES["bands"]), np.load(folder / NAMES["buckets"]), pairs, files


@pytest.mark.parametrize("ties_at_once", [1 << 16, -(1 << 20)])  # the shared keys' rows compared at once, or a run at a time
@settings(max_examples=40, deadline=None)
@given(
    n_old=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    bands=st.integers(1, 4),
    values=st.integers(1, 3),  # few values: many equal keys, old and new rows in one bucket
)
def test_buckets_merged_from_the_last_build_are_the_buckets_sorted_again(ties_at_once, n_old, seed, bands, values):
    real = simdoc.stages.banding.TIES_AT_ONCE
    simdoc.stages.banding.TIES_AT_ONCE = ties_at_once
    try:
        _merged_equals_sorted(n_old, seed, bands, values)
    finally:
        simdoc.stages.banding.TIES_AT_ONCE = real


def _merged_equals_sorted(n_old: int, seed: int, bands: int, values: int) -> None:
    rng = np.random.default_rng(seed)
    rows, num_perm = 2, 8
    old_sigs = rng.integers(0, values, size=(n_old, num_perm), dtype=np.uint32)
    old_banded = rng.random(n_old) < 0.8
    # The next build: old rows kept in order (some deleted), new rows put anywhere between them.
    kept = np.flatnonzero(rng.random(n_old) < 0.85)
    layout = np.concatenate([kept, np.full(int(rng.integers(0, 8)), -1)])
    rng.shuffle(layout)
    old_of_new = np.full(len(layout), -1, dtype=np.int64)
    old_of_new[layout >= 0] = kept  # kept rows stay in their order
    n = len(old_of_new)
    sigs = rng.integers(0, values, size=(n, num_perm), dtype=np.uint32)
    sigs[old_of_new >= 0] = old_sigs[old_of_new[old_of_new >= 0]]
    banded = rng.random(n) < 0.8  # a kept row may be banded only now (its copy deleted), or no longer
    with tempfile.TemporaryDirectory() as tmp:
        old_keys, old_buckets, _, _ = _banded(Path(tmp) / "old", old_sigs, bands, rows, old_banded)
        want_keys, want_buckets, want_pairs, want_files = _banded(Path(tmp) / "full", sigs, bands, rows, banded)
        store = IndexStore(Path(tmp) / "merged")
        store.ensure_dir()
        files, pairs = band_kept(store, sigs, bands, rows, banded, NAMES, old_keys, old_buckets, old_of_new)
        for role in ("bands", "buckets"):
            name = NAMES[role]
            assert (Path(tmp) / "merged" / name).read_bytes() == (Path(tmp) / "full" / name).read_bytes(), role
        assert files == want_files
        assert np.array_equal(pairs, want_pairs)


def test_rows_kept_out_of_their_old_order_are_not_merged():
    assert can_merge(np.array([0, 1, -1, 2, 3, 4]), 5)
    assert not can_merge(np.array([0, 2, 1, 3, -1]), 4)  # reordered
    assert not can_merge(np.array([0, 1, 1, 2]), 3)  # one row twice
    assert not can_merge(np.array([0, -1, -1, -1]), 1)  # mostly new: sorting is as cheap


def _scattered_update(corpus: Path, names: list[str], rng: random.Random) -> None:
    """Every fifth file changed, a file added and one deleted: many short runs kept and read."""
    for name in names[::5]:
        (corpus / name).write_text((corpus / name).read_text(encoding="utf-8") + " amber closing words", encoding="utf-8")
    body = (corpus / names[4]).read_text(encoding="utf-8")
    (corpus / "part1" / "near.txt").write_text(body.replace("amber", "AMBER", 1), encoding="utf-8")
    (corpus / names[5]).unlink()


def test_an_update_merges_the_buckets_and_equals_a_rebuild(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    docs = build_corpus(corpus, n=40)
    age(corpus)
    simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1)
    _scattered_update(corpus, sorted(docs)[1:], random.Random(1))
    merged: list[int] = []
    real = band_kept

    def spy(*args):
        merged.append(1)
        return real(*args)

    monkeypatch.setattr(simdoc.stages.index, "band_kept", spy)
    updated = simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1)
    full = simdoc.find_pairs(corpus, tmp_path / "full", jobs=1)
    assert merged == [1]
    assert list(updated) == list(full)
    assert arrays_by_role(tmp_path / "idx") == arrays_by_role(tmp_path / "full")
    sizes = ("bucket_pairs", "largest_bucket", "large_buckets", "banded")  # a quiet night says them: simdoc.stages.results
    stages = [json.loads((tmp_path / d / "manifest.json").read_text())["stages"]["index"] for d in ("idx", "full")]
    assert [{k: s[k] for k in sizes} for s in stages][0] == {k: stages[1][k] for k in sizes}


def test_an_update_of_many_short_runs_writes_its_signature_rows_in_a_few_writes(tmp_path, monkeypatch):
    corpus = tmp_path / "c"
    docs = build_corpus(corpus, n=60)
    age(corpus)
    simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1)
    _scattered_update(corpus, sorted(docs)[1:], random.Random(2))
    appended: list[int] = []
    real = NpyWriter.append

    def append(self, arr):
        if self.name.startswith("signatures"):
            appended.append(len(arr))
        real(self, arr)

    monkeypatch.setattr(NpyWriter, "append", append)
    simdoc.find_pairs(corpus, tmp_path / "idx", jobs=1)
    assert sum(appended) == 61  # 60 files and the copy, one deleted, one added
    assert len(appended) <= 2  # before: a write for each of the ~25 runs kept or read


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("run"), st.integers(0, 30), st.integers(0, 9)),
    st.tuples(st.just("rows"), st.lists(st.integers(0, 39), max_size=5)),
    st.tuples(st.just("new"), st.integers(0, 4)),
), max_size=12), st.integers(1, 8))
def test_signature_rows_kept_and_added_are_written_in_order(parts, write_rows):
    from simdoc.stages import signature

    old = np.arange(40 * 4, dtype=np.uint32).reshape(40, 4)
    want, k = [], 1000
    real = signature._WRITE_ROWS
    signature._WRITE_ROWS = write_rows  # blocks cut anywhere, and a run or new rows across two
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = IndexStore(Path(tmp) / "idx")
            store.ensure_dir()
            rows = signature.SignatureRows(store, 4, old)
            for part in parts:
                if part[0] == "run":
                    picked = np.arange(part[1], part[1] + part[2])
                elif part[0] == "rows":  # not a run: in any order
                    picked = np.array(part[1], dtype=np.int64)
                else:
                    new = np.arange(k, k + 4 * part[1], dtype=np.uint32).reshape(-1, 4)
                    k += 4 * part[1]
                    rows.add_rows(new)
                    want.append(new)
                    continue
                rows.keep_rows(picked)
                want.append(old[picked])
            writer = rows.written()
            writer.name = "signatures.0123456789abcdef.npy"
            writer.finish()
            got = np.load(Path(tmp) / "idx" / writer.name)
    finally:
        signature._WRITE_ROWS = real
    assert np.array_equal(got, np.concatenate(want) if want else np.zeros((0, 4), np.uint32))

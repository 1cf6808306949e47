"""Banding on a Dask cluster (simdoc.stages.dask_index) writes the local engine's bands and buckets.

Whatever the size of the keys tasks (rows of signatures each) and of the
buckets tasks (key ranges per band), the files are byte-identical to those
the local engine writes, for a corpus with exact copies and documents
without shingles (which are not banded). The tasks go through a client that
runs them at once in this process, pickled there and back (see
test_dask_partitions).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dask_signatures import RecordingClient
from test_dask_partitions import InProcessClient
from conftest import add_exact_copies
from test_pipeline import make_corpus

from simdoc.engines import DaskEngine
from simdoc.params import BandingParams
from simdoc.stages import dask_index, dask_pairs
from simdoc.stages.index import add_index_stage
from simdoc.stages.pairs import find_pairs
from simdoc.store.loaded import open_index
from simdoc.store.names import PARTS


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """An index built by the local engine, of a corpus with exact copies and empty documents."""
    root = tmp_path_factory.mktemp("banding")
    docs = make_corpus(root / "c", seed=81, n_base=30)
    add_exact_copies(root / "c", docs)
    (root / "c" / "empty.txt").write_text("", encoding="utf-8")
    (root / "c" / "blank.txt").write_text(" \n\t ", encoding="utf-8")
    find_pairs(root / "c", root / "idx", threshold=0.5, jobs=1)
    return root / "idx"


def band_again(index: Path, where: Path, client, copied: bool = False) -> dict:
    """Band ``index``'s signatures again on ``client``, in a copy at ``where`` (made here unless
    ``copied``); {role: (manifest entry, bytes)} of the new files."""
    if not copied:
        shutil.copytree(index, where)
    loaded = open_index(where)
    held = loaded.manifest["stages"].pop("index")
    for name in held["roles"].values():
        (where / name).unlink()
    add_index_stage(loaded, BandingParams(bands=held["params"]["bands"], rows=held["params"]["rows"]), engine=DaskEngine(client, 1))
    stage = loaded.manifest["stages"]["index"]
    local = open_index(index).stage("index")
    for key in ("bucket_pairs", "largest_bucket", "large_buckets", "banded"):  # as the local engine counts them
        assert stage[key] == local[key], key
    return files_of(where, stage)


def files_of(index: Path, stage: dict) -> dict:
    """{role: (manifest entry, bytes)} of the index stage's files."""
    return {role: (stage["files"][name], (index / name).read_bytes()) for role, name in stage["roles"].items()}


def local_files(index: Path) -> dict:
    return files_of(index, open_index(index).stage("index"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys_rows=st.sampled_from([1, 2, 7, 20, 10**6]), ranges=st.integers(1, 40))
def test_any_cut_gives_the_local_engines_bands_and_buckets(index, tmp_path_factory, keys_rows, ranges):
    loaded = open_index(index)
    num_perm = loaded.stage("signature")["params"]["num_perm"]
    n_banded = open_index(index).bands()[1].shape[1]
    saved = dask_index.KEYS_TASK_BYTES, dask_pairs.PARTITION_BYTES
    dask_index.KEYS_TASK_BYTES = keys_rows * 4 * num_perm
    dask_pairs.PARTITION_BYTES = max(1, -(-n_banded * dask_pairs.ROW_BYTES // ranges))
    try:
        n_ranges = dask_pairs.ranges_per_band(n_banded)
        client = InProcessClient()
        got = band_again(index, tmp_path_factory.mktemp("again") / "idx", client)
    finally:
        dask_index.KEYS_TASK_BYTES, dask_pairs.PARTITION_BYTES = saved
    assert got == local_files(index)
    bands = loaded.stage("index")["params"]["bands"]
    n_keys = sum(isinstance(t, dask_index.KeysTask) for t in client.submitted)
    n_buckets = sum(isinstance(t, dask_index.BucketsTask) for t in client.submitted)
    assert n_keys == -(-len(loaded.docs()) // keys_rows)
    assert n_buckets == bands * n_ranges and n_ranges >= min(ranges, n_banded) // 2


def test_only_places_and_checksums_come_back_and_the_runs_go(index, tmp_path):
    client = RecordingClient()
    band_again(index, tmp_path / "idx", client)
    def leaves(x):
        return [y for item in x for y in leaves(item)] if isinstance(x, (list, tuple)) else [x]

    for result in client.results:
        flat = leaves(result)
        # keys: (start, length, crc) per band and the documents banded; buckets: a piece, its band, its pairs
        assert all(isinstance(x, int) for x in flat) and len(flat) <= 3 * 64 + 1
    assert not (tmp_path / "idx" / PARTS).exists()


def test_documents_without_shingles_and_later_copies_are_not_in_the_buckets(index):
    loaded = open_index(index)
    docs = loaded.docs()
    rep = loaded.representatives()
    keys, buckets = loaded.bands()
    banded = set(np.flatnonzero((docs.n_shingles > 0) & (rep == np.arange(len(rep)))).tolist())
    assert len(banded) < len(docs) - 3  # two empty documents, three later copies
    for t in range(len(buckets)):
        assert set(np.asarray(buckets[t]).tolist()) == banded
        sorted_keys = np.asarray(keys[t])[np.asarray(buckets[t])]
        assert (sorted_keys[1:] >= sorted_keys[:-1]).all()


def test_a_failed_banding_leaves_no_run_and_no_file(index, tmp_path, monkeypatch):
    def fails(task):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(dask_index, "bucket_range", fails)
    with pytest.raises(OSError):
        band_again(index, tmp_path / "idx", InProcessClient())
    left = sorted(p.name for p in (tmp_path / "idx").iterdir())
    assert not (tmp_path / "idx" / PARTS).exists()
    assert not [name for name in left if name.startswith((".bands", ".buckets", "bands", "buckets"))]


def test_a_parts_folder_that_is_a_link_is_not_written_through(index, tmp_path):
    """A crafted index whose dask-parts is a symbolic link: the runs would go wherever it points,
    so the banding is done here instead, with the same files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    where = tmp_path / "idx"
    shutil.copytree(index, where)
    (where / PARTS).symlink_to(outside)
    client = InProcessClient()
    assert band_again(index, where, client, copied=True) == local_files(index)
    assert not any(isinstance(t, dask_index.KeysTask) for t in client.submitted)
    assert list(outside.iterdir()) == []

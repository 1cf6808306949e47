"""The Dask scoring tasks, run in this process: any cut of the bands by key range gives the local answer.

simdoc.stages.dask_pairs cuts each band into key ranges, one task each,
as many as the data volume asks for. Whatever the number of ranges, the
pairs, their scores, the candidate count, the bucket statistics and what
verification learnt (pairs newly verified, for the verified-pairs table) are
those of the local engine. The tasks go through a client that runs them at
once, each task and result pickled as Dask would send them.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import add_exact_copies
from test_pipeline import make_corpus

from simdoc.stages import dask_pairs, dask_pairs_parts
from simdoc.stages.pairs import find_pairs, mark_reported
from simdoc.stages.results import Verifier, score_candidates
from simdoc.store.loaded import open_index
from simdoc.store.names import PARTS


class InProcessClient:
    """What map_ordered needs of a Dask client, running each task at once (pickled there and back)."""

    def __init__(self) -> None:
        self.submitted: list = []

    def scheduler_info(self) -> dict:
        return {"workers": {"w": {"nthreads": 1}}}

    def submit(self, func, task, pure=True):
        self.submitted.append(task)
        result = pickle.loads(pickle.dumps(func(pickle.loads(pickle.dumps(task)))))

        class Done:
            def result(self, timeout=None):  # as a Dask future's
                return result

        return Done()

    def cancel(self, futures) -> None:  # pragma: no cover - the stream runs to its end here
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """An index of a corpus with exact copies (groups of 2 and 3), updated once (for --new)."""
    root = tmp_path_factory.mktemp("partitions")
    docs = make_corpus(root / "c", seed=51, n_base=30)
    add_exact_copies(root / "c", docs)
    idx = root / "idx"
    first = find_pairs(root / "c", idx, threshold=0.5, jobs=1)
    mark_reported(idx, first.generation)
    make_corpus(root / "c" / "later", seed=52, n_base=8)
    find_pairs(root / "c", idx, threshold=0.5, jobs=1)
    return idx


def local_and_cluster(index: Path, ranges: int, threshold: float, measure: str, verify: bool, all_candidates: bool, new: bool):
    loaded = open_index(index)
    docs = loaded.docs()
    only = docs.added > int(loaded.manifest.get("reported_generation", 0)) if new else None
    fresh = lambda: Verifier.of_index(open_index(index)) if verify else None  # noqa: E731
    v_local, v_cluster = fresh(), fresh()
    local = score_candidates(loaded, threshold, measure, verify, all_candidates, only, 1, v_local)
    n_rows = len(loaded.bands()[1][0])
    client = InProcessClient()
    cluster = dask_pairs.score_candidates(
        client, str(index), threshold, measure, verify, all_candidates, only, v_cluster,
        partition_bytes=math.ceil(n_rows * dask_pairs.ROW_BYTES / ranges),
    )
    n_bands = loaded.stage("index")["params"]["bands"]
    assert len(client.submitted) == n_bands * ranges
    return local, cluster, v_local, v_cluster


def assert_same(local, cluster, v_local, v_cluster) -> None:
    for got, want in zip(cluster[:4], local[:4]):
        if want is None:
            assert got is None
        else:
            assert got.dtype.kind == want.dtype.kind and np.array_equal(got, want)
    assert cluster[4] == local[4]  # candidates
    assert cluster[5] == local[5]  # bucket statistics
    if v_local is not None:
        assert (v_cluster.n_verified, v_cluster.n_cached) == (v_local.n_verified, v_local.n_cached)
        assert v_cluster.stale == v_local.stale and v_cluster.gone == v_local.gone
        for got, want in zip(v_cluster.table.merged(), v_local.table.merged()):
            assert np.array_equal(got, want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ranges=st.integers(1, 40),
    threshold=st.sampled_from([0.3, 0.5, 0.8]),
    options=st.sampled_from([
        ("set", True, False, False), ("set", True, True, False), ("set", False, False, False),
        ("bag", True, False, False), ("set", True, False, True), ("set", False, True, True),
    ]),
)
def test_any_number_of_key_ranges_gives_the_local_answer(index, ranges, threshold, options):
    measure, verify, all_candidates, new = options
    if measure == "bag":
        threshold = min(threshold, 0.4)
    local, cluster, v_local, v_cluster = local_and_cluster(index, ranges, threshold, measure, verify, all_candidates, new)
    assert_same(local, cluster, v_local, v_cluster)


@pytest.mark.parametrize("pairs_per_task", [1, 7, 50])
def test_bands_with_more_pairs_are_cut_into_more_tasks_and_the_answer_stays(index, pairs_per_task):
    """Band 0 keeps every pair its buckets give: its tasks are sized by the pairs inside its
    buckets (the index stage records them per band), not only by its rows."""
    loaded = open_index(index)
    stage = loaded.stage("index")
    pairs = stage["bucket_pairs"]
    assert len(pairs) == stage["params"]["bands"] and max(pairs) > 50
    ranges = dask_pairs.scoring_ranges(stage, len(loaded.bands()[1][0]), pairs_per_task=pairs_per_task)
    assert ranges == [max(1, -(-p // pairs_per_task)) for p in pairs]
    v_local, v_cluster = Verifier.of_index(loaded), Verifier.of_index(loaded)
    local = score_candidates(loaded, 0.5, "set", True, False, None, 1, v_local)
    client = InProcessClient()
    cluster = dask_pairs.score_candidates(client, str(index), 0.5, "set", True, False, None, v_cluster, pairs_per_task=pairs_per_task)
    assert len(client.submitted) == sum(ranges)
    assert_same(local, cluster, v_local, v_cluster)


def test_the_case_has_pairs_copies_and_new_documents(index):
    """The property above is not vacuous: pairs, pairs of copies and --new all occur."""
    local, cluster, _, _ = local_and_cluster(index, 3, 0.3, "set", True, True, True)
    assert len(local[0]) > 10
    rep = open_index(index).representatives()
    table = dask_pairs.copies_table(rep)
    assert table is not None and len(np.unique(table[0])) >= 2 and len(table[0]) >= 5
    copies = set(table[1].tolist())
    assert any(a in copies or b in copies for a, b in zip(local[0].tolist(), local[1].tolist()))


def test_key_ranges_cover_every_key_once():
    for n in (1, 2, 3, 7, 1000):
        ranges = dask_pairs.key_ranges(n)
        assert ranges[0][0] == 0 and ranges[-1][1] == 1 << 64
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:]))


def test_ranges_per_band_follow_the_volume():
    per = dask_pairs.PARTITION_BYTES // dask_pairs.ROW_BYTES
    assert dask_pairs.ranges_per_band(0) == 1
    assert dask_pairs.ranges_per_band(per) == 1
    assert dask_pairs.ranges_per_band(per + 1) == 2
    assert dask_pairs.ranges_per_band(10**9) == math.ceil(10**9 / per)


def test_a_task_reads_only_its_key_range(index, monkeypatch):
    """No task reads the whole band: the documents it takes are its range's slice."""
    taken = []
    real = dask_pairs._first_at_least

    def spy(keys, order, key):
        pos = real(keys, order, key)
        taken.append(pos)
        return pos

    monkeypatch.setattr(dask_pairs, "_first_at_least", spy)
    loaded = open_index(index)
    n_rows = len(loaded.bands()[1][0])
    dask_pairs.score_candidates(
        InProcessClient(), str(index), 0.5, "set", False, False, None, None,
        partition_bytes=math.ceil(n_rows * dask_pairs.ROW_BYTES / 4),
    )
    spans = [b - a for a, b in zip(taken[::2], taken[1::2])]
    assert sum(spans) == n_rows * loaded.stage("index")["params"]["bands"]
    assert max(spans) < n_rows  # each band was cut into 4 ranges; none took it all


def test_copies_table_lists_each_group_representative_first():
    rep = np.array([0, 1, 0, 3, 1, 0, 6])
    table = dask_pairs.copies_table(rep)
    assert table.tolist() == [[0, 0, 0, 1, 1], [0, 2, 5, 1, 4]]
    assert dask_pairs.copies_table(np.arange(4)) is None
    indptr, members = dask_pairs._members_of(np.array([0, 3, 6]), table)
    assert indptr.tolist() == [0, 3, 4, 5] and members.tolist() == [0, 2, 5, 3, 6]
    assert dask_pairs._members_of(np.array([3, 6]), table) is None


def test_the_copies_file_is_removed_after_the_run(index):
    loaded = open_index(index)
    dask_pairs.score_candidates(InProcessClient(), str(index), 0.5, "set", False, False, None, None)
    assert not (loaded.store.path / PARTS).exists()


class ClientKilled(Exception):
    """The client died here (its process killed): nothing after this runs."""


class DyingClient(InProcessClient):
    """Runs ``lives`` tasks, then dies as the next one is submitted."""

    def __init__(self, lives: int) -> None:
        super().__init__()
        self.lives = lives

    def submit(self, func, task, pure=True):
        if len(self.submitted) == self.lives:
            raise ClientKilled
        return super().submit(func, task, pure)


def test_a_killed_clients_finished_tasks_are_reused_by_the_next_run(index):
    loaded = open_index(index)
    n_rows = len(loaded.bands()[1][0])
    n_tasks = loaded.stage("index")["params"]["bands"] * 3
    args = (str(index), 0.3, "set", True, True, None)
    size = math.ceil(n_rows * dask_pairs.ROW_BYTES / 3)
    v_local = Verifier.of_index(loaded)
    local = score_candidates(loaded, 0.3, "set", True, True, None, 1, v_local)
    dying = DyingClient(lives=5)
    with pytest.raises(ClientKilled):
        dask_pairs.score_candidates(dying, *args, Verifier.of_index(loaded), partition_bytes=size)
    parts = loaded.store.path / PARTS
    written = sorted(p.name for p in parts.rglob("*.npz"))
    assert len(written) == 5  # the tasks that finished wrote their parts (their completion records)
    again = InProcessClient()
    v_cluster = Verifier.of_index(loaded)
    cluster = dask_pairs.score_candidates(again, *args, v_cluster, partition_bytes=size)
    assert len(again.submitted) == n_tasks - 5  # the finished ones were not run again
    ran = {f"{t.band:03d}-{dask_pairs.key_ranges(3).index((t.lo, t.hi)):06d}.npz" for t in again.submitted}
    assert not ran & set(written)
    assert_same(local, cluster, v_local, v_cluster)
    assert not parts.exists()  # a run that ends removes its parts


def test_parts_of_other_questions_are_not_taken(index):
    """A part is reused only by a run of the same index asking the same (threshold, measure, ...)."""
    loaded = open_index(index)
    with pytest.raises(ClientKilled):
        dask_pairs.score_candidates(DyingClient(lives=13), str(index), 0.3, "set", True, True, None, Verifier.of_index(loaded))
    other = InProcessClient()
    v = Verifier.of_index(loaded)
    cluster = dask_pairs.score_candidates(other, str(index), 0.8, "set", True, False, None, v)
    assert len(other.submitted) == loaded.stage("index")["params"]["bands"]
    v_local = Verifier.of_index(loaded)
    assert_same(score_candidates(loaded, 0.8, "set", True, False, None, 1, v_local), cluster, v_local, v)
    # Parts of this manifest asking another question stay (another run may be asking it now).
    assert len(list((loaded.store.path / PARTS).rglob("*.npz"))) == 13
    shutil.rmtree(loaded.store.path / PARTS)


def test_a_part_round_trips():
    r = dask_pairs_parts.PartitionResult(
        4, (np.array([1, 2]), np.array([3, 4]), np.array([0.5, 0.75]), None), 7, 5, 3, 1, 2, 0, {9}, {8, 10},
        np.arange(8, dtype=np.uint64).reshape(2, 4), np.ones((2, 2)),
    )
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        dask_pairs_parts.write_part(f"{d}/p.npz", r)
        back = dask_pairs_parts.read_part(f"{d}/p.npz")
        assert back.scored[3] is None and back.stale == {9} and back.gone == {8, 10}
        assert (back.band, back.n_candidates, back.n_pairs, back.largest_bucket, back.large_buckets) == (4, 7, 5, 3, 1)
        assert np.array_equal(back.verified_keys, r.verified_keys) and np.array_equal(back.scored[2], r.scored[2])
        (Path(d) / "p.npz").write_bytes(b"half a file")
        assert dask_pairs_parts.read_part(f"{d}/p.npz") is None
        assert dask_pairs_parts.read_part(f"{d}/none.npz") is None
        # A damaged array header inside the zip (its CRC no longer matches): run the task again.
        dask_pairs_parts.write_part(f"{d}/p.npz", r)
        data = (Path(d) / "p.npz").read_bytes()
        at = data.index(b"'descr'")
        (Path(d) / "p.npz").write_bytes(data[:at] + b"'dexcr'" + data[at + 7 :])
        assert dask_pairs_parts.read_part(f"{d}/p.npz") is None


def test_a_scoring_run_removes_only_scoring_parts(index):
    """A run that only reads the index must not remove a writer's reading or banding parts (the
    signature rows of a build in progress are in them), only scoring runs of other manifests."""
    parts = index / PARTS
    kept = [parts / "scan" / ("0" * 32 + ".npz"), parts / "band-0123456789abcdef" / "000000.keys.npy"]
    stale = parts / "fedcba9876543210-0123456789abcdef" / "000-000000.npz"
    for p in (*kept, stale):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"a part")
    dask_pairs.score_candidates(InProcessClient(), str(index), 0.5, "set", False, False, None, None)
    assert all(p.exists() for p in kept) and not stale.parent.exists()
    shutil.rmtree(parts)


_OPENED: list | None = None  # paths opened while a test records them (an audit hook cannot be removed)


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


def test_a_parts_folder_that_is_a_link_is_not_written_through(index, tmp_path):
    """A crafted index whose dask-parts is a symbolic link: the scoring run opens nothing through
    it (no part, no copies table: it is not resumable then), and gives the local answer."""
    global _OPENED
    sys.addaudithook(_audit)
    outside = tmp_path / "outside"
    outside.mkdir()
    (index / PARTS).symlink_to(outside)
    _OPENED = []
    try:
        local, cluster, v_local, v_cluster = local_and_cluster(index, 2, 0.5, "set", True, False, False)
        through = [p for p in _OPENED if os.path.realpath(p).startswith(str(outside))]
    finally:
        _OPENED = None
        (index / PARTS).unlink()
    assert_same(local, cluster, v_local, v_cluster)
    assert through == []

"""The reading stage on a Dask cluster is resumable: a killed client's finished tasks are taken from their parts.

Each reading task run by a DaskEngine writes its result to a part file of the
index (simdoc.stages.scan_results.write_part). The next run of the same stage takes
the parts of the same work (the same files, sizes, times, inodes, parameters
and version) instead of submitting those tasks, and the index it publishes is
byte for byte the one an uninterrupted run publishes. The tasks go through
a client that runs them at once in this process, pickled there and back
(see test_dask_partitions), and dies after a number of them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from test_dask_partitions import ClientKilled, DyingClient, InProcessClient
from test_pipeline import make_corpus

from simdoc.engines import DaskEngine
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.reports.check import check_index
from simdoc.stages import scan, scan_results
from simdoc.stages.resume import SCAN_PARTS
from simdoc.stages.shingle import build_shingles
from simdoc.store import cache
from simdoc.store.names import PARTS

SIGNER = SignatureParams().resolved()
HOUR_NS = 3600 * 10**9


@pytest.fixture
def small_batches(monkeypatch):
    """Five files a task, so that a small corpus makes many tasks."""
    monkeypatch.setattr(scan, "BATCH_DOCS", 5)


def corpus(root: Path, seed: int = 61) -> Path:
    """A corpus whose files were last modified an hour ago (the tests that reuse its parts take
    the `settled` fixture too: a test cannot set a change time back, see conftest)."""
    make_corpus(root, seed=seed, n_base=10)
    old = time.time_ns() - HOUR_NS
    for p in root.rglob("*.txt"):
        os.utime(p, ns=(old, old))
    return root


def build(c: Path, index: Path, engine, **kw):
    return build_shingles(c, index, ShingleParams(**kw), signature=SIGNER, engine=engine)


def n_tasks(c: Path) -> int:
    return -(-len(list(c.rglob("*.txt"))) // scan.BATCH_DOCS)


def reading(client) -> list[scan.ScanTask]:
    """The reading tasks a client ran (the workers' copying of signature rows follows them)."""
    return [t for t in client.submitted if isinstance(t, scan.ScanTask)]


def parts_of(index: Path) -> list[str]:
    return sorted(p.name for p in (index / PARTS / SCAN_PARTS).glob("*.npz"))


def files_of(index: Path) -> dict[str, bytes]:
    """Every file of the index, the manifest without the time of the scan (no two runs share it)."""
    out = {p.name: p.read_bytes() for p in index.iterdir() if p.is_file() and p.name not in ("lock", "readers")}
    manifest = json.loads(out.pop("manifest.json"))
    manifest["stages"]["shingle"].pop("newest_ctime")  # the index's own clock is read there
    manifest.pop("checksum", None)
    out["manifest"] = json.dumps(manifest, sort_keys=True).encode()
    return out


def test_a_killed_clients_finished_reading_tasks_are_reused_and_the_index_is_the_same(tmp_path, small_batches, settled):
    c = corpus(tmp_path / "c")
    total = n_tasks(c)
    assert total >= 4
    build(c, tmp_path / "local", LocalEngine(1))

    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=3), 1))
    assert len(parts_of(index)) == 3  # the tasks that finished wrote their parts
    assert not (index / "manifest.json").exists()  # and nothing was published
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert len(reading(again)) == total - 3  # the finished ones were not run again
    ran = {Path(t.part).name for t in reading(again)}
    assert len(ran) == total - 3
    assert files_of(index) == files_of(tmp_path / "local")
    assert not (index / PARTS).exists()  # used, then removed when the stage was published
    assert check_index(index)[1] == []


def test_a_killed_update_resumes_too(tmp_path, small_batches, settled):
    """Reading the changed files of an existing index: the parts of those tasks are taken again."""
    c = corpus(tmp_path / "c")
    index, local = tmp_path / "idx", tmp_path / "local"
    build(c, index, LocalEngine(1))
    build(c, local, LocalEngine(1))
    make_corpus(c / "more", seed=62, n_base=10)
    old = time.time_ns() - HOUR_NS // 2
    for p in (c / "more").rglob("*.txt"):
        os.utime(p, ns=(old, old))
    total = n_tasks(c / "more")
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    assert len(parts_of(index)) == 2
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert len(reading(again)) == total - 2
    build(c, local, LocalEngine(1))
    assert files_of(index) == files_of(local)


def test_a_part_of_a_changed_file_or_other_parameters_is_not_reused(tmp_path, small_batches, settled):
    c = corpus(tmp_path / "c")
    total = n_tasks(c)
    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=total - 1), 1))
    first = parts_of(index)
    assert len(first) == total - 1

    # Another k, in a copy of the index: no part is of the same work.
    shutil.copytree(index, tmp_path / "copy")
    other_k = InProcessClient()
    build(c, tmp_path / "copy", DaskEngine(other_k, 1), k=7)
    assert len(reading(other_k)) == total

    # One file changed (same size, another mtime): its task runs again, the others do not.
    changed = sorted(c.rglob("*.txt"))[0]
    text = changed.read_text()
    changed.write_text(text[::-1])
    old = time.time_ns() - HOUR_NS // 2
    os.utime(changed, ns=(old, old))
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert str(changed.relative_to(c)) in [f[0] for f in reading(again)[0].files]
    assert len(reading(again)) == 2  # the changed file's task and the one never run
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(index) == files_of(tmp_path / "local")


def test_a_part_of_a_file_modified_as_it_was_read_is_not_reused(tmp_path, small_batches):
    """A file changed within RACY_NS of the newest change time listed (here: every file, just
    written) might change again in the same tick: its task's part holds the signature rows for
    that run only, and a later run reads the file again (simdoc.stages.racy)."""
    c = tmp_path / "c"
    make_corpus(c, seed=63, n_base=10)
    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    parts = parts_of(index)
    assert len(parts) == 2
    assert all(scan_results.read_part(str(index / PARTS / SCAN_PARTS / p), rows=False) is None for p in parts)
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert len(reading(again)) == n_tasks(c)
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(index) == files_of(tmp_path / "local")


def test_a_local_run_writes_no_parts_and_removes_a_killed_runs(tmp_path, small_batches, settled):
    c = corpus(tmp_path / "c")
    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    assert len(parts_of(index)) == 2
    build(c, index, LocalEngine(1))
    assert not (index / PARTS).exists()


def test_a_damaged_part_is_run_again(tmp_path, small_batches, settled):
    c = corpus(tmp_path / "c")
    total = n_tasks(c)
    index = tmp_path / "idx"
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    damaged = index / PARTS / SCAN_PARTS / parts_of(index)[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    again = InProcessClient()
    build(c, index, DaskEngine(again, 1))
    assert len(reading(again)) == total - 1
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(index) == files_of(tmp_path / "local")


def test_a_part_round_trips_and_a_renamed_one_is_refused(tmp_path):
    c = corpus(tmp_path / "c")
    (c / "weird\udcff.txt").write_bytes(b"a name that is not UTF-8 " * 20)
    entries = sorted(c.rglob("*.txt"))[:4]
    files = [(str(p.relative_to(c)), str(p), p.stat().st_size, None) for p in entries] + [
        ("weird\udcff.txt", str(c / "weird\udcff.txt"), 500, None)
    ]
    for keep_sets in (False, True):
        task = scan.ScanTask(files, ShingleParams().resolved(), SIGNER, keep_sets)
        r = scan.scan_batch(task)
        path = tmp_path / f"{scan.part_key(task, [0] * len(files))}.npz"
        scan_results.write_part(str(path), r)
        back = scan_results.read_part(str(path))
        assert back.files == r.files and back.docs == r.docs and (back.signatures == r.signatures).all()
        if keep_sets:
            assert (back.sets.indptr == r.sets.indptr).all() and (back.sets.data == r.sets.data).all()
        else:
            assert back.sets is None
        path.rename(tmp_path / ("0" * 32 + ".npz"))
        assert scan_results.read_part(str(tmp_path / ("0" * 32 + ".npz"))) is None
        # A damaged array header inside the zip (its CRC no longer matches): the task runs again.
        scan_results.write_part(str(path), r)
        data = path.read_bytes()
        at = data.index(b"'descr'")
        path.write_bytes(data[:at] + b"'dexcr'" + data[at + 7 :])
        assert scan_results.read_part(str(path)) is None


def test_check_accepts_and_cache_clean_removes_the_parts(tmp_path, small_batches, monkeypatch, settled):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    c = corpus(tmp_path / "c")
    index = cache.cached_index_path(c)
    build(c, index, LocalEngine(1))
    make_corpus(c / "more", seed=64, n_base=10)
    old = time.time_ns() - HOUR_NS
    for p in (c / "more").rglob("*.txt"):
        os.utime(p, ns=(old, old))
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    assert len(parts_of(index)) == 2
    assert check_index(index)[1] == []  # the index is its last published build; the parts are no problem
    foreign = index / PARTS / "notes.txt"
    foreign.write_text("not simdoc's")
    assert cache.remove_index(index) == [PARTS]  # what simdoc did not write stays, with its folders
    assert [p.name for p in (index / PARTS).iterdir()] == ["notes.txt"]
    foreign.unlink()
    for name in (f"{SCAN_PARTS}/{'a' * 32}.npz", f"{'1' * 16}-{'2' * 16}/000-000003.npz", f"copies.{'3' * 16}.npy"):
        (index / PARTS / name).parent.mkdir(parents=True, exist_ok=True)
        (index / PARTS / name).write_bytes(b"a part")
    build(c, index, LocalEngine(1))
    assert cache.remove_index(index) == []
    assert not index.exists()


def test_cache_clean_never_follows_a_link_in_the_parts(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    c = corpus(tmp_path / "c")
    index = cache.cached_index_path(c)
    build(c, index, LocalEngine(1))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ("b" * 32 + ".npz")).write_bytes(b"someone else's")
    (index / PARTS).mkdir()
    (index / PARTS / SCAN_PARTS).symlink_to(outside)
    assert cache.remove_index(index) == [PARTS]
    assert (outside / ("b" * 32 + ".npz")).exists()


def test_a_link_in_place_of_the_parts_folder_is_not_written_through(tmp_path, small_batches, settled):
    c = corpus(tmp_path / "c")
    index = tmp_path / "idx"
    build(c, index, LocalEngine(1))
    make_corpus(c / "more", seed=65, n_base=10)
    old = time.time_ns() - HOUR_NS
    for p in (c / "more").rglob("*.txt"):
        os.utime(p, ns=(old, old))
    outside = tmp_path / "outside"
    outside.mkdir()
    theirs = outside / ("c" * 32 + ".npz")  # named as a part, but not one: it stays
    theirs.write_bytes(b"someone else's")
    (index / PARTS).mkdir()
    (index / PARTS / SCAN_PARTS).symlink_to(outside)
    with pytest.raises(ClientKilled):
        build(c, index, DaskEngine(DyingClient(lives=2), 1))
    assert list(outside.iterdir()) == [theirs]
    build(c, index, DaskEngine(InProcessClient(), 1))  # published: the parts are removed, never through the link
    assert list(outside.iterdir()) == [theirs] and (index / PARTS / SCAN_PARTS).is_symlink()


def test_the_parts_of_a_run_killed_under_older_reading_rules_are_not_taken(tmp_path, small_batches, settled, monkeypatch):
    """A part read under reading rules 1 (simdoc.corpus.reading_rules) holds the texts those rules gave:
    ``B.JSONL`` as one plain document. The simdoc of rules 2, resuming that run, must read it again."""
    import simdoc.corpus.read as read
    import simdoc.corpus.reading_rules as reading_rules
    import simdoc.stages.shingle as shingle_stage

    c = corpus(tmp_path / "c")
    line = json.dumps({"text": "the quick brown fox jumps over the lazy dog while the farmer sleeps"}) + "\n"
    (c / "B.JSONL").write_text(line + line)
    old = time.time_ns() - HOUR_NS
    os.utime(c / "B.JSONL", ns=(old, old))
    index = tmp_path / "idx"
    right = read._way_by_name
    with monkeypatch.context() as m:  # the simdoc of rules 1: a suffix in capitals named no format
        m.setattr(read, "_way_by_name", lambda end: "whole" if end != end.lower() else right(end))
        m.setattr(shingle_stage, "READING_RULES", 1)
        m.setattr(reading_rules, "READING_RULES", 1)
        with pytest.raises(ClientKilled):
            build(c, index, DaskEngine(DyingClient(lives=2), 1))
    assert len(parts_of(index)) == 2  # B.JSONL's task (the first: "B" sorts first) among them
    build(c, index, DaskEngine(InProcessClient(), 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(index) == files_of(tmp_path / "local")

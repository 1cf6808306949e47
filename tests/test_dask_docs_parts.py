"""On a Dask cluster no docs-table row comes back to the client: a reading task sends where its part is (issue 29).

A reading task writes its outcomes, docs-table columns and signature rows
to its part (simdoc.stages.scan_results.write_part) and sends back a
PartWritten: the part, the writing's token and two counts, a few hundred
bytes however many documents the task read. The client reads the columns
from the part when the task's turn comes, and publishes the local engine's
index. The tasks go through a client that runs them at once in this
process, each task and result pickled as Dask would send them (see
test_dask_partitions).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from test_dask_partitions import InProcessClient
from test_dask_resume import files_of
from test_dask_signatures import SIGNER, RecordingClient, age, build
from test_pipeline import make_corpus

from simdoc.engines import DaskEngine
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams
from simdoc.stages import scan, scan_results
from simdoc.stages.scan_results import BatchResult, PartWritten


def corpus(c: Path, seed: int, n_records: int = 120) -> Path:
    """Text files, and a JSON Lines file of ``n_records`` records (one task: all its documents)."""
    make_corpus(c, seed=seed, n_base=10)
    lines = [json.dumps({"text": f"record {i} says " + " ".join(f"w{(i * 7 + k) % 53}" for k in range(40))}) for i in range(n_records)]
    (c / "records.jsonl").write_text("\n".join(lines) + "\n")
    return c


def reading_results(client: RecordingClient) -> list:
    return [r for r in client.results if isinstance(r, (BatchResult, PartWritten))]


@pytest.mark.parametrize("settled_files", [True, False], ids=["reusable parts", "racily clean files: parts of this run only"])
@pytest.mark.parametrize("batch_docs", [2, 40])
def test_a_reading_task_sends_back_a_few_bytes_however_many_documents_it_read(tmp_path, monkeypatch, batch_docs, settled_files):
    monkeypatch.setattr(scan, "BATCH_DOCS", batch_docs)
    c = corpus(tmp_path / "c", seed=81)
    if settled_files:
        age(c)
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    reads = reading_results(client)
    assert reads and all(isinstance(r, PartWritten) for r in reads), {type(r).__name__ for r in reads}
    assert max(r.n_docs for r in reads) >= min(batch_docs, 120)  # the JSON Lines file's task: 120 documents
    sizes = [len(pickle.dumps(r, protocol=5)) for r in reads]
    # The part's path, a token and two integers: the same size for 1 document or 120.
    assert max(sizes) < 200 + len(str(tmp_path)), sizes
    assert max(sizes) - min(sizes) <= 8, sizes


def test_an_update_reads_its_new_rows_from_the_parts_and_is_the_local_engines(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BATCH_DOCS", 5)
    c = corpus(tmp_path / "c", seed=82)
    age(c)
    build(c, tmp_path / "dask", DaskEngine(InProcessClient(), 1))
    build(c, tmp_path / "local", LocalEngine(1))
    (c / "base/doc02.txt").write_text("something else entirely, " * 30, encoding="utf-8")
    (c / "base/doc04.txt").unlink()
    with open(c / "records.jsonl", "a") as f:
        f.write(json.dumps({"text": "one more record at the end of the file " * 5}) + "\n")
    corpus(c / "later", seed=83, n_records=7)
    age(c, 3600 * 10**9 // 2)
    client = RecordingClient()
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    assert reading_results(client) and all(isinstance(r, PartWritten) for r in reading_results(client))


class OverwritingClient(RecordingClient):
    """After every reading task, another attempt of it (a worker taken for dead, then not) writes
    its part again: with another task's documents, under another token."""

    def __init__(self, other: BatchResult) -> None:
        super().__init__()
        self.other = other
        self.rerun: list = []

    def submit(self, func, task, pure=True):
        done = super().submit(func, task, pure)
        got = done.result()
        if isinstance(got, PartWritten):
            scan_results.write_part(got.part, self.other, reusable=True, token="0" * 32)
        elif isinstance(task, scan.ScanTask):
            self.rerun.append(task)
        return done


def test_a_part_written_again_by_another_attempt_is_not_taken_for_the_tasks_own(tmp_path, monkeypatch):
    """The client reads back only the writing its task sent back: else the task runs again, its rows sent back."""
    monkeypatch.setattr(scan, "BATCH_DOCS", 5)
    c = corpus(tmp_path / "c", seed=84, n_records=12)
    age(c)
    other = scan.scan_batch(scan.ScanTask([("x.txt", str(c / "base/doc01.txt"), 100, None)], ShingleParams().resolved(), SIGNER))
    client = OverwritingClient(other)
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    assert client.rerun and all(t.part is None for t in client.rerun)
    assert all(r.signatures is not None for r in client.results if isinstance(r, BatchResult))


def test_a_part_gone_before_the_client_reads_it_is_run_again(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BATCH_DOCS", 5)
    c = corpus(tmp_path / "c", seed=85, n_records=12)
    age(c)
    client = RecordingClient()
    real = client.submit

    def submit(func, task, pure=True):
        done = real(func, task, pure)
        if isinstance(done.result(), PartWritten) and len(client.results) % 3 == 1:
            os.unlink(done.result().part)
        return done

    client.submit = submit
    build(c, tmp_path / "dask", DaskEngine(client, 1))
    build(c, tmp_path / "local", LocalEngine(1))
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
    assert any(isinstance(r, BatchResult) for r in client.results)


# A client of the cluster at argv[1] submits 30 tasks of 100 KB each, as reading tasks of
# ~1,000 files are, and says how many bytes of them its comm to the scheduler still holds.
HELD = """
import pickle, sys
from simdoc.engines.dask import connect

with connect(sys.argv[1], 30) as c:
    for i in range(30):
        c.submit(len, b"%d" % i * 50_000, pure=False).result()
    log = c.scheduler_comm.recent_message_log
    print(len(pickle.dumps(list(log))))
"""


def test_the_client_does_not_keep_the_tasks_it_submitted(tmp_path, cluster):
    """Dask's comms log the last 1,000 messages they sent: a client would hold every reading task."""
    pytest.importorskip("distributed")
    from test_dask_contract import _env

    cluster.start_worker()
    cluster.wait_for_workers(1)
    r = subprocess.run([sys.executable, "-c", HELD, cluster.address], capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert int(r.stdout) < 20 * 100_000, r.stdout  # a few tasks at most, not 30

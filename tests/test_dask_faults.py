"""A worker or the client killed mid-run, on a cluster of separate processes (issue 20).

The cluster is a `dask scheduler` and `dask worker` processes (see
test_dask_contract.Cluster). The kill is made deterministic without sleeps:
the first worker is started alone, with a preload that makes one stage's task
leave a marker file and then hang until it is killed. The test waits for the
marker, so the kill always lands inside that task, whatever the machine's
speed:

* a worker killed mid-task (while reading the corpus, copying signature
  rows into the index, computing band keys, merging buckets, and scoring
  the candidates): a second worker joins, the first is killed with SIGKILL,
  the scheduler runs its tasks again, and the output is byte for byte the
  local engine's;
* every worker killed mid-task (reading, scoring; finding the components of
  ``clusters``), and none joining within ``--wait-workers``: the run stops
  with exit 7 and a line naming the scheduler, never waits forever (a run
  from cron);
* the client (the ``simdoc pairs --scheduler`` process) killed mid-task, in
  each of those stages: the index is as its last completed stage left it
  (``simdoc check`` passes), and the next run, on a healthy worker, prints
  the local engine's answer, taking the parts of the tasks that had
  finished (reading or scoring) instead of running them again.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from test_dask_contract import START_TIMEOUT, Cluster, _env, simdoc  # noqa: E402
from test_pipeline import make_corpus  # noqa: E402

# Where each stage's tasks run on a worker: (module, function the task names). Between reading
# and scoring, the workers copy the signature rows into the index and band them.
STAGES = {
    "scan": ("simdoc.stages.scan", "scan_batch"),
    "copy": ("simdoc.stages.dask_signatures", "place_rows"),
    "keys": ("simdoc.stages.dask_index", "band_rows"),
    "buckets": ("simdoc.stages.dask_index", "bucket_range"),
    "score": ("simdoc.stages.dask_pairs", "score_partition"),
}
# clusters and dedup also find the connected components on the cluster.
COMPONENTS = ("simdoc.stages.dask_components", "large_star")

HANG = '''
import importlib
import os
import time

_module = importlib.import_module({module!r})


# Dask may run a preload twice in one namespace: keep the real function from the first time.
_real = getattr(_module, "_test_real", None) or getattr(_module, {function!r})
_module._test_real = _real


def _hang(*args, **kwargs):
    """Say that the task has started (a marker file), then hang until this worker is killed."""
    if not ({condition}):
        return _real(*args, **kwargs)
    open(os.environ["SIMDOC_TEST_MARKER"], "a").close()
    while True:
        time.sleep(60)


setattr(_module, {function!r}, _hang)  # tasks name the function by module and name; they get this one
'''


# A worker that records the part file of every scoring and reading task it runs.
RECORD = '''
import os

import simdoc.stages.dask_pairs as cp
import simdoc.stages.scan as sc

_real = getattr(cp, "_test_real", None) or cp.score_partition  # as in HANG
cp._test_real = _real
_real_scan = getattr(sc, "_test_real_scan", None) or sc.scan_batch
sc._test_real_scan = _real_scan


def score_partition(task):
    with open(os.environ["SIMDOC_TEST_RAN"], "a") as f:
        f.write(os.path.basename(task.part or "?") + "\\n")
    return _real(task)


def scan_batch(task):
    with open(os.environ["SIMDOC_TEST_RAN"] + ".scan", "a") as f:
        f.write(os.path.basename(task.part or "?") + "\\n")
    return _real_scan(task)


cp.score_partition = score_partition
sc.scan_batch = scan_batch
'''

# The client, reading BATCH files a task, so that a small corpus makes several reading tasks.
BATCH = 3
# Small batches; and the files written by a test count as settled (conftest's `settled`: a test
# cannot set a change time back), so that only new and changed files are read.
SMALL_BATCHES = (
    f"import simdoc.stages.scan as s, simdoc.stages.racy as r; s.BATCH_DOCS = {BATCH}; r.RACY_NS = 0; "
    "from simdoc.cli import main; main()"
)
# The third task a worker runs hangs: the two before it have finished, and written their parts.
THIRD = "(globals().setdefault('_seen', []).append(1), len(globals()['_seen']) >= 3)[1]"


def _an_hour_ago(folder: Path, *files: Path) -> None:
    """Date the files of ``folder``, and ``files``, an hour back."""
    old = time.time_ns() - 3600 * 10**9
    for p in [*folder.rglob("*.txt"), *files]:
        os.utime(p, ns=(old, old))


def hanging_worker(cluster: Cluster, tmp_path: Path, stage: str, condition: str = "True") -> tuple[subprocess.Popen, Path]:
    """A worker on which the first task of ``stage`` (that meets ``condition``) hangs; and the marker it leaves."""
    module, function = COMPONENTS if stage == "components" else STAGES[stage]
    preload = tmp_path / f"hang_{stage}.py"
    preload.write_text(HANG.format(module=module, function=function, condition=condition))
    marker = tmp_path / f"in_{stage}"
    worker = cluster.start_worker("--preload", str(preload), env={"SIMDOC_TEST_MARKER": str(marker)})
    cluster.wait_for_workers(1)
    return worker, marker


def wait_for(marker: Path, run: subprocess.Popen, cluster: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT * 3
    while not marker.exists():
        if run.poll() is not None:
            out, err = run.communicate()
            pytest.fail(f"the run ended (exit {run.returncode}) before the hanging task started:\n{err}\n{cluster.logs()}")
        assert time.monotonic() < deadline, "the hanging task never started\n" + cluster.logs()
        time.sleep(0.05)


def start_pairs(*args: object, cwd: Path, small_batches: bool = False, command: str = "pairs") -> subprocess.Popen:
    how = ["-c", SMALL_BATCHES] if small_batches else ["-m", "simdoc"]
    return subprocess.Popen(
        [sys.executable, *how, command, *map(str, args)],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )


def finish(run: subprocess.Popen, timeout: float = 240) -> subprocess.CompletedProcess:
    try:
        out, err = run.communicate(timeout=timeout)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def local_answer(corpus: Path, tmp_path: Path, *args: str) -> str:
    r = simdoc("pairs", corpus, "--index", tmp_path / "local.idx", *args, "-j", "1", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout, r.stderr
    return r.stdout


ARGS = ("-t", "0.6", "--all-candidates")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_worker_killed_mid_task_gives_the_local_answer(tmp_path, cluster, stage):
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=41, n_base=12)
    want = local_answer(corpus, tmp_path, *ARGS)
    doomed, marker = hanging_worker(cluster, tmp_path, stage)
    index = tmp_path / "idx"
    run = start_pairs(corpus, "--index", index, *ARGS, "--scheduler", cluster.address, cwd=tmp_path)
    try:
        wait_for(marker, run, cluster)
        cluster.start_worker()  # the one that will finish the job
        cluster.wait_for_workers(2)
        cluster.kill(doomed)  # mid-task: its task is running and has not returned
    finally:
        r = finish(run)
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert "Traceback" not in r.stderr
    assert r.stdout == want
    # The index the cluster built is sound, and gives the same answer again, here.
    assert simdoc("check", "--index", index, cwd=tmp_path).returncode == 0
    again = simdoc("pairs", corpus, "--index", index, *ARGS, "-j", "1", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == want, again.stderr


def test_a_worker_killed_while_clusters_finds_the_components_gives_the_local_answer(tmp_path, cluster):
    # The edges are sent by the client (scattered), which Dask cannot compute again once the
    # worker that held them dies: the client sends them again to the workers left.
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=45, n_base=12)
    want = simdoc("clusters", corpus, "--index", tmp_path / "local.idx", "-t", "0.6", "-j", "1", cwd=tmp_path)
    assert want.returncode == 0 and want.stdout, want.stderr
    doomed, marker = hanging_worker(cluster, tmp_path, "components")
    run = start_pairs(corpus, "--index", tmp_path / "idx", "-t", "0.6", "--scheduler", cluster.address,
                      cwd=tmp_path, command="clusters")
    try:
        wait_for(marker, run, cluster)
        cluster.start_worker()
        cluster.wait_for_workers(2)
        cluster.kill(doomed)
    finally:
        r = finish(run)
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert "Traceback" not in r.stderr
    assert r.stdout == want.stdout


@pytest.mark.parametrize("stage", ["scan", "score", "components"])
def test_every_worker_killed_mid_task_is_a_cluster_error_not_a_hang(tmp_path, cluster, stage):
    # The only worker dies inside a task and none joins: Dask would keep the task waiting for
    # a worker forever. The client gives up once the scheduler has had no worker for
    # --wait-workers seconds, with exit 7 and the scheduler's address.
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=44, n_base=12)
    doomed, marker = hanging_worker(cluster, tmp_path, stage)
    index = tmp_path / "idx"
    command = "clusters" if stage == "components" else "pairs"
    run = start_pairs(corpus, "--index", index, *ARGS[:2], "--scheduler", cluster.address, "--wait-workers", "2",
                      cwd=tmp_path, command=command)
    try:
        wait_for(marker, run, cluster)
        cluster.kill(doomed)
    finally:
        r = finish(run)
    assert r.returncode == 7, r.stderr + cluster.logs()
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    error = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and cluster.address in error[0] and "worker" in error[0], r.stderr
    assert f"dask worker {cluster.address}" in r.stderr  # what to do: start workers
    assert "every Dask worker left" in error[0] and "--wait-workers" in r.stderr  # or wait longer
    # The stages that finished are kept, and sound (a first build stopped while reading has none).
    if stage != "scan":
        check = simdoc("check", "--index", index, cwd=tmp_path)
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_client_killed_mid_run_leaves_the_index_sound_and_the_next_run_right(tmp_path, cluster, stage):
    corpus = tmp_path / "c"
    docs = make_corpus(corpus, seed=42, n_base=12)
    index = tmp_path / "idx"
    # An index of yesterday's corpus; today's has more documents, and one changed. Every file
    # was last modified an hour ago: none is racily clean, and the reading tasks' parts are trusted.
    _an_hour_ago(corpus)
    first = simdoc("pairs", corpus, "--index", index, *ARGS, "-j", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    make_corpus(corpus / "more", seed=43, n_base=6)
    changed = corpus / sorted(d for d in docs if d.startswith("edit"))[0]
    changed.write_text(docs["base/doc01.txt"] + " and one more sentence at the end", encoding="utf-8")
    _an_hour_ago(corpus / "more", changed)
    n_scan = math.ceil((len(list((corpus / "more").rglob("*.txt"))) + 1) / BATCH)  # the new files and the changed one
    assert n_scan >= 3
    want = local_answer(corpus, tmp_path, *ARGS)
    before = (index / "manifest.json").read_bytes()

    # Scoring hangs in the second band's task: the first band's may have finished (and written its part).
    # Reading hangs in the third task: the first two have finished. The others hang in their first task.
    condition = {"score": "args[0].band == 1", "scan": THIRD}.get(stage, "True")
    doomed, marker = hanging_worker(cluster, tmp_path, stage, condition)
    run = start_pairs(corpus, "--index", index, *ARGS, "--scheduler", cluster.address, cwd=tmp_path, small_batches=True)
    try:
        wait_for(marker, run, cluster)
        run.send_signal(signal.SIGKILL)
    finally:
        r = finish(run)
    assert r.returncode == -signal.SIGKILL
    cluster.kill(doomed)

    # The index is sound: the last completed stages (yesterday's while reading; today's new
    # stages, published by one manifest, while scoring).
    check = simdoc("check", "--index", index, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    if stage != "score":  # the new build is published with its buckets, before scoring
        assert (index / "manifest.json").read_bytes() == before
    leftovers = [p.name for p in index.iterdir() if p.name.endswith(".tmp")]
    # A run killed while writing may leave its temporary files; the next writer removes them.
    finished = {p.name for p in index.glob("dask-parts/*-*/*.npz")}
    read = {p.name for p in index.glob("dask-parts/scan/*.npz")}
    if stage == "score":
        assert not read  # the reading stage was published, and its parts removed
    else:
        assert not finished
        assert len(read) == (2 if stage == "scan" else n_scan), read
    record = tmp_path / "record.py"
    record.write_text(RECORD)
    ran = tmp_path / "ran"
    cluster.start_worker("--preload", str(record), env={"SIMDOC_TEST_RAN": str(ran)})
    again = subprocess.run(
        [sys.executable, "-c", SMALL_BATCHES, "pairs", corpus, "--index", index, *ARGS, "--scheduler", cluster.address],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env=_env(),
    )
    assert again.returncode == 0, again.stderr + cluster.logs()
    assert again.stdout == want
    # The reading tasks that had finished were not run again; the others were, once each.
    scanned = (tmp_path / "ran.scan").read_text().split() if (tmp_path / "ran.scan").exists() else []
    assert len(scanned) == len(set(scanned)) and not set(scanned) & read, (scanned, read)
    assert len(scanned) + len(read) == (0 if stage == "score" else n_scan), (scanned, read)
    # The scoring tasks that had finished were not run again; the others were, once each.
    bands = json.loads((index / "manifest.json").read_text())["stages"]["index"]["params"]["bands"]
    names = ran.read_text().split()
    assert len(names) == len(set(names)) and not set(names) & finished, (names, finished)
    assert len(names) + len(finished) == bands, (names, finished)
    assert not (index / "dask-parts").exists()
    assert not [p.name for p in index.iterdir() if p.name.endswith(".tmp") and p.name in leftovers]
    assert simdoc("check", "--index", index, cwd=tmp_path).returncode == 0

"""The Dask engine's contract, on clusters of separate processes started as a user would.

Each test starts `dask scheduler` and `dask worker` with subprocess, in a
working directory of their own (not the client's), and runs `simdoc` as a
command (issue 20, cases 1-4):

1. a relative --index and corpus are resolved before any task is made: a
   worker whose folder holds a decoy of the same names gives the local answer;
2. a worker that cannot see the corpus stops the run before any work (exit 7);
3. no worker, or a worker that cannot import simdoc: exit 7 after
   --wait-workers, never a hang;
4. the scheduler killed mid-run: exit 7 and one error line, no traceback;
5. a worker that does not answer the check (stopped): exit 7 naming it, never a hang.

Workers that join after the check: test_dask_late_workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from test_pipeline import make_corpus  # noqa: E402

from simdoc.errors import EXIT_CLUSTER  # noqa: E402

START_TIMEOUT = 60  # seconds for a scheduler or worker process to come up on a busy machine


def _env(extra: dict | None = None) -> dict:
    """The environment of every process here. The numpy kernels: numba would compile them
    again in each process (the numba cache is per test), which is not what is tested."""
    env = {k: v for k, v in os.environ.items() if k not in ("SIMDOC_INDEX", "SIMDOC_SCHEDULER")}
    return {**env, "SIMDOC_NO_NUMBA": "1", **(extra or {})}


# Worker preloads (dask worker --preload FILE), run in the worker before it joins.
HIDE_SIMDOC = '''
import sys


class _NoSimdoc:
    """This worker's Python has no simdoc."""

    def find_spec(self, name, path=None, target=None):
        if name == "simdoc" or name.startswith("simdoc."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoSimdoc())
'''

SLOW_READS = '''
import os
import time

import simdoc.stages.scan

_scan_batch = simdoc.stages.scan.scan_batch


def scan_batch(task):
    """Say that work has started (a marker file), then take a while over each batch."""
    open(os.environ["SIMDOC_TEST_MARKER"], "a").close()
    time.sleep(5)  # the test kills the scheduler as soon as the marker is there
    return _scan_batch(task)


simdoc.stages.scan.scan_batch = scan_batch  # tasks name the function; they get this one
'''


WAIT_FOR_WORKERS = """
import sys

from distributed import Client

with Client(sys.argv[1], timeout="10s") as client:
    client.wait_for_workers(int(sys.argv[2]), timeout=float(sys.argv[3]))
"""

WORKERS = """
import json
import sys

from distributed import Client

with Client(sys.argv[1], timeout="10s") as client:
    print(json.dumps(sorted(client.scheduler_info()["workers"])))
"""


class Cluster:
    """A `dask scheduler` and `dask worker` processes, started in ``home`` (not the client's folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "cluster-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.file = root / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self.scheduler: subprocess.Popen | None = None
        self.address = ""

    def _start(self, argv: list[str], env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
        log = open(self.root / f"proc{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            argv, cwd=cwd or self.home, stdout=log, stderr=subprocess.STDOUT, env=_env(env),
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start_scheduler(self) -> str:
        self.scheduler = self._start([
            sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
            "--no-dashboard", "--scheduler-file", str(self.file),
        ])
        deadline = time.monotonic() + START_TIMEOUT
        while not self.file.exists() or not self.file.read_text().strip():
            assert self.scheduler.poll() is None, self.logs()
            assert time.monotonic() < deadline, "the scheduler did not start\n" + self.logs()
            time.sleep(0.1)
        time.sleep(0.05)  # the file is written in one go; be safe about a partial read
        self.address = json.loads(self.file.read_text())["address"]
        return self.address

    def start_worker(self, *extra: str, prefix: tuple[str, ...] = (), env: dict | None = None, cwd: Path | None = None):
        return self._start([
            *prefix, sys.executable, "-m", "dask", "worker", self.address, "--nthreads", "1", "--no-nanny",
            "--no-dashboard", "--local-directory", str(self.root / "scratch"), *extra,
        ], env=env, cwd=cwd)

    def wait_for_workers(self, n: int) -> None:
        # In a process of its own: a distributed Client in the pytest process can fail to start
        # (see tests/conftest.py, _no_dask_io_loop_in_the_test_process).
        r = subprocess.run(
            [sys.executable, "-c", WAIT_FOR_WORKERS, self.address, str(n), str(START_TIMEOUT)],
            capture_output=True, text=True, env=_env(), timeout=START_TIMEOUT * 2,
        )
        assert r.returncode == 0, f"{n} workers did not join\n{r.stderr}\n{self.logs()}"

    def workers(self) -> list[str]:
        """The addresses of the workers the scheduler lists, sorted (asked in a process of its own, as above)."""
        r = subprocess.run(
            [sys.executable, "-c", WORKERS, self.address], capture_output=True, text=True, env=_env(), timeout=START_TIMEOUT,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def kill(self, proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.root.glob("proc*.log")))

    def stop(self) -> None:
        """Kill them all: nothing of theirs is kept, and a graceful close takes seconds."""
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def simdoc(*args: object, cwd: Path, timeout: float = 120, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """`simdoc ARGS` as a command, in ``cwd``; ``env``: variables on top of :func:`_env`."""
    return subprocess.run(
        [sys.executable, "-m", "simdoc", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env=_env(env), **kw,
    )


def error_lines(stderr: str) -> list[str]:
    """What follows the progress output: the `Error:` line and its hint."""
    lines = stderr.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("Error: ")]
    assert len(at) == 1, stderr
    return lines[at[0]:]


def assert_cluster_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == EXIT_CLUSTER, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    error = error_lines(r.stderr)
    assert len(error) == 2 and error[1].startswith("  hint: "), r.stderr
    for w in words:
        assert w in error[0], (w, error[0])
    assert r.stdout == ""
    return error[0]


def test_relative_index_and_corpus_are_resolved_before_any_task(tmp_path, cluster):
    """Case 1: the worker's folder holds a decoy index and corpus of the same names."""
    here = tmp_path / "client"
    make_corpus(here / "c", seed=31, n_base=10)
    make_corpus(cluster.home / "c", seed=32, n_base=6)  # the decoys, where the worker runs
    for decoy in (("pairs", "c", "--index", "idx", "-t", "0.6"), ("shingle", "c", "--index", "staged")):
        r = simdoc(*decoy, "-j", "1", cwd=cluster.home)
        assert r.returncode == 0, r.stderr
    local = simdoc("pairs", "c", "--index", "local.idx", "-t", "0.6", "--all-candidates", "-j", "1", cwd=here)
    assert local.returncode == 0 and local.stdout, local.stderr
    cluster.start_worker()
    r = simdoc("pairs", "c", "--index", "idx", "-t", "0.6", "--all-candidates", "--scheduler", cluster.address, cwd=here)
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert r.stdout == local.stdout
    assert "vanished" not in r.stderr
    # And again from the index alone, on the cluster: the worker reads the client's index.
    again = simdoc("pairs", "--index", "idx", "-t", "0.6", "--all-candidates", "--scheduler", cluster.address, cwd=here)
    assert again.returncode == 0 and again.stdout == local.stdout, again.stderr
    # The stage commands: the signature tasks read the client's shingle sets, not the decoy's.
    assert simdoc("shingle", "c", "--index", "staged", "-j", "1", cwd=here).returncode == 0
    r = simdoc("signature", "--index", "staged", "--scheduler", cluster.address, cwd=here)
    assert r.returncode == 0, r.stderr
    staged = simdoc("pairs", "--index", "staged", "-t", "0.6", "--all-candidates", "-j", "1", cwd=here)
    assert staged.returncode == 0 and staged.stdout == local.stdout, staged.stderr


def _can_hide_folders() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /tmp"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_hide_folders(), reason="needs unshare -rm (user and mount namespaces) to hide a folder")
def test_a_worker_that_cannot_see_the_corpus_stops_the_run_before_any_work(tmp_path, cluster):
    """Case 2: the worker runs in a mount namespace with an empty folder mounted over the corpus."""
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=33, n_base=4)
    worker = cluster.start_worker(prefix=hidden(corpus))
    cluster.wait_for_workers(1)
    index = tmp_path / "idx"
    r = simdoc("pairs", corpus, "--index", index, "--scheduler", cluster.address, cwd=tmp_path)
    assert_cluster_error(r, "Dask worker tcp://127.0.0.1:", "cannot see the corpus at", str(corpus))
    assert "vanished" not in r.stderr
    assert not (index / "manifest.json").exists()  # no work was done
    # A worker that sees the corpus but not the index (an empty folder of the same name).
    assert simdoc("pairs", corpus, "--index", index, "-j", "1", cwd=tmp_path).returncode == 0
    cluster.kill(worker)  # the scheduler may still list it: the check asks again
    cluster.start_worker(prefix=hidden(index))
    r = simdoc("pairs", corpus, "--index", index, "--scheduler", cluster.address, cwd=tmp_path)
    assert_cluster_error(r, "cannot see the index at", str(index / "manifest.json"))


def hidden(folder: Path) -> tuple[str, ...]:
    """A command prefix: run in a mount namespace where ``folder`` is an empty tmpfs."""
    return ("unshare", "-rm", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"', str(folder))


def test_no_worker_or_a_worker_without_simdoc_is_reported_not_waited_for(tmp_path, cluster):
    """Case 3: a scheduler with no worker, then with one whose Python has no simdoc."""
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=34, n_base=4)
    index = tmp_path / "idx"
    t0 = time.monotonic()
    r = simdoc("pairs", corpus, "--index", index, "--scheduler", cluster.address, "--wait-workers", "1", cwd=tmp_path)
    assert_cluster_error(r, "no Dask worker joined the scheduler at", cluster.address, "within 1 s")
    assert "--wait-workers" in r.stderr
    assert time.monotonic() - t0 < 30
    preload = tmp_path / "no_simdoc.py"
    preload.write_text(HIDE_SIMDOC)
    cluster.start_worker("--preload", str(preload))
    # It joins while the client waits for a first worker (the default wait), and is reported.
    r = simdoc("pairs", corpus, "--index", index, "--scheduler", cluster.address, cwd=tmp_path)
    line = assert_cluster_error(r, "Dask worker tcp://127.0.0.1:", "cannot import simdoc", "ModuleNotFoundError")
    assert sys.executable in line
    assert not (index / "manifest.json").exists()


def test_the_scheduler_killed_mid_run_is_a_cluster_error(tmp_path, cluster):
    """Case 4: kill -9 of the scheduler while the worker reads the corpus."""
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=35, n_base=4)
    preload = tmp_path / "slow_reads.py"
    preload.write_text(SLOW_READS)
    marker = tmp_path / "reading"
    cluster.start_worker("--preload", str(preload), env={"SIMDOC_TEST_MARKER": str(marker)})
    index = tmp_path / "idx"
    run = subprocess.Popen(
        [sys.executable, "-m", "simdoc", "pairs", str(corpus), "--index", str(index), "--scheduler", cluster.address],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not marker.exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.05)
        os.killpg(cluster.scheduler.pid, signal.SIGKILL)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    r = subprocess.CompletedProcess(run.args, run.returncode, out, err)
    assert_cluster_error(r, "lost the Dask scheduler at", cluster.address)
    # The index is as it was: there was none, and no stage was published.
    assert not (index / "manifest.json").exists()


def test_a_worker_that_does_not_answer_the_check_is_named_not_waited_for(tmp_path, cluster):
    """Case 5: the scheduler lists the worker, stopped with SIGSTOP; the client asks each worker on its own."""
    corpus = tmp_path / "c"
    make_corpus(corpus, seed=36, n_base=4)
    index = tmp_path / "idx"
    stuck = cluster.start_worker()
    cluster.wait_for_workers(1)
    address = cluster.workers()[0]
    os.killpg(stuck.pid, signal.SIGSTOP)  # it answers nothing, and stays listed
    try:
        # --wait-workers 1: a worker has max(1 s, 10 s) to answer.
        r = simdoc("pairs", corpus, "--index", index, "--scheduler", cluster.address, "--wait-workers", "1",
                   cwd=tmp_path, timeout=240)  # a safety net: before, the client waited for ever
    finally:
        os.killpg(stuck.pid, signal.SIGCONT)
    assert_cluster_error(r, f"Dask worker {address} did not answer simdoc's check within 10 s")
    assert "--wait-workers" in r.stderr
    assert not (index / "manifest.json").exists()


def test_tasks_go_to_the_cluster_as_a_bounded_stream():
    """map_ordered makes, submits and holds at most `window` tasks at a time, and hands results back in order."""
    from simdoc.engines.dask import map_ordered

    class Future:
        def __init__(self, client, value):
            self.client, self.value = client, value
            client.live += 1
            client.most = max(client.most, client.live)

        def result(self, timeout=None):  # as a Dask future's
            return self.value

        def __del__(self):  # what Dask's futures do when dropped: release the task
            self.client.live -= 1

    class Client:
        live = most = 0
        cancelled: list = []

        def submit(self, func, task, pure=True):
            assert pure is False
            return Future(self, func(task))

        def cancel(self, futures):
            self.cancelled.extend(futures)

    made = []

    def tasks():
        for i in range(100):
            made.append(i)
            yield i

    client = Client()
    stream = map_ordered(client, lambda x: x * x, tasks(), window=5)
    first = [next(stream) for _ in range(3)]
    assert first == [0, 1, 4] and len(made) == 8  # 3 handed back, 5 in flight: no more made
    assert list(stream) == [i * i for i in range(3, 100)]
    assert client.most == 5 and client.live == 0
    # Stopped early, it cancels what is still in flight.
    stream = map_ordered(client, lambda x: x, iter(range(10)), window=3)
    assert next(stream) == 0
    stream.close()
    assert [f.value for f in client.cancelled] == [1, 2, 3]

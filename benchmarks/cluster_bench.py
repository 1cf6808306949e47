"""The local engine against a Dask cluster of separate processes, with 1, 2 and 4 workers.

    python benchmarks/cluster_bench.py CORPUS WORKDIR [--workers 1,2,4] [--jobs 2] [--threshold 0.8] [--cold]

Each run builds a fresh index with `simdoc pairs CORPUS --threshold T` (the
local engine with `--jobs`, then `--scheduler` on a `dask scheduler` and N
`dask worker --nthreads 1` processes started for that run, in a folder of
their own) and reports:

* wall time of the simdoc command;
* the client's CPU time and peak RSS (getrusage of the simdoc process itself,
  read as it exits; its threads included, not the local engine's pool) and
  the bytes it wrote (/proc/self/io write_bytes: what it sent to the storage
  layer; wchar: what it passed to write() for files and pipes) and read
  (rchar: read() from files and pipes, the page cache included; not a
  socket's recv()), and the size of the tasks' results it received
  (each pickled again as it arrives: a measure of what crossed the wire),
  plus the bytes written by every worker, read from /proc/PID/io before
  the workers are stopped;
* per task on the workers (a preload wraps the reading and scoring tasks):
  the worker's peak RSS during the task (VmHWM, reset before each task by
  writing 5 to /proc/self/clear_refs; workers run one task at a time), its
  RSS when the task started, and at its end how much of the RSS was
  anonymous memory and how much pages of mapped files (the index's arrays,
  memory-mapped: shared between the workers of a host, and dropped by the
  kernel under pressure); the largest of each kind is reported;
* whether every output is byte-identical to the local engine's.

The JSON goes to stdout and WORKDIR/results.json. The machine this runs on
may be shared: say so next to the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

# Run simdoc's command in this process, then record what the process used (simdoc exits via
# SystemExit, so atexit runs). The local engine's pool processes are not the client.
CLIENT = r"""
import atexit, json, os, pickle, resource, sys

_received = [0]  # bytes of the tasks' results, pickled: what came back to this process


def _record():
    io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    with open(os.environ["BENCH_CLIENT_OUT"], "w") as f:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        json.dump({"peak_rss_mb": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime,
                   "write_bytes": int(io["write_bytes"]), "wchar": int(io["wchar"]),
                   "read_bytes": int(io["read_bytes"]), "rchar": int(io["rchar"]),
                   "results_bytes": _received[0]}, f)


def _counted(stream):
    def run(*args, **kwargs):
        for result in stream(*args, **kwargs):
            _received[0] += len(pickle.dumps(result, protocol=5))
            yield result
    return run


import simdoc.engines as _engines
import simdoc.engines.dask as _dask
import simdoc.engines.local as _local

_engines.map_ordered = _dask.map_ordered = _counted(_dask.map_ordered)
_local.LocalEngine.map = _counted(_local.LocalEngine.map)
atexit.register(_record)
from simdoc.cli import main
sys.argv[0] = "simdoc"
main()
"""

# A worker preload: wrap the tasks to measure each one's peak memory (the worker runs one at a time).
PRELOAD = r"""
import json, os, time

import simdoc.stages.dask_index as _ci
import simdoc.stages.dask_pairs as _cp
import simdoc.stages.dask_signatures as _cs
import simdoc.stages.scan as _scan

_OUT = os.environ["BENCH_TASKS_OUT"]


def _status():
    out = {}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM", "RssAnon", "RssFile")):
            key, value = line.split(":")
            out[key] = int(value.split()[0]) / 1024
    return out


def _measured(kind, func):
    if getattr(func, "_bench", False):  # a preload may run twice in one namespace
        return func

    def run(task):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        before = _status()["VmRSS"]
        t0 = time.perf_counter()
        result = func(task)
        after = _status()
        with open(_OUT, "a") as f:
            f.write(json.dumps({"kind": kind, "band": getattr(task, "band", None),
                                "seconds": time.perf_counter() - t0, "rss_before_mb": before,
                                "peak_mb": after["VmHWM"], "anon_after_mb": after["RssAnon"],
                                "file_after_mb": after["RssFile"]}) + "\n")
        return result

    run._bench = True
    return run


_scan.scan_batch = _measured("read", _scan.scan_batch)
_cp.score_partition = _measured("score", _cp.score_partition)
_cs.place_rows = _measured("copy rows", _cs.place_rows)
_ci.band_rows = _measured("band keys", _ci.band_rows)
_ci.bucket_range = _measured("buckets", _ci.bucket_range)
"""


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("SIMDOC_INDEX", "SIMDOC_SCHEDULER")}


def run_client(python: str, args: list[str], out: Path, record: Path, cwd: Path) -> dict:
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        r = subprocess.run([python, "-c", CLIENT, *args], stdout=fh, stderr=subprocess.PIPE, cwd=cwd,
                           env={**_env(), "BENCH_CLIENT_OUT": str(record)})
    wall = time.perf_counter() - t0
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(args)}\n{err}")
    client = json.loads(record.read_text())
    return {"wall_s": round(wall, 2), "client_cpu_s": round(client["cpu_s"], 2), "client_peak_rss_mb": round(client["peak_rss_mb"]),
            "client_write_mb": round(client["write_bytes"] / 1e6, 1), "client_wchar_mb": round(client["wchar"] / 1e6, 1),
            "client_rchar_mb": round(client["rchar"] / 1e6, 1), "results_mb": round(client["results_bytes"] / 1e6, 1),
            "summary": err.strip().splitlines()[-1]}


class Cluster:
    def __init__(self, python: str, home: Path) -> None:
        self.python, self.home = python, home
        home.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []

    def start(self, n_workers: int, preload: Path, tasks_out: Path) -> str:
        file = self.home / "scheduler.json"
        self._spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
                    "scheduler")
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            if time.monotonic() > deadline:
                raise SystemExit("the scheduler did not start")
            time.sleep(0.1)
        time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        for i in range(n_workers):
            self.workers.append(self._spawn(
                ["worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--preload", str(preload),
                 "--local-directory", str(self.home / "scratch")], f"worker{i}", {"BENCH_TASKS_OUT": str(tasks_out)}))
        from distributed import Client

        with Client(address, timeout="20s") as c:
            c.wait_for_workers(n_workers, timeout=120)
        return address

    def _spawn(self, argv: list[str], name: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "wb")
        p = subprocess.Popen([self.python, "-m", "dask", *argv], cwd=self.home, stdout=log, stderr=subprocess.STDOUT,
                             env={**_env(), **(env or {})}, start_new_session=True)
        self.procs.append(p)
        return p

    def worker_io(self) -> dict:
        total = {"write_bytes": 0, "wchar": 0, "peak_rss_mb": 0.0}
        for p in self.workers:
            io = dict(line.split(": ") for line in Path(f"/proc/{p.pid}/io").read_text().splitlines())
            total["write_bytes"] += int(io["write_bytes"])
            total["wchar"] += int(io["wchar"])
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM"):
                    total["peak_rss_mb"] = max(total["peak_rss_mb"], int(line.split()[1]) / 1024)
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def largest_tasks(path: Path) -> dict:
    out = {}
    if not path.exists():
        return out
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        top = max(mine, key=lambda r: r["peak_mb"])
        out[kind] = {"tasks": len(mine), "largest_peak_mb": round(top["peak_mb"]),
                     "rss_at_its_start_mb": round(top["rss_before_mb"]),
                     "largest_growth_mb": round(max(r["peak_mb"] - r["rss_before_mb"] for r in mine)),
                     # Of the RSS at the end of that task: anonymous memory, and pages of mapped files
                     # (the index's arrays: shared by the workers of a host, dropped under pressure).
                     "its_anon_after_mb": round(top.get("anon_after_mb", 0)), "its_file_after_mb": round(top.get("file_after_mb", 0)),
                     "largest_anon_after_mb": round(max(r.get("anon_after_mb", 0) for r in mine)),
                     "longest_s": round(max(r["seconds"] for r in mine), 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--workers", default="1,2,4", help="worker process counts, comma-separated")
    ap.add_argument("--jobs", type=int, default=2, help="--jobs of the local engine")
    ap.add_argument("--threshold", default="0.8")
    ap.add_argument("--python", default=sys.executable, help="a Python with simdoc and dask installed")
    ap.add_argument("--no-local", action="store_true", help="skip the local engine's run")
    ap.add_argument("--cold", action="store_true", help="do not read the corpus once before the runs")
    args = ap.parse_args()
    corpus = args.corpus.resolve()
    work = args.workdir.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if not args.cold:  # every run then reads the corpus from the page cache (at 10^6 it does not fit: say so)
        subprocess.run(f"find {shlex.quote(str(corpus))} -type f -print0 | xargs -0 cat > /dev/null", shell=True, check=True)
    base = ["pairs", str(corpus), "--threshold", args.threshold]
    results: dict = {"corpus": str(corpus), "threshold": args.threshold, "runs": {}}
    if not args.no_local:
        r = run_client(args.python, [*base, "--index", str(work / "local.idx"), "--jobs", str(args.jobs)],
                       work / "local.tsv", work / "local.client.json", work)
        results["runs"][f"local --jobs {args.jobs}"] = r
        print(json.dumps({"local": r}), file=sys.stderr)
    preload = work / "bench_preload.py"
    preload.write_text(PRELOAD)
    for n in [int(x) for x in args.workers.split(",") if x]:
        cluster = Cluster(args.python, work / f"cluster{n}")
        tasks = work / f"tasks{n}.jsonl"
        try:
            address = cluster.start(n, preload, tasks)
            r = run_client(args.python, [*base, "--index", str(work / f"dask{n}.idx"), "--scheduler", address],
                           work / f"dask{n}.tsv", work / f"dask{n}.client.json", work)
            w = cluster.worker_io()
        finally:
            cluster.stop()
        r["workers_write_mb"] = round(w["write_bytes"] / 1e6, 1)
        r["workers_wchar_mb"] = round(w["wchar"] / 1e6, 1)
        r["worker_peak_rss_mb"] = round(w["peak_rss_mb"])
        r["tasks"] = largest_tasks(tasks)
        if not args.no_local:
            r["identical_to_local"] = (work / f"dask{n}.tsv").read_bytes() == (work / "local.tsv").read_bytes()
        results["runs"][f"dask, {n} worker{'s' if n > 1 else ''}"] = r
        print(json.dumps({n: r}), file=sys.stderr)
        shutil.rmtree(work / f"dask{n}.idx", ignore_errors=True)  # room for the next (10^6: 840 MB each)
    (work / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

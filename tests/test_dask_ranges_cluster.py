"""A big file is cut into range tasks on real Dask clusters too (issue 29): `--scheduler 'local[2]'`,
and a `dask scheduler` with 2 `dask worker` processes. The pairs printed and the index arrays are
the local engine's (-j 1), cut or read as one task, and no reading task sends a docs-table row
back to the client (only where its part is).

The task budget is made small in the client only, by a launcher (the plan is made in the client:
the workers read the ranges they are given, whatever their own budget).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_dask import arrays
from test_dask_contract import _env
from test_dask_ranges import make, set_budget

from simdoc.cli import cli

pytest.importorskip("distributed")

BUDGET = 300
COMMON = ["--threshold", "0.5", "--all-candidates", "--format", "tsv"]

# The client with small ranges, noting each reading task it submits (its file, if a range's).
LAUNCHER = '''
import json, os, pickle, sys

from simdoc.corpus import jsonl_ranges, parquet, warc_spans

from simdoc.stages import same_bytes

jsonl_ranges.RANGE_BYTES = warc_spans.SPAN_BYTES = parquet.TASK_BYTES = int(os.environ["SIMDOC_TEST_BUDGET"])
same_bytes.CHECK_BYTES = int(os.environ["SIMDOC_TEST_BUDGET"])
parquet.CUT_BYTES = 0

from simdoc import engines

real = engines.DaskEngine.map


def noted(self, func, tasks):
    def each():
        for t in tasks:
            if func.__name__ == "scan_batch":
                with open(os.environ["SIMDOC_TEST_SUBMITTED"], "a") as f:
                    f.write(json.dumps(t.files[0][0] if t.span is not None else None) + "\\n")
            yield t

    for r in real(self, func, each()):
        if func.__name__ == "scan_batch":  # what came back: its kind, its size pickled, its documents
            with open(os.environ["SIMDOC_TEST_RESULTS"], "a") as f:
                f.write(json.dumps([type(r).__name__, len(pickle.dumps(r, protocol=5)), getattr(r, "n_docs", None)]) + "\\n")
        yield r


engines.DaskEngine.map = noted

if __name__ == "__main__":  # not in the LocalCluster's worker processes, which import this file again
    from simdoc.__main__ import main

    sys.argv[0] = "simdoc"
    main()
'''

# A worker preload noting, in $SIMDOC_TEST_RAN, the file of each range's task the worker runs.
RECORD_RANGES = '''
import json, os

from simdoc.stages import scan

real = getattr(scan, "_test_real_scan_batch", None) or scan.scan_batch
scan._test_real_scan_batch = real


def noted(task):
    if task.span is not None:
        with open(os.environ["SIMDOC_TEST_RAN"], "a") as f:
            f.write(json.dumps(task.files[0][0]) + "\\n")
    return real(task)


scan.scan_batch = noted
'''


def on_cluster(tmp_path: Path, c: Path, index: Path, scheduler: str) -> tuple[subprocess.CompletedProcess, list]:
    (tmp_path / "launch.py").write_text(LAUNCHER)
    noted = tmp_path / "submitted"
    env = _env({"SIMDOC_TEST_BUDGET": str(BUDGET), "SIMDOC_TEST_SUBMITTED": str(noted), "SIMDOC_TEST_RESULTS": str(tmp_path / "results")})
    r = subprocess.run(
        [sys.executable, str(tmp_path / "launch.py"), "pairs", str(c), "--index", str(index), "--scheduler", scheduler, *COMMON],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    submitted = [json.loads(line) for line in noted.read_text().splitlines()] if noted.exists() else []
    return r, submitted


def no_docs_row_came_back(tmp_path: Path) -> None:
    """Every reading task sent back where its part is, a few hundred bytes, however many
    documents it read (issue 29: the client receives no docs-table row)."""
    got = [json.loads(line) for line in (tmp_path / "results").read_text().splitlines()]
    assert got and {kind for kind, _, _ in got} == {"PartWritten"}, got
    sizes = [size for _, size, _ in got]
    assert max(n for _, _, n in got) >= 3 and max(sizes) < 200 + len(str(tmp_path)) and max(sizes) - min(sizes) <= 8, got


def locally(c: Path, index: Path, budget: int) -> str:
    with pytest.MonkeyPatch.context() as m:
        set_budget(m, budget)
        r = CliRunner().invoke(cli, ["pairs", str(c), "--index", str(index), "-j", "1", *COMMON])
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_local_cluster_cuts_big_files_and_prints_what_the_local_engine_prints(tmp_path):
    c = make(tmp_path / "c")
    r, submitted = on_cluster(tmp_path, c, tmp_path / "dask", "local[2]")
    assert r.returncode == 0, r.stderr
    # More than one task for each big file (before: one a file on a cluster).
    for name in ("big.jsonl", "crawl.warc.gz") + (("rows.parquet",) if (c / "rows.parquet").exists() else ()):
        assert submitted.count(name) >= 3, submitted
    cut = locally(c, tmp_path / "local", BUDGET)
    whole = locally(c, tmp_path / "whole", 1 << 40)
    assert r.stdout == cut == whole and cut.count("\n") >= 5
    assert arrays(tmp_path / "dask") == arrays(tmp_path / "local") == arrays(tmp_path / "whole")
    no_docs_row_came_back(tmp_path)


def _but_times(got: dict) -> dict:
    return {k: v for k, v in got.items() if not k.endswith(("mtime_ns", "ctime_ns"))}


def test_touched_big_files_are_kept_by_their_digest_on_a_local_cluster(tmp_path):
    # simdoc.stages.same_bytes: the digests compared by the cluster's workers, no range read again.
    c = make(tmp_path / "c")
    r, _ = on_cluster(tmp_path, c, tmp_path / "dask", "local[2]")
    assert r.returncode == 0, r.stderr
    before = _but_times(arrays(tmp_path / "dask"))
    big = [p for p in c.iterdir() if p.name in ("big.jsonl", "crawl.warc.gz", "rows.parquet")]
    for p in big:
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    (tmp_path / "submitted").unlink()
    again, submitted = on_cluster(tmp_path, c, tmp_path / "dask", "local[2]")
    assert again.returncode == 0, again.stderr
    assert again.stdout == r.stdout and _but_times(arrays(tmp_path / "dask")) == before
    assert not any(name in submitted for name in ("big.jsonl", "crawl.warc.gz", "rows.parquet")), submitted
    assert len(big) >= 2


def test_separate_workers_read_the_ranges_the_client_planned(tmp_path, cluster):
    c = make(tmp_path / "c")
    (tmp_path / "record.py").write_text(RECORD_RANGES)
    ran = tmp_path / "ran"
    for _ in range(2):
        cluster.start_worker("--preload", str(tmp_path / "record.py"), env={"SIMDOC_TEST_RAN": str(ran)})
    cluster.wait_for_workers(2)
    r, submitted = on_cluster(tmp_path, c, tmp_path / "dask", cluster.address)
    assert r.returncode == 0, r.stderr
    on_workers = [json.loads(line) for line in ran.read_text().splitlines()]
    assert sorted(on_workers) == sorted(s for s in submitted if s is not None) and on_workers.count("big.jsonl") >= 3
    whole = locally(c, tmp_path / "whole", 1 << 40)
    assert r.stdout == whole
    assert arrays(tmp_path / "dask") == arrays(tmp_path / "whole")
    no_docs_row_came_back(tmp_path)

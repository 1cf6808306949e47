"""The local engine against a local Dask cluster on the same corpus, in one run.

    python benchmarks/bench_dask.py CORPUS WORKDIR [--workers 2] [--simdoc-cmd simdoc]

Runs `simdoc pairs CORPUS --threshold 0.8` twice into fresh indexes, with
`--jobs N` and with `--scheduler local[N]`, and reports wall time, the peak
RSS of the simdoc (client) process alone and of its whole process tree
(sampled every 0.2 s with psutil), the overhead per document, and whether
the two outputs are identical.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

import psutil


def measure(cmd: list[str], out: Path) -> dict:
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.PIPE)
        root = psutil.Process(proc.pid)
        peak_client = peak_tree = 0
        while proc.poll() is None:
            try:
                peak_client = max(peak_client, root.memory_info().rss)
                tree = root.memory_info().rss
                for child in root.children(recursive=True):
                    try:
                        tree += child.memory_info().rss
                    except psutil.Error:
                        pass
                peak_tree = max(peak_tree, tree)
            except psutil.Error:
                pass
            time.sleep(0.2)
        err = proc.stderr.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err}")
    return {"wall_s": round(time.perf_counter() - t0, 2), "client_rss_mb": round(peak_client / 1e6),
            "tree_rss_mb": round(peak_tree / 1e6), "summary": err.strip().splitlines()[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--simdoc-cmd", default="simdoc")
    args = ap.parse_args()
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    simdoc = args.simdoc_cmd.split()
    n_docs = sum(1 for p in args.corpus.rglob("*") if p.is_file() and not p.name.startswith("."))
    base = [*simdoc, "pairs", str(args.corpus), "--threshold", "0.8"]
    local = measure([*base, "--index", str(args.workdir / "local"), "--jobs", str(args.workers)], args.workdir / "local.tsv")
    dask = measure([*base, "--index", str(args.workdir / "dask"), "--scheduler", f"local[{args.workers}]"], args.workdir / "dask.tsv")
    same = (args.workdir / "local.tsv").read_bytes() == (args.workdir / "dask.tsv").read_bytes()
    print(json.dumps({
        "documents": n_docs,
        "local": local,
        "dask": dask,
        "dask_over_local": round(dask["wall_s"] / local["wall_s"], 2),
        "overhead_per_document_ms": round((dask["wall_s"] - local["wall_s"]) / n_docs * 1e3, 3),
        "identical_output": same,
    }, indent=2))


if __name__ == "__main__":
    main()

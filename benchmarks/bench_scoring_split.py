"""Scoring tasks cut by the pairs in a band's buckets, against one task per band, on a cluster.

    python benchmarks/bench_scoring_split.py INDEX WORKDIR [--workers 2] [--threshold 0.8] [--rounds 1]

INDEX: an index built with ``--no-verify`` (``simdoc pairs CORPUS --index
INDEX --no-verify``), so that every run verifies every candidate from the
documents (a run given no corpus keeps no verified pairs). Starts a
``dask scheduler`` and N ``dask worker --nthreads 1`` processes (the task
preload of cluster_bench.py records each scoring task's band and time), then
runs ``simdoc pairs --index INDEX`` with simdoc's PAIRS_PER_TASK ("split",
the default) and with no limit on pairs ("whole": one task per band when the
band's rows fit one), alternating, and prints for each: wall time, the
scoring tasks, their total and longest time, and per band the times of its
tasks. Both outputs must be byte-identical.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

from cluster_bench import PRELOAD, Cluster, _env

MODES = {"split": None, "whole": 1 << 62}


def run(python: str, index: Path, threshold: str, address: str, pairs: int | None, out: Path) -> float:
    setup = "" if pairs is None else f"import simdoc.stages.dask_pairs as c; c.PAIRS_PER_TASK = {pairs}; "
    code = setup + "import sys; from simdoc.cli import main; sys.argv[0] = 'simdoc'; main()"
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        subprocess.run([python, "-c", code, "pairs", "--index", str(index), "-t", threshold, "--scheduler", address],
                       stdout=fh, check=True, env=_env())
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threshold", default="0.8")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    preload, tasks = work / "preload.py", work / "tasks.jsonl"
    preload.write_text(PRELOAD)
    cluster = Cluster(args.python, work / "cluster")
    results = []
    try:
        address = cluster.start(args.workers, preload, tasks)
        for round_ in range(args.rounds):
            for mode, pairs in MODES.items():
                tasks.write_text("")
                wall = run(args.python, args.index.resolve(), args.threshold, address, pairs, work / f"{mode}.tsv")
                rows = [json.loads(line) for line in tasks.read_text().splitlines() if '"score"' in line]
                by_band = collections.defaultdict(list)
                for r in rows:
                    by_band[r["band"]].append(round(r["seconds"], 1))
                results.append({"round": round_, "mode": mode, "wall_s": round(wall, 2), "tasks": len(rows),
                                "total_s": round(sum(r["seconds"] for r in rows), 1),
                                "longest_s": round(max(r["seconds"] for r in rows), 1),
                                "by_band": dict(sorted(by_band.items()))})
                print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        cluster.stop()
    same = (work / "split.tsv").read_bytes() == (work / "whole.tsv").read_bytes()
    print(json.dumps({"identical": same, "runs": results}, indent=1))


if __name__ == "__main__":
    main()

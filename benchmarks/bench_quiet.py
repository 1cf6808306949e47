"""A night when nothing changed: `simdoc pairs CORPUS --index IDX --new`, run again and again.

    python benchmarks/bench_quiet.py CORPUS IDX NAME=CHECKOUT[@IDX2] [NAME=CHECKOUT ...] [--runs 15] [--jobs 2] [--include GLOB ...]

IDX must be an index of CORPUS that is up to date (run the command once
before, and once more if the files were written just before it: files
written within a scan's racy window are read again by the next run). Each
CHECKOUT is a simdoc source tree, run as ``python -P -m simdoc`` with it on
PYTHONPATH (the same interpreter for all; ``-P``: not the simdoc of the
current folder, which ``-m`` would find first), so that two commits are timed
against each other in one run: they alternate, the order reversed every
other round, as a busy machine's noise moves both alike. Prints the wall
time of each: median, quartiles and minimum, and its CPU time (the run's
and its helper's, user + system: less moved by a busy machine), and checks that every run
printed no pair and left the index as it was. A checkout given ``@IDX2``
runs on that index of the corpus instead (one its simdoc made, where the
other's manifest holds what it does not know).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import children_cpu


def manifest_digest(index: Path) -> str:
    return hashlib.sha256((index / "manifest.json").read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("index", type=Path)
    ap.add_argument("checkouts", nargs="+", help="NAME=PATH of a simdoc source tree")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--include", action="append", default=[], help="the index's --include globs (a source tree's '*.py')")
    args = ap.parse_args()
    trees, indexes = {}, {}
    for item in args.checkouts:
        name, tree = item.split("=", 1)
        tree, _, own = tree.partition("@")
        trees[name], indexes[name] = tree, Path(own) if own else args.index
    globs = [arg for glob in args.include for arg in ("--include", glob)]
    cmds = {
        name: [sys.executable, "-P", "-m", "simdoc", "pairs", str(args.corpus), "--index", str(idx), "--new", "-j", str(args.jobs), *globs]
        for name, idx in indexes.items()
    }
    before = {idx: manifest_digest(idx) for idx in set(indexes.values())}
    times: dict[str, list[float]] = {name: [] for name in trees}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(args.runs):
        for name in list(trees) if i % 2 else list(trees)[::-1]:
            env = dict(os.environ, PYTHONPATH=str(Path(trees[name]).resolve()))
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as an installed package is
            c0, t0 = children_cpu(), time.perf_counter()
            p = subprocess.run(cmds[name], capture_output=True, text=True, env=env)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(children_cpu() - c0)
            if p.returncode != 0 or p.stdout:
                sys.exit(f"{name}: exit {p.returncode}, {len(p.stdout.splitlines())} lines on stdout\n{p.stderr}")
    if any(manifest_digest(idx) != digest for idx, digest in before.items()):
        sys.exit("an index changed: it was not up to date (run the command once more first)")
    for name, ts in times.items():
        ts.sort()
        n = len(ts)
        print(
            f"{name}: median {statistics.median(ts):.3f} s, quartiles {ts[n // 4]:.3f}-{ts[(3 * n) // 4]:.3f} s, min {ts[0]:.3f} s "
            f"({n} runs); CPU median {statistics.median(cpu[name]):.3f} s, min {min(cpu[name]):.3f} s"
        )


if __name__ == "__main__":
    main()

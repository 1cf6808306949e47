#!/usr/bin/env python3
"""What the reading stage's part files cost, and what a killed client's rerun saves (issue 20).

    python benchmarks/resume_bench.py CORPUS WORKDIR [--kill-after 0.5]

Runs the fused reading stage (docs table + signatures, as `simdoc pairs`
does) three ways, in this process, one task at a time, so the figures
compare the work and not the scheduling:

* ``local``: the LocalEngine with one process (writes no parts);
* ``cluster``: a DaskEngine whose client runs each task at once, pickled
  there and back as Dask sends it (every task writes its part);
* ``killed`` then ``rerun``: the same client dying after a fraction of the
  tasks, then a run that takes their parts and submits the rest.

It prints wall times, the tasks submitted, the bytes of parts written, and
checks that every index file of the rerun is byte-identical to the
uninterrupted run's. The corpus files must be older than 2 s (parts of files
modified just before their reading are not written). The figures of one
machine shared with other work: compare them with each other, not with other
machines.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import time
from pathlib import Path

from simdoc.engines import DaskEngine
from simdoc.engines.local import LocalEngine
from simdoc.params import ShingleParams, SignatureParams
from simdoc.stages import scan
from simdoc.stages.shingle import build_shingles
from simdoc.stages.resume import SCAN_PARTS
from simdoc.store.names import PARTS


class Killed(Exception):
    """The client died (its process killed)."""


class InProcessClient:
    """What map_ordered needs of a Dask client: each task run at once, pickled there and back;
    dies as task ``lives`` + 1 is submitted."""

    def __init__(self, lives: int | None = None) -> None:
        self.lives, self.submitted = lives, 0

    def scheduler_info(self) -> dict:
        return {"workers": {"w": {"nthreads": 1}}}

    def submit(self, func, task, pure=True):
        if self.submitted == self.lives:
            raise Killed
        self.submitted += 1
        result = pickle.loads(pickle.dumps(func(pickle.loads(pickle.dumps(task)))))

        class Done:
            def result(self):
                return result

        return Done()

    def cancel(self, futures) -> None:
        pass


def files_of(index: Path) -> dict[str, bytes]:
    out = {p.name: p.read_bytes() for p in index.iterdir() if p.is_file() and p.name not in ("lock", "readers")}
    manifest = json.loads(out.pop("manifest.json"))
    manifest["stages"]["shingle"].pop("scanned_at_ns")
    manifest.pop("checksum", None)
    out["manifest"] = json.dumps(manifest, sort_keys=True).encode()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--kill-after", type=float, default=0.5, help="fraction of the tasks the killed client finishes")
    args = ap.parse_args()
    signer = SignatureParams().resolved()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    n_files = sum(1 for p in args.corpus.rglob("*") if p.is_file() and not p.name.startswith("."))

    def run(name: str, engine) -> float:
        t0 = time.perf_counter()
        build_shingles(args.corpus, args.workdir / name, ShingleParams(), signature=signer, engine=engine)
        return time.perf_counter() - t0

    local = run("local", LocalEngine(1))
    cluster = run("cluster", DaskEngine(InProcessClient(), 1))
    n_tasks = sum(1 for _ in scan.batches(sorted_entries(args.corpus)))
    lives = int(n_tasks * args.kill_after)
    dying = InProcessClient(lives)
    t0 = time.perf_counter()
    try:
        run("resumed", DaskEngine(dying, 1))
    except Killed:
        pass
    killed = time.perf_counter() - t0
    parts = args.workdir / "resumed" / PARTS / SCAN_PARTS
    part_bytes = sum(p.stat().st_size for p in parts.glob("*.npz"))
    n_parts = len(list(parts.glob("*.npz")))
    again = InProcessClient()
    rerun = run("resumed", DaskEngine(again, 1))
    same = files_of(args.workdir / "resumed") == files_of(args.workdir / "cluster") == files_of(args.workdir / "local")
    print(f"corpus: {n_files} files, {n_tasks} reading tasks")
    print(f"local engine (1 process):         {local:7.2f} s")
    print(f"cluster client, every part written: {cluster:7.2f} s")
    print(f"killed after {lives} tasks:            {killed:7.2f} s; {n_parts} parts, {part_bytes / 1e6:.1f} MB "
          f"({part_bytes / max(n_parts, 1) / 1e6:.2f} MB a part)")
    print(f"rerun: {again.submitted} tasks submitted: {rerun:7.2f} s")
    print(f"index files of the rerun byte-identical to the uninterrupted runs': {same}")


def sorted_entries(corpus: Path):
    """The corpus as the stage walks it (for the number of tasks)."""
    from simdoc.corpus.walk import discover_sources

    return list(discover_sources(corpus)[1])


if __name__ == "__main__":
    main()

"""A crawl that grows: a night's new JSON Lines shard added to a big indexed one, against a rebuild.

    python benchmarks/bench_grow.py RECORDS WORKDIR [--new-records 5000] [--touch] [--simdoc-cmd simdoc]

RECORDS (a JSON Lines file with a ``text`` field, e.g. ``gen_records.py``'s
``records.jsonl``) is copied to WORKDIR/corpus/shard-000.jsonl and indexed
with ``--new`` (last night's cron run). Then a shard of ``--new-records``
records is added (shard-001.jsonl: records of shard-000, half with one word
changed, half with their words in another order), and

* the update is timed: ``simdoc pairs corpus --index idx --new``;
* with ``--touch``, shard-000 is touched first: its stat changes, its bytes
  do not (a ``chmod``, ``touch`` or copy keeping them would do the same);
* a full rebuild of the grown corpus is timed.

It checks that the update gives the rebuild's pairs and byte-identical arrays,
and prints wall and CPU seconds (simdoc's and its workers') of both.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_update import CPU_S, arrays, run
from simdoc.stages.racy import RACY_NS


def new_shard(source: Path, out: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with source.open() as f:
        lines = [line for _, line in zip(range(200_000), f)]
    with out.open("w") as f:
        for i in range(n):
            words = json.loads(rng.choice(lines))["text"].split()
            if i % 2:
                rng.shuffle(words)
            else:
                words[rng.randrange(len(words))] = "zzz"
            f.write(json.dumps({"id": f"n{i}", "text": " ".join(words)}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--new-records", type=int, default=5000)
    ap.add_argument("--touch", action="store_true", help="touch the old shard too (its stat changes, its bytes do not)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--simdoc-cmd", default="simdoc")
    args = ap.parse_args()
    simdoc = args.simdoc_cmd.split()
    work = args.workdir
    if work.exists():
        shutil.rmtree(work)
    (work / "corpus").mkdir(parents=True)
    old = work / "corpus" / "shard-000.jsonl"
    shutil.copyfile(args.records, old)
    subprocess.run(["touch", "-d", "2 days ago", str(old)], check=True)
    time.sleep(RACY_NS / 1e9 + 0.5)  # not racily clean for the first build (see simdoc.stages.racy)
    common = ["--threshold", str(args.threshold), "-q"]
    run([*simdoc, "pairs", str(work / "corpus"), "--index", str(work / "idx"), "--new", *common])
    time.sleep(RACY_NS / 1e9 + 0.5)  # the next night
    new_shard(old, work / "corpus" / "shard-001.jsonl", args.new_records, args.seed)
    if args.touch:
        subprocess.run(["touch", str(old)], check=True)
    t_update, new_pairs, _ = run([*simdoc, "pairs", str(work / "corpus"), "--index", str(work / "idx"), "--new", *common], "update")
    t_full, full_pairs, _ = run([*simdoc, "pairs", str(work / "corpus"), "--index", str(work / "full"), *common], "full_rebuild")
    _, updated_pairs, _ = run([*simdoc, "pairs", "--index", str(work / "idx"), *common])
    same_pairs = updated_pairs == full_pairs
    same_arrays = arrays(work / "idx") == arrays(work / "full")
    print(json.dumps({
        "new_records": args.new_records,
        "old_shard_touched": args.touch,
        "update_s": round(t_update, 2),
        "full_rebuild_s": round(t_full, 2),
        "cpu_s": CPU_S,
        "update_over_rebuild_cpu": round(CPU_S["update"] / CPU_S["full_rebuild"], 3),
        "new_pairs_reported": len(new_pairs.splitlines()),
        "same_pairs_as_rebuild": same_pairs,
        "byte_identical_arrays": same_arrays,
    }, indent=2))
    if not (same_pairs and same_arrays):
        sys.exit("the update differs from a full rebuild")


if __name__ == "__main__":
    main()

"""Cost of a nightly 1% update against a full rebuild, measured in one run.

    python benchmarks/bench_update.py CORPUS WORKDIR [--fraction 0.01] [--seed 1] [--simdoc-cmd simdoc]

CORPUS is copied to WORKDIR/corpus (it is not modified). The script builds an
index, then changes `fraction` of the documents (half edited, 30% added as
edited copies of others, 20% deleted), and times

* the incremental update: `simdoc pairs corpus --index idx --new`, the night
  after a first build that was itself a `--new` run (its report written);
* a full rebuild of the changed corpus into a fresh index;
* a run where nothing changed: the same update again.

It checks that both give the same pairs and byte-identical arrays, and
prints the times and their ratio: wall time, and the CPU time (user +
system) of simdoc and its worker processes, which a machine shared with
other jobs distorts less than wall time.
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

from bench_common import children_cpu
from simdoc.stages.racy import RACY_NS


CPU_S: dict[str, float] = {}  # the CPU time of each timed command, by name


def run(cmd: list[str], name: str | None = None) -> tuple[float, str, str]:
    cpu0, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if name:
        CPU_S[name] = round(children_cpu() - cpu0, 2)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return dt, p.stdout, p.stderr


def arrays(index: Path) -> dict[str, bytes]:
    manifest = json.loads((index / "manifest.json").read_text())
    out = {}
    for stage_name, stage in manifest["stages"].items():
        for role, name in stage["roles"].items():
            if role != "docs.added":  # which update added each text: history, not the result
                out[f"{stage_name}.{role}"] = (index / name).read_bytes()
    return out


def mutate(corpus: Path, fraction: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and not p.name.startswith("."))
    n = max(1, int(len(files) * fraction))
    picked = rng.sample(files, n)
    n_edit, n_add = n // 2, (3 * n) // 10
    edits, adds, deletes = picked[:n_edit], picked[n_edit : n_edit + n_add], picked[n_edit + n_add :]
    for p in edits:
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(" An added closing sentence changes this document a little.\n")
    for i, p in enumerate(adds):
        text = p.read_text(encoding="utf-8")
        (p.parent / f"added-{i:06d}.txt").write_text(text.replace(" the ", " a ", 3), encoding="utf-8")
    for p in deletes:
        p.unlink()
    return {"edited": len(edits), "added": len(adds), "deleted": len(deletes), "documents_before": len(files)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--simdoc-cmd", default="simdoc")
    ap.add_argument(
        "--racy", action="store_true",
        help="build right after copying (files racily clean for the first build), as a fresh crawl would be",
    )
    ap.add_argument(
        "--first-without-new", action="store_true",
        help="build the first index without --new (the update is then the first --new report: every pair)",
    )
    args = ap.parse_args()
    simdoc = args.simdoc_cmd.split()
    work = args.workdir
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    corpus = work / "corpus"
    shutil.copytree(args.corpus, corpus, ignore=shutil.ignore_patterns(".*"))
    if not args.racy:
        # Backdate the copies, as a crawl written before last night's run would be.
        subprocess.run(["find", str(corpus), "-type", "f", "-exec", "touch", "-d", "2 days ago", "{}", "+"], check=True)
        # touch sets the change time to now, and a file changed within RACY_NS of the first scan is
        # racily clean (read again by the next run, see simdoc.stages.racy): wait that out, or the
        # update would also read every file the touch reached in its last two seconds.
        time.sleep(RACY_NS / 1e9 + 0.5)
    common = ["--threshold", str(args.threshold), "-q"]
    # The first build is last night's cron run, with --new as the crontab line has it (README): it
    # reports every pair once, so that tonight's update reports the pairs of what changed since.
    # (Without it the update was the index's first --new report, and scored and printed every pair.)
    first_new = [] if args.first_without_new else ["--new"]
    t_first, _, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "idx"), *first_new, *common])
    if args.racy:
        time.sleep(2.5)  # the update comes later than the racy window, as a nightly run would
    changes = mutate(corpus, args.fraction, args.seed)
    t_update, new_pairs, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "idx"), "--new", *common], "update")
    t_full, full_pairs, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "full"), *common], "full_rebuild")
    t_same, same_new, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "idx"), "--new", *common], "nothing_changed")
    _, updated_pairs, _ = run([*simdoc, "pairs", "--index", str(work / "idx"), *common])
    same_pairs = updated_pairs == full_pairs
    same_arrays = arrays(work / "idx") == arrays(work / "full")
    result = {
        "changes": changes,
        "first_build_s": round(t_first, 2),
        "update_s": round(t_update, 2),
        "full_rebuild_s": round(t_full, 2),
        "update_over_rebuild": round(t_update / t_full, 3),
        "nothing_changed_s": round(t_same, 2),
        "cpu_s": CPU_S,
        "update_over_rebuild_cpu": round(CPU_S["update"] / CPU_S["full_rebuild"], 3),
        "new_pairs_when_nothing_changed": len(same_new.splitlines()),
        "new_pairs_reported": len(new_pairs.splitlines()),
        "same_pairs_as_rebuild": same_pairs,
        "byte_identical_arrays": same_arrays,
    }
    print(json.dumps(result, indent=2))
    if not (same_pairs and same_arrays):
        sys.exit("the update differs from a full rebuild")
    if same_new:
        sys.exit("a run where nothing changed reported new pairs")


if __name__ == "__main__":
    main()

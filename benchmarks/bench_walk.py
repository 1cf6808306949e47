"""The walk alone (issue 29): a folder's files listed and stat-ed, by os.lstat and by the compiled loop.

    python benchmarks/bench_walk.py CORPUS [--repeat 3]

Each way runs in a fresh process (the compiled loop's load, numba's import and
the cached loop, is timed apart): ``discover_sources(CORPUS, columns=True)``,
as ``simdoc pairs`` walks, then its listing id (:func:`simdoc.stages.plan.listing_id`),
which hashes every id and stat column: both ways must give the same. Prints the
wall and CPU seconds of each walk, and the peak RSS of each process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
import simdoc.corpus.folders as folders
from simdoc.corpus.walk import discover_sources
from simdoc.stages.plan import Listing, listing_id
corpus, way, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
load = None
if way == "compiled":
    t, c = time.perf_counter(), time.process_time()
    if not folders.compiled_now():
        sys.exit("no compiled loop here (not Linux, big-endian, or SIMDOC_NO_NUMBA)")
    load = (time.perf_counter() - t, time.process_time() - c)
else:
    folders._COMPILED[0] = False
runs = []
for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time()
    _, entries, skipped = discover_sources(corpus, columns=True)
    runs.append((time.perf_counter() - t, time.process_time() - c))
ident = listing_id(Listing.of(entries), skipped)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"way": way, "files": len(entries), "load": load, "runs": runs, "listing_id": ident, "peak_rss_kb": rss}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ids = set()
    for way in ("os.lstat", "compiled"):
        p = subprocess.run([sys.executable, "-c", _CHILD, args.corpus, way, str(args.repeat)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{way}: failed: {p.stderr.strip()}")
            continue
        r = json.loads(p.stdout)
        ids.add(r["listing_id"])
        runs = ", ".join(f"{w:.2f} s / {c:.2f} CPU-s" for w, c in r["runs"])
        load = "" if r["load"] is None else f"  (load {r['load'][0]:.2f} s / {r['load'][1]:.2f} CPU-s)"
        print(f"{way:9} {r['files']} files: {runs}{load}  peak RSS {r['peak_rss_kb'] / 1024:.0f} MB  id {r['listing_id']}")
    if len(ids) > 1:
        sys.exit("the two ways listed different files or stats")


if __name__ == "__main__":
    main()

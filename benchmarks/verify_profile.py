"""Where verification's time goes: the candidates of an index verified again and again, in CPU seconds.

INDEX: an index built with ``--no-verify`` (``simdoc pairs CORPUS --index INDEX
--no-verify``), so that its verified-pairs table is empty. The script runs
``simdoc pairs --index INDEX -t T`` once in this process to learn the pairs
the verify stage compares (a run given no corpus keeps no verified pairs),
then calls :func:`simdoc.stages.verify.verify_pairs` on them ROUNDS times
with ``--jobs`` 1 and 2, printing wall and CPU seconds (this process and its
workers) and a digest of the Jaccards (the same for every jobs), and, with
one job, the CPU seconds of its parts: the re-reads (open, fstat, read,
close and the BLAKE2b check: :func:`simdoc.corpus.plain.read_again_into`),
the shingling kernel (:func:`simdoc.bytesign.sets64_spans`: decode, window
hashes, sort and fold), the merge of the pairs
(:func:`simdoc.similarity.span_sums`), and the rest (Python). CPU time, not
wall time, decides on a shared machine.

    PYTHONPATH=$PWD python benchmarks/verify_profile.py INDEX [--threshold 0.8] [--rounds 3]

Measured (issue 32, c100k: 26,729 pairs, 43,833 documents read, 163 MB;
f5fefc9, 2026-11-27 12:25 UTC, quiet 2-core VM, one job, CPU seconds):

    lone pairs (16,163 pairs, 32,326 files: no set made)
        read again        0.53-0.55   (compiled open/fstat/read/close, BLAKE2b check)
        pair_sums_spans   0.99-1.01   (decode, two-seed MurmurHash3, one counting table)
    the others (10,566 pairs, 11,507 files)
        read again        0.21-0.22
        sets64_spans      0.42-0.44   (decode, hash, sort and fold)
        span_sums         0.16-0.18   (the merge)
    rest                  0.32-0.36   (Python: units, chunks, places and paths)
    all, one job          2.63-2.75; two jobs: 1.57-1.77 s wall, the same CPU split evenly
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import resource
import sys
import time

import numpy as np


def cpu() -> float:
    """CPU seconds of this process and of its waited-for children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def candidates(index: str, threshold: float):
    """The reader and the pairs the verify stage of ``simdoc pairs --index INDEX`` compares."""
    import simdoc.stages.results as results
    from simdoc.cli import main

    seen = []
    real = results.verify_pairs

    def record(reader, left, right, *args, **kwargs):
        seen.append((reader, np.array(left), np.array(right)))
        return real(reader, left, right, *args, **kwargs)

    results.verify_pairs = record
    argv, sys.argv = sys.argv, ["simdoc", "pairs", "--index", index, "-t", str(threshold), "-j", "1"]
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            main()
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        sys.argv, results.verify_pairs = argv, real
    if not seen:
        sys.exit("no pair was verified from the documents: build INDEX with --no-verify")
    return seen[0][0], np.concatenate([s[1] for s in seen]), np.concatenate([s[2] for s in seen])


def parts_of_one_job(reader, left, right) -> dict[str, float]:
    """CPU seconds of verification's parts in one verify_pairs call with one job."""
    import simdoc.stages.verify as verify
    import simdoc.stages.verify_lone as lone

    spent: dict[str, float] = {}
    parts = {
        (verify, "read_again_into"): "read_again_into", (verify, "sets64_spans"): "sets64_spans",
        (verify, "span_sums"): "span_sums",
        (lone, "read_again_into"): "read_again_into (lone pairs)", (lone, "pair_sums_spans"): "pair_sums_spans (lone pairs)",
    }
    patched = {key: getattr(*key) for key in parts}
    for (module, name), real in patched.items():
        def timed(*a, _real=real, _name=parts[module, name], **k):
            t0 = time.process_time()
            try:
                return _real(*a, **k)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - t0
        setattr(module, name, timed)
    try:
        t0 = time.process_time()
        verify.verify_pairs(reader, left, right, 1)
        spent["all"] = time.process_time() - t0
    finally:
        for (module, name), real in patched.items():
            setattr(module, name, real)
    spent["rest"] = spent["all"] - sum(v for k, v in spent.items() if k != "all")
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("index")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from simdoc.stages.reread import reader_of
    from simdoc.stages.verify import verify_pairs
    from simdoc.store.loaded import open_index

    _, left, right = candidates(args.index, args.threshold)
    loaded = open_index(args.index)
    print(f"{len(left)} pairs, {len(np.unique(np.concatenate([left, right])))} documents", file=sys.stderr)
    for jobs in (1, 2):
        for _ in range(args.rounds):
            reader = reader_of(loaded)
            t0, c0 = time.perf_counter(), cpu()
            got = verify_pairs(reader, left, right, jobs)
            t1, c1 = time.perf_counter(), cpu()
            digest = hashlib.sha256(got.set_jaccard.tobytes() + got.bag_jaccard.tobytes() + got.ok.tobytes()).hexdigest()[:16]
            print(f"jobs {jobs}: wall {t1 - t0:.3f} s, CPU {c1 - c0:.3f} s, stale {len(got.stale)}, gone {len(got.gone)}, jaccards {digest}")
    for _ in range(args.rounds):
        spent = parts_of_one_job(reader_of(loaded), left, right)
        print("one job, CPU s: " + ", ".join(f"{k} {v:.3f}" for k, v in spent.items()))


if __name__ == "__main__":
    main()

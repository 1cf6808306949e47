"""Classic MinHash against one-permutation hashing: speed and estimation error.

    python benchmarks/bench_schemes.py [--trials 300] [--num-perm 128]

Speed: signatures of 4,000,000 random shingles in rows of 3,000, one core.
Error: for set pairs of a given union size and Jaccard J, the mean and the
standard deviation of the estimate over `trials` seeds, next to the
binomial standard deviation sqrt(J(1-J)/num_perm) of an ideal MinHash.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simdoc import kernels
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.similarity import estimate_jaccard


def pair(rng: np.random.Generator, union: int, j: float) -> tuple[set, set]:
    inter = int(round(j * union))
    u = rng.choice(2**32, size=union, replace=False)
    only = union - inter
    return set(u[: inter + only // 2].tolist()), set(u[:inter].tolist()) | set(u[inter + only // 2 :].tolist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--num-perm", type=int, default=128)
    args = ap.parse_args()
    kernels.warm_up()
    x = np.random.default_rng(0).integers(0, 2**32, 4_000_000, dtype=np.uint64).astype(np.uint32)
    indptr = np.append(np.arange(0, len(x), 3000, dtype=np.int64), len(x))
    sets = ShingleSets(indptr, x)
    print(f"speed (one core, {len(x):,} shingles, num_perm={args.num_perm}):")
    for scheme in ("classic", "oph"):
        h = MinHasher(args.num_perm, 1, scheme=scheme)
        h.signatures(sets.slice(0, 2))
        best = min(_timed(h, sets) for _ in range(3))
        print(f"  {scheme:8s} {len(x) / best / 1e6:8.1f} M shingles/s")
    print(f"\nestimation error over {args.trials} seeds (mean - J, sd; binomial sd):")
    print(f"  {'union':>6} {'J':>5}  {'classic':>18}  {'oph':>18}  {'binomial':>8}")
    rng = np.random.default_rng(7)
    for union in (20, 100, 1000, 5000):
        for j in (0.5, 0.8):
            row = []
            for scheme in ("classic", "oph"):
                est = []
                for t in range(args.trials):
                    a, b = pair(rng, union, j)
                    sig = MinHasher(args.num_perm, t + 1, scheme=scheme).signatures(ShingleSets.from_sets([a, b]))
                    est.append(estimate_jaccard(sig[0], sig[1]))
                est = np.array(est)
                row.append(f"{est.mean() - j:+.4f}, {est.std():.4f}")
            binom = np.sqrt(j * (1 - j) / args.num_perm)
            print(f"  {union:>6} {j:>5}  {row[0]:>18}  {row[1]:>18}  {binom:8.4f}")


def _timed(h: MinHasher, sets: ShingleSets) -> float:
    t0 = time.perf_counter()
    h.signatures(sets)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Exact Jaccard truth for the benchmarks.

Shingling is the reference one in bench_common.py (lowercase, whitespace
runs collapsed to one space, stripped, character k-shingles, k = 5).

Library use (run_bench.py imports these):

    exact_counts(corpus, pairs)  -> {(a, b): (intersection, union)}
    exact_jaccard(corpus, pairs) -> {(a, b): jaccard}
    brute_force(corpus, min_jaccard=0.8) -> [(a, b, inter, union), ...]
        every pair of documents with Jaccard >= min_jaccard, for corpora of
        up to a few thousand documents (cost grows with n^2).

Command line:

    python benchmarks/truth.py all CORPUS --out truth.tsv [--min-jaccard 0.8]
    python benchmarks/truth.py score CORPUS PAIRS.tsv --out scored.tsv
    python benchmarks/truth.py stats CORPUS [--random-pairs 2000]
    python benchmarks/truth.py selfcheck CORPUS [--docs 150]

Output TSV columns: doc_a, doc_b, jaccard, intersection, union.

How shingle sets are held: every k-shingle is turned into an integer
without loss. When all of a document's characters are below U+1000, the
k code points are packed 12 bits each into one int64 (k <= 5 fits in 60
bits), which is a one-to-one code; other documents' shingles get ids from an
interning table (offset by 2**60, so the two kinds never collide). A
document is then a sorted numpy array of unique codes, and
|A & B| is np.intersect1d. ``shingle_set`` in bench_common.py is the plain
Python definition; ``selfcheck`` compares both on real files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Iterable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (MANIFEST_NAME, at_least, list_docs, normalize, ordered,  # noqa: E402
                          read_doc, read_pairs_tsv, shingle_set, write_pairs_tsv)

_PACK_BITS = 12
_INTERN_BASE = 1 << 60
_intern: dict[str, int] = {}


def shingle_codes(norm: str, k: int = 5) -> np.ndarray:
    """Sorted unique int64 codes of the k-shingles of a normalised text."""
    n = len(norm)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if n < k:
        return _interned([norm])
    cps = np.frombuffer(norm.encode("utf-32-le"), dtype=np.uint32)
    if k * _PACK_BITS <= 60 and int(cps.max()) < (1 << _PACK_BITS):
        cps = cps.astype(np.int64)
        m = n - k + 1
        codes = cps[:m].copy()
        for i in range(1, k):
            codes <<= _PACK_BITS
            codes |= cps[i:i + m]
        return np.unique(codes)
    return _interned(shingle_set(norm, k))


def _interned(shingles: Iterable[str]) -> np.ndarray:
    ids = []
    for s in shingles:
        v = _intern.get(s)
        if v is None:
            v = _INTERN_BASE + len(_intern)
            _intern[s] = v
        ids.append(v)
    return np.unique(np.array(ids, dtype=np.int64))


def doc_codes(corpus: str | os.PathLike, rel: str, k: int = 5) -> np.ndarray:
    return shingle_codes(normalize(read_doc(corpus, rel)), k)


def exact_counts(corpus: str | os.PathLike, pairs: Iterable[tuple[str, str]], k: int = 5,
                 ) -> dict[tuple[str, str], tuple[int, int]]:
    """{(a, b): (|A & B|, |A | B|)} for the given pairs (a, b ordered a < b)."""
    pairs = sorted({ordered(a, b) for a, b in pairs})
    out: dict[tuple[str, str], tuple[int, int]] = {}
    cache: dict[str, np.ndarray] = {}
    # pairs are sorted by doc_a, so each doc_a is loaded once; doc_b sets are
    # cached too (both ends of most pairs recur).
    for a, b in pairs:
        ca = cache.get(a)
        if ca is None:
            ca = cache[a] = doc_codes(corpus, a, k)
        cb = cache.get(b)
        if cb is None:
            cb = cache[b] = doc_codes(corpus, b, k)
        inter = int(np.intersect1d(ca, cb, assume_unique=True).size)
        out[(a, b)] = (inter, int(ca.size + cb.size - inter))
    return out


def exact_jaccard(corpus: str | os.PathLike, pairs: Iterable[tuple[str, str]], k: int = 5,
                  ) -> dict[tuple[str, str], float]:
    """{(a, b): exact Jaccard} for the given pairs (a, b ordered a < b)."""
    return {p: (i / u if u else 0.0) for p, (i, u) in exact_counts(corpus, pairs, k).items()}


def brute_force(corpus: str | os.PathLike, min_jaccard: float = 0.8, k: int = 5,
                docs: list[str] | None = None, block: int = 512,
                ) -> list[tuple[str, str, int, int]]:
    """All pairs with exact Jaccard >= min_jaccard, by sparse all-pairs products.

    Builds the 0/1 document x shingle matrix X and computes X @ X.T (the
    intersection sizes of every pair) block by block. Exact; cost grows with
    n^2 and with how often common shingles occur, so keep it to a few
    thousand documents.
    """
    from fractions import Fraction

    import scipy.sparse as sp

    if docs is None:
        docs = list_docs(corpus, members=True)
    n = len(docs)
    codes = [doc_codes(corpus, d, k) for d in docs]
    sizes = np.array([c.size for c in codes], dtype=np.int64)
    if n < 2:
        return []
    allc = np.concatenate(codes)
    _, cols = np.unique(allc, return_inverse=True)
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    x = sp.csr_matrix((np.ones(allc.size, dtype=np.int32), cols.ravel(), indptr),
                      shape=(n, int(cols.max()) + 1 if cols.size else 0))
    xt = x.T.tocsr()
    t = Fraction(str(min_jaccard))
    out = []
    for r0 in range(0, n, block):
        c = (x[r0:r0 + block] @ xt).tocoo()
        i = c.row.astype(np.int64) + r0
        j = c.col.astype(np.int64)
        inter = c.data.astype(np.int64)
        keep = j > i
        i, j, inter = i[keep], j[keep], inter[keep]
        union = sizes[i] + sizes[j] - inter
        keep = inter * t.denominator >= t.numerator * union
        for a, b, s, u in zip(i[keep].tolist(), j[keep].tolist(),
                              inter[keep].tolist(), union[keep].tolist()):
            out.append((docs[a], docs[b], s, u))
    if min_jaccard <= 0:
        # pairs sharing no shingle never appear in the sparse product
        seen = {(a, b) for a, b, _, _ in out}
        for a in range(n):
            for b in range(a + 1, n):
                if (docs[a], docs[b]) not in seen:
                    out.append((docs[a], docs[b], 0, int(sizes[a] + sizes[b])))
    out.sort()
    return out


def brute_force_sets(corpus, min_jaccard=0.8, k=5, docs=None):
    """Reference all-pairs with Python sets of shingle strings (small n only)."""
    if docs is None:
        docs = list_docs(corpus, members=True)
    sets = [shingle_set(normalize(read_doc(corpus, d)), k) for d in docs]
    out = []
    for a in range(len(docs)):
        for b in range(a + 1, len(docs)):
            inter = len(sets[a] & sets[b])
            union = len(sets[a]) + len(sets[b]) - inter
            if at_least(inter, union, min_jaccard) or (union == 0 and min_jaccard <= 0):
                out.append((docs[a], docs[b], inter, union))
    return out


def _rows(triples):
    for a, b, inter, union in triples:
        yield a, b, (inter / union if union else 0.0), inter, union


def _histogram(values, edges):
    counts, _ = np.histogram(values, bins=edges)
    return [(f"{lo:.2f}-{hi:.2f}", int(c)) for lo, hi, c in zip(edges[:-1], edges[1:], counts)]


def cmd_stats(corpus: Path, n_random: int, k: int, seed: int) -> dict:
    """Exact Jaccard of the planted pairs and of random (mostly unrelated) pairs."""
    report: dict = {}
    man_path = corpus / MANIFEST_NAME
    edges = np.array([0.0, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.999999, 1.000001])
    if man_path.exists():
        man = json.loads(man_path.read_text(encoding="utf-8"))
        planted = [(p["source"], p["derived"]) for p in man["pairs"]]
        js = exact_jaccard(corpus, planted, k)
        by_kind: dict[str, list[float]] = {}
        for p in man["pairs"]:
            by_kind.setdefault(p["kind"], []).append(js[ordered(p["source"], p["derived"])])
        vals = np.array(list(js.values()))
        report["planted_pairs"] = len(js)
        report["planted_histogram"] = _histogram(vals, edges)
        report["planted_by_kind"] = {kind: {"n": len(v), "min": round(min(v), 4),
                                            "median": round(float(np.median(v)), 4),
                                            "max": round(max(v), 4)}
                                     for kind, v in sorted(by_kind.items())}
        report["planted_ge_0.8"] = int((vals >= 0.8).sum())
        targets = [(p["target"], js[ordered(p["source"], p["derived"])])
                   for p in man["pairs"] if "target" in p]
        if targets:
            err = np.array([j - t for t, j in targets])
            report["edited_exact_minus_target"] = {
                "mean": round(float(err.mean()), 4), "p05": round(float(np.quantile(err, 0.05)), 4),
                "p95": round(float(np.quantile(err, 0.95)), 4)}
    docs = list_docs(corpus, members=True)
    rnd = random.Random(seed)
    pairs = set()
    while len(pairs) < min(n_random, len(docs) * (len(docs) - 1) // 2):
        a, b = rnd.sample(docs, 2)
        pairs.add(ordered(a, b))
    rj = np.array(sorted(exact_jaccard(corpus, pairs, k).values()))
    report["random_pairs"] = len(rj)
    report["random_quantiles"] = {q: round(float(np.quantile(rj, float(q))), 4)
                                  for q in ("0.5", "0.9", "0.99", "0.999")}
    report["random_max"] = round(float(rj.max()), 4)
    report["random_ge_0.2"] = int((rj >= 0.2).sum())
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Exact Jaccard truth for simdoc benchmarks.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_all = sub.add_parser("all", help="brute force all pairs (small corpora)")
    p_all.add_argument("corpus", type=Path)
    p_all.add_argument("--out", required=True)
    p_all.add_argument("--min-jaccard", type=float, default=0.8)
    p_all.add_argument("--method", choices=("sparse", "sets"), default="sparse")
    p_score = sub.add_parser("score", help="exact Jaccard of the pairs in a TSV")
    p_score.add_argument("corpus", type=Path)
    p_score.add_argument("pairs")
    p_score.add_argument("--out", required=True)
    p_stats = sub.add_parser("stats", help="Jaccard of planted pairs and of random pairs")
    p_stats.add_argument("corpus", type=Path)
    p_stats.add_argument("--random-pairs", type=int, default=2000)
    p_stats.add_argument("--seed", type=int, default=0)
    p_check = sub.add_parser("selfcheck", help="compare the numpy codes with Python string sets")
    p_check.add_argument("corpus", type=Path)
    p_check.add_argument("--docs", type=int, default=150)
    for p in (p_all, p_score, p_stats, p_check):
        p.add_argument("--k", type=int, default=5)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    if args.cmd == "all":
        fn = brute_force if args.method == "sparse" else brute_force_sets
        res = fn(args.corpus, args.min_jaccard, args.k)
        n = write_pairs_tsv(args.out, _rows(res))
        print(f"truth: {n} pairs with J >= {args.min_jaccard} in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    elif args.cmd == "score":
        pairs = list(read_pairs_tsv(args.pairs))
        counts = exact_counts(args.corpus, pairs, args.k)
        n = write_pairs_tsv(args.out, _rows((a, b, i, u) for (a, b), (i, u) in sorted(counts.items())))
        print(f"truth: scored {n} pairs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    elif args.cmd == "stats":
        print(json.dumps(cmd_stats(args.corpus, args.random_pairs, args.k, args.seed), indent=1))
    elif args.cmd == "selfcheck":
        docs = list_docs(args.corpus, members=True)[: args.docs]
        a = brute_force(args.corpus, 0.0, args.k, docs=docs)
        b = brute_force_sets(args.corpus, 0.0, args.k, docs=docs)
        ok = sorted(a) == sorted(b)
        print(f"selfcheck on {len(docs)} docs, {len(b)} pairs: {'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

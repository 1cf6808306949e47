#!/usr/bin/env python3
"""The assembled peer: numba kernels + FastSketchLSH, the strongest peer simdoc is measured against.

This is the pipeline a skilled user puts together in an afternoon from the
best libraries, for one run (no index, nothing kept):

1. read documents in batches of --batch (8192): a file's bytes, or the
   lines of a JSON Lines file (one ``json.loads`` per batch, the ``text``
   field, encoded back to UTF-8);
2. one numba kernel (``prange`` over the batch's documents) normalises
   each document's bytes: ASCII lowercase, every run of Python whitespace
   (``str.split()``'s ASCII set: space, \\t \\n \\v \\f \\r and \\x1c-\\x1f)
   collapsed to one space, both ends stripped. A document with any byte
   >= 0x80 (non-ASCII UTF-8, a BOM, invalid bytes) goes instead through the
   reference ``bench_common.normalize`` in Python and becomes an array of
   code points; so the shingles are exactly the reference's code-point
   5-grams for every document, and for ASCII documents (all of the
   generated corpora) byte 5-grams and code-point 5-grams are the same;
3. a second kernel hashes every 5-gram to 64 bits: the 5 code points are
   packed 12 bits each into one integer (rolling) and mixed with
   MurmurHash3's fmix64, a bijection, so two different shingles whose code
   points are all below U+1000 never share a hash (the same packing
   truth.py uses); a window holding a code point >= U+1000 gets a
   polynomial hash with the top bit set instead. A text shorter than k
   gives one shingle, itself; an empty text none (it is left out);
4. FastSketchLSH 1.0.1 (C++, SIMD, OpenMP) sketches the batch:
   ``FastSimilaritySketch(size=128, seed=42).batch_csr(flat, offsets,
   prehashed=True, num_threads=T)``;
5. after the last batch, ``LSH(num_perm=128, num_bands=B, num_threads=T)``
   gets every sketch (``insert``) and is queried with all of them
   (``query(sigs, format="csr")``); B defaults to 16 bands of 8 rows at
   0.8, the same recall-oriented banding the gaoya peer uses;
6. ``assembled``: a candidate pair is reported when the sketch estimate
   (share of equal sketch slots, counted by a numba kernel) is >= the
   threshold. ``assembled-verify``: every candidate is verified instead:
   the candidates' documents are read again in document order, shingled
   and hashed by the same kernels into one buffer reused batch to batch,
   each document's hashes sorted in place (numpy's SIMD sort, one call a
   document on --threads threads: numba's sort was 5x slower) and
   de-duplicated (numba), and each pair's intersection counted by a
   parallel merge over the pairs; a pair is reported when |A & B| / |A | B| >= threshold,
   compared exactly as fractions. Those Jaccards are exact for text below
   U+1000 (see 3) and exact up to a 2^-63 hash collision otherwise.

The kernels are in assembled_kernels.py. ``python benchmarks/assembled.py
selfcheck [CORPUS]`` compares them with the reference definitions.
"""

from __future__ import annotations

import os
import sys
import time
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from assembled_kernels import (K_MAX, PACK_BITS, Workspace, compact,  # noqa: E402
                               count_distinct, count_equal, hash_batch, hash_shingles,
                               intersect_counts, read_batch, sort_each)
from bench_common import normalize  # noqa: E402

# --------------------------------------------------------------------------
# the run


def run_assembled(root: str, docs: list[str], args, st, info: dict, verify: bool) -> list[tuple]:
    """Pairs (i, j, estimate[, jaccard]) over docs' indices; see the module docstring."""
    import importlib.metadata as md

    import numba
    from FastSketchLSH import LSH, FastSimilaritySketch

    from peers import recall_bands  # noqa: E402 - the shared banding rule

    if not 1 <= args.k <= K_MAX:
        raise SystemExit(f"assembled: --k must be 1..{K_MAX} (k code points packed {PACK_BITS} bits each)")
    threads = args.threads
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    seed = 42 if args.seed is None else args.seed
    bands = args.bands or recall_bands(args.num_perm, args.threshold)
    if args.num_perm % bands:
        raise SystemExit("assembled: --bands must divide --num-perm")
    batch = args.batch
    info.update(bands=bands, rows=args.num_perm // bands, threads=threads, seed=seed, batch=batch,
                verify=verify, fastsketchlsh=md.version("fastsketchlsh"), numba=numba.__version__,
                shingles="code-point k-grams (ASCII documents: byte k-grams, the same)")
    pc = time.perf_counter
    sketcher = FastSimilaritySketch(size=args.num_perm, seed=seed)
    sigs = np.empty((len(docs), args.num_perm), dtype=np.uint64)
    ids = np.empty(len(docs), dtype=np.int64)  # sketch row -> document index
    nshingles = np.empty(len(docs), dtype=np.int64)  # sketch row -> its shingles, repeats counted
    ws = Workspace()
    nrows = 0
    for b0 in range(0, len(docs), batch):
        names = docs[b0:b0 + batch]
        t0 = pc()
        raws, is_file = read_batch(root, names)
        t1 = pc()
        flat, offsets = hash_batch(raws, is_file, args.k, ws)
        del raws
        t2 = pc()
        counts = np.diff(offsets)
        keep = np.flatnonzero(counts > 0)  # an empty document has no shingles: never a candidate
        indptr = np.append(offsets[:-1][keep], offsets[-1]).astype(np.uint64)
        if keep.size:
            sigs[nrows:nrows + keep.size] = sketcher.batch_csr(flat, indptr, prehashed=True,
                                                                num_threads=threads)
            ids[nrows:nrows + keep.size] = keep + b0
            nshingles[nrows:nrows + keep.size] = counts[keep]
            nrows += keep.size
        st.add("read", t1 - t0)
        st.add("normalise+hash", t2 - t1)
        st.add("sketch", pc() - t2)
    sigs = sigs[:nrows]
    info["empty_docs"] = len(docs) - nrows
    t0 = pc()
    lsh = LSH(num_perm=args.num_perm, num_bands=bands, num_threads=threads)
    lsh.insert(sigs)
    t1 = pc()
    cflat, cptr = lsh.query(sigs, format="csr")
    row = np.repeat(np.arange(nrows, dtype=np.int64), np.diff(cptr.astype(np.int64)))
    col = cflat.astype(np.int64)
    upper = col > row
    a, b = row[upper], col[upper]
    del row, col, upper, cflat, cptr, lsh
    st.add("lsh_insert", t1 - t0)
    st.add("lsh_query", pc() - t1)
    info["candidates"] = int(a.size)
    t0 = pc()
    equal = np.empty(a.size, dtype=np.int64)
    count_equal(sigs, a, b, equal)
    est = equal / args.num_perm
    t = Fraction(str(args.threshold))
    st.add("estimate", pc() - t0)
    if not verify:
        keep = np.flatnonzero(equal * t.denominator >= t.numerator * args.num_perm)
        return list(zip(ids[a[keep]].tolist(), ids[b[keep]].tolist(), est[keep].tolist()))
    del sigs
    inter, union = verify_pairs(root, docs, ids, nshingles[:nrows], a, b, args.k, batch, threads,
                                ws, st)
    keep = np.flatnonzero((union > 0) & (inter * t.denominator >= t.numerator * union))
    jac = inter[keep] / union[keep]
    return list(zip(ids[a[keep]].tolist(), ids[b[keep]].tolist(), est[keep].tolist(), jac.tolist()))


def verify_pairs(root, docs, ids, nshingles, a, b, k, batch, threads, ws, st,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Exact (|A & B|, |A | B|) of every candidate (sketch rows a, b), the documents read again."""
    pc = time.perf_counter
    t0 = pc()
    need = np.unique(np.concatenate([a, b]))  # sketch rows, so in document order
    sizes = np.empty(need.size, dtype=np.int64)
    starts = np.empty(need.size, dtype=np.int64)
    # the first pass counted each document's shingles: room for all of them, allocated once
    allh = np.empty(int(nshingles[need].sum()), dtype=np.uint64)
    total = 0
    t_read = t_hash = t_sort = 0.0
    for c0 in range(0, need.size, batch):
        names = [docs[i] for i in ids[need[c0:c0 + batch]].tolist()]
        t1 = pc()
        raws, is_file = read_batch(root, names)
        t2 = pc()
        flat, offsets = hash_batch(raws, is_file, k, ws)
        del raws
        t3 = pc()
        sort_each(flat, offsets, threads)
        nuniq = np.empty(len(names), dtype=np.int64)
        count_distinct(flat, offsets, nuniq)
        dest = np.empty(len(names), dtype=np.int64)
        dest[0] = total
        np.cumsum(nuniq[:-1], out=dest[1:])
        dest[1:] += total
        compact(flat, offsets, nuniq, allh, dest)
        sizes[c0:c0 + len(names)] = nuniq
        starts[c0:c0 + len(names)] = dest
        total += int(nuniq.sum())
        t_read += t2 - t1
        t_hash += t3 - t2
        t_sort += pc() - t3
    pa = np.searchsorted(need, a)
    pb = np.searchsorted(need, b)
    t1 = pc()
    inter = np.empty(a.size, dtype=np.int64)
    intersect_counts(allh, starts, sizes, pa, pb, inter)
    union = sizes[pa] + sizes[pb] - inter
    st.add("verify_read", t_read)
    st.add("verify_hash", t_hash)
    st.add("verify_sort+unique", t_sort)
    st.add("verify_intersect", pc() - t1)
    st.add("verify_other", (t1 - t0) - t_read - t_hash - t_sort)
    return inter, union


# --------------------------------------------------------------------------
# self-check against the reference definitions


HOSTILE = ["", " ", "a", "ab cd", "abcd", "abcde", "  Hello\tWORLD \n\n  again  ",
           "x\x1cy\x1dz\x1e\x1f  w\x0bv\x0cu\ru", "\x00abc\x00def", "Ünïcödé ÀÉÎ straße İstanbul",
           "\ufeffbom first", "ǅ ǈ ﬁ ẞ", "\u00a0nbsp\u2003em\u3000ideo\u2028line\x85nel",
           "漢字かなカナ한국어 emoji 😀😀😀 mixed ascii", "ab\udcffcd", "ΑΒΓΔΕ αβγδε"]


def selfcheck(root: str | None, docs: list[str], k: int) -> int:
    """Kernel shingle hashes against the reference shingle strings: same counts, same sets' sizes."""
    from bench_common import read_doc, shingle_list

    cases: list[tuple[str, bytes, bool]] = [(repr(t), t.encode("utf-8", "surrogatepass"), False)
                                            for t in HOSTILE]
    cases.append(("invalid utf-8", b"abc\xff\xfe d\xc3(  E", True))
    cases.append(("file bom", "\ufeffWith BOM".encode(), True))
    if root is not None:
        raws, is_file = read_batch(root, docs)
        cases += [(d, r, f) for d, r, f in zip(docs, raws, is_file)]
    flat, offsets = hash_batch([c[1] for c in cases], [c[2] for c in cases], k)
    bad = 0
    for n, (name, raw, is_file) in enumerate(cases):
        if root is not None and n >= len(cases) - len(docs):
            text = read_doc(root, name)
        else:
            text = raw.decode("utf-8", "replace")
            if is_file and text.startswith("\ufeff"):
                text = text[1:]
        ref = shingle_list(normalize(text), k)
        got = flat[offsets[n]:offsets[n + 1]]
        # same length, and equal shingles <=> equal hashes (distinct shingles, distinct hashes)
        pos_ref = {s: i for i, s in enumerate(ref)}
        pos_got = {h: i for i, h in enumerate(got.tolist())}
        same = len(got) == len(ref) and all(pos_ref[s] == pos_got[h] for s, h in zip(ref, got.tolist()))
        if not same:
            bad += 1
            print(f"MISMATCH {name}: {len(ref)} reference shingles, {len(got)} hashes", file=sys.stderr)
    # the code-point path hashes ASCII text exactly as the byte path does
    for text in ("hello world, again", "abc"):
        b = np.frombuffer(text.encode(), dtype=np.uint8)
        f8, f32 = (np.empty(max(1, len(text) - k + 1), dtype=np.uint64) for _ in range(2))
        one = np.zeros(1, dtype=np.int64)
        ln = np.array([len(text)], dtype=np.int64)
        hash_shingles(b, one, ln, one, f8, k)
        hash_shingles(b.astype(np.uint32), one, ln, one, f32, k)
        if not np.array_equal(f8, f32):
            bad += 1
            print(f"MISMATCH byte and code-point paths differ on {text!r}", file=sys.stderr)
    print(f"selfcheck: {len(cases)} documents, {bad} mismatches")
    return 1 if bad else 0


def main(argv=None) -> int:
    import argparse

    from bench_common import list_docs

    ap = argparse.ArgumentParser(description="Check the assembled peer's kernels against the reference.")
    ap.add_argument("cmd", choices=["selfcheck"])
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args(argv)
    docs = list_docs(args.corpus, members=True)[:args.docs] if args.corpus else []
    return selfcheck(args.corpus, docs, args.k)


if __name__ == "__main__":
    sys.exit(main())

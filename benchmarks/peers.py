#!/usr/bin/env python3
"""Run a peer MinHash-LSH library end to end on a corpus and write its pairs.

    python benchmarks/peers.py {assembled|assembled-verify|datasketch|rensa|gaoya}
        CORPUS OUT.tsv [--threshold 0.8] [--num-perm 128] [--k 5] [--seed S]
        [--bands B] [--threads 2]

OUT.tsv gets one line per reported pair: ``doc_a<TAB>doc_b<TAB>estimated``
(paths relative to CORPUS with forward slashes, doc_a < doc_b), where
``estimated`` is the library's MinHash estimate and every pair reported has
estimate >= threshold: that is what a user of the library gets, nothing is
verified against the texts. ``assembled-verify`` verifies every candidate
instead and writes ``doc_a<TAB>doc_b<TAB>estimated<TAB>jaccard``, as simdoc
does, keeping the pairs whose exact Jaccard is >= threshold. Wall time per
stage goes to stderr, and a final ``peers-json: {...}`` line on stderr
carries the same numbers.

A document is a file, or a line of a JSON Lines file named ``REL/#LINE``
as simdoc names it (bench_common.py).

assembled, assembled-verify
    numba kernels normalise and hash code-point 5-grams, FastSketchLSH 1.0.1
    sketches and bands them; see assembled.py. --threads sets both numba's
    and FastSketchLSH's threads, --batch defaults to 8192 documents there,
    --seed to 42.

Every peer uses the reference shingling (bench_common.py): UTF-8 text,
lowercase, whitespace runs collapsed to one space, stripped, character
k-shingles. For datasketch and rensa the shingles are cut in Python, by
default with a numpy strided view (``shingle_list_np``: same strings, about
4x faster than a list comprehension), so that the peers' Python side is not
needlessly slow; ``--shingler plain`` uses the list comprehension instead.
gaoya cuts them itself, in Rust, from the normalised text.

datasketch (2.x)
    Shingles are deduplicated into a set and hashed with mmh3 (32-bit,
    unsigned, seed 0); the integers are fed to ``MinHash.update_batch`` with
    ``hashfunc=int`` (an identity on Python ints, so datasketch does not
    re-hash them; its default is SHA-1 of bytes, which would be far slower).
    Each document's MinHash is a ``copy()`` of one prototype, as
    ``MinHash.bulk`` does, so the permutations are built once.
    ``MinHashLSH(threshold, num_perm)`` picks its own bands unless --bands is
    given. Every document is inserted, then every document is queried;
    candidate pairs are scored with ``MinHash.jaccard``.

rensa (0.5)
    ``RMinHash`` objects only take str/bytes tokens (rensa hashes them itself
    in Rust); integer hashes are accepted only by the digest-matrix
    functions, whose matrices ``RMinHashLSH`` can index but not query by key.
    So rensa gets the shingle strings (a list with repeats, which it allows)
    and hashes them with its own hash: this is rensa's fast path, and it is
    at least as favourable to rensa as mmh3 would be. Sketches are built
    with ``RMinHash.from_token_sets`` in batches of --batch documents,
    inserted with ``RMinHashLSH.insert_many``, all queried with
    ``query_all``, and candidates scored with ``RMinHash.jaccard``.
    ``RMinHashLSH`` needs the number of bands, which must divide num_perm;
    by default it is chosen by the same criterion datasketch uses (least
    equally weighted false-positive + false-negative area) over the
    divisors of num_perm: 8 bands of 16 rows for 128 permutations at 0.8.

gaoya (0.2)
    ``MinHashStringIndex(hash_size=32, analyzer="char", ngram_range=(k, k),
    lowercase=False)`` gets the normalised text (already lowercased, in
    Python, so that case folding is the reference's) and shingles it in
    Rust: its character windows are over code points, the same strings as
    the reference's. Documents go in batches of --batch to
    ``par_bulk_insert_docs``, and each batch is then queried with
    ``par_bulk_query(..., return_similarity=True)``; since every earlier
    batch is already indexed, each pair is found when its later document is
    queried, and the texts never need to be held or read twice. Both calls
    shingle and sketch on rayon's pool of --threads threads
    (RAYON_NUM_THREADS); the Python API has no query by id, so every
    document is sketched twice, once to insert it and once to query it.
    gaoya's query keeps the band candidates whose estimate is >= threshold
    and does not report how many candidates there were. Its permutations
    are fixed (seed 3 inside gaoya; --seed does not apply). A text shorter
    than k gives no shingles in gaoya (an all-zero signature), so such a
    text goes in as one token, itself, as in the reference; an empty text
    is left out. Bands must divide num_perm: gaoya's own chooser would take
    21 bands of 6 rows (126 hashes) at 0.8, so the default is instead the
    divisor whose S-curve threshold (1/b)^(1/r) is the highest one below the
    threshold (``recall_bands``): 16 bands of 8 rows for 128 permutations at
    0.8, the setting PERFORMANCE.md measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (corpus_bytes, iter_batches, list_docs,  # noqa: E402
                          normalize, ordered, read_doc, shingle_list, shingle_list_np)


class Stages:
    """Accumulated wall time per stage."""

    def __init__(self):
        self.t: dict[str, float] = {}

    def add(self, name: str, dt: float) -> None:
        self.t[name] = self.t.get(name, 0.0) + dt


def lsh_error_area(bands: int, rows: int, threshold: float, steps: int = 2000) -> float:
    """0.5 * false-positive area + 0.5 * false-negative area of (bands, rows)."""
    def p(s):
        return 1.0 - (1.0 - s ** rows) ** bands

    def integrate(f, a, b):
        h = (b - a) / steps
        return h * (0.5 * f(a) + sum(f(a + i * h) for i in range(1, steps)) + 0.5 * f(b))

    fp = integrate(p, 0.0, threshold)
    fn = integrate(lambda s: 1.0 - p(s), threshold, 1.0)
    return 0.5 * fp + 0.5 * fn


def divisor_bands(num_perm: int, threshold: float) -> int:
    best = None
    for b in range(2, num_perm + 1):
        if num_perm % b:
            continue
        err = lsh_error_area(b, num_perm // b, threshold)
        if best is None or err < best[0]:
            best = (err, b)
    return best[1]


def recall_bands(num_perm: int, threshold: float) -> int:
    """Bands whose S-curve threshold (1/b)^(1/r) is the highest one below threshold.

    Only divisors of num_perm are tried, so that b * r = num_perm. Banding
    with the curve's steep part just below the threshold favours recall:
    16 bands of 8 rows for 128 permutations at 0.8 (a pair at J = 0.8 becomes
    a candidate with probability 0.95).
    """
    best = (-1.0, num_perm)
    for b in range(1, num_perm + 1):
        if num_perm % b:
            continue
        t = (1.0 / b) ** (b / num_perm)
        if best[0] < t < threshold:
            best = (t, b)
    return best[1]


SHINGLERS = {"numpy": shingle_list_np, "plain": shingle_list}


def load_shingles(root: str, rel: str, k: int, as_set: bool, shingler: str):
    norm = normalize(read_doc(root, rel))
    sh = SHINGLERS[shingler](norm, k)
    return set(sh) if as_set else sh


def run_datasketch(root, docs, args, st: Stages, info: dict):
    import mmh3
    from datasketch import MinHash, MinHashLSH

    mmh3_hash = mmh3.hash
    proto = MinHash(num_perm=args.num_perm, seed=args.seed, hashfunc=int)
    if args.bands:
        lsh = MinHashLSH(num_perm=args.num_perm, params=(args.bands, args.num_perm // args.bands))
    else:
        lsh = MinHashLSH(threshold=args.threshold, num_perm=args.num_perm)
    info.update(bands=lsh.b, rows=lsh.r, scheme=getattr(proto, "scheme", "legacy"))
    pc = time.perf_counter
    mhs = []
    for i, rel in enumerate(docs):
        t0 = pc()
        sh = load_shingles(root, rel, args.k, True, args.shingler)
        t1 = pc()
        hv = [mmh3_hash(s, 0, False) for s in sh]
        t2 = pc()
        m = proto.copy()
        m.update_batch(hv)
        t3 = pc()
        lsh.insert(i, m, check_duplication=False)
        t4 = pc()
        mhs.append(m)
        st.add("read+shingle", t1 - t0)
        st.add("mmh3", t2 - t1)
        st.add("minhash", t3 - t2)
        st.add("lsh_insert", t4 - t3)
    pairs = []
    n_cand = 0
    t_query = t_est = 0.0
    for i, m in enumerate(mhs):
        t0 = pc()
        cand = [j for j in lsh.query(m) if j > i]
        t1 = pc()
        n_cand += len(cand)
        for j in cand:
            e = m.jaccard(mhs[j])
            if e >= args.threshold:
                pairs.append((i, j, e))
        t_query += t1 - t0
        t_est += pc() - t1
    st.add("lsh_query", t_query)
    st.add("estimate", t_est)
    info["candidates"] = n_cand
    return pairs


def run_rensa(root, docs, args, st: Stages, info: dict):
    from rensa import RMinHash, RMinHashLSH

    bands = args.bands or divisor_bands(args.num_perm, args.threshold)
    lsh = RMinHashLSH(args.threshold, args.num_perm, bands)
    info.update(bands=bands, rows=args.num_perm // bands)
    pc = time.perf_counter
    mhs = []
    for start, batch in ((i * args.batch, b) for i, b in enumerate(iter_batches(docs, args.batch))):
        t0 = pc()
        tokens = [load_shingles(root, rel, args.k, False, args.shingler) for rel in batch]
        t1 = pc()
        ms = RMinHash.from_token_sets(tokens, args.num_perm, args.seed)
        t2 = pc()
        lsh.insert_many(ms, start)
        t3 = pc()
        mhs.extend(ms)
        st.add("read+shingle", t1 - t0)
        st.add("minhash", t2 - t1)
        st.add("lsh_insert", t3 - t2)
        del tokens
    t0 = pc()
    cands = lsh.query_all(mhs)
    st.add("lsh_query", pc() - t0)
    t0 = pc()
    pairs = []
    n_cand = 0
    for i, cand in enumerate(cands):
        m = mhs[i]
        for j in cand:
            if j > i:
                n_cand += 1
                e = m.jaccard(mhs[j])
                if e >= args.threshold:
                    pairs.append((i, j, e))
    st.add("estimate", pc() - t0)
    info["candidates"] = n_cand
    return pairs


def run_gaoya(root, docs, args, st: Stages, info: dict):
    # rayon sizes its global pool from this variable when the pool is first
    # used, so it must be set before gaoya does any work.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    from gaoya.minhash import MinHashStringIndex

    bands = args.bands or recall_bands(args.num_perm, args.threshold)
    rows = args.num_perm // bands
    index = MinHashStringIndex(hash_size=32, jaccard_threshold=args.threshold,
                               num_bands=bands, band_size=rows, analyzer="char",
                               lowercase=False, ngram_range=(args.k, args.k),
                               id_container=args.id_container)
    raw = index.minhash_index  # the Rust class; its *_tokens methods serve short texts
    info.update(bands=bands, rows=rows, threads=args.threads, hash_size=32,
                id_container=args.id_container, shingler="gaoya's own (Rust)")
    pc = time.perf_counter
    pairs = []
    n_short = 0
    for start, batch in ((i * args.batch, b) for i, b in enumerate(iter_batches(docs, args.batch))):
        t0 = pc()
        ids: list[int] = []
        texts: list[str] = []
        short: list[tuple[int, str]] = []
        for n, rel in enumerate(batch, start):
            norm = normalize(read_doc(root, rel))
            if len(norm) >= args.k:
                ids.append(n)
                texts.append(norm)
            elif norm:
                # gaoya's char shingler yields nothing for a text shorter than
                # k (an all-zero signature); the reference gives one shingle,
                # the whole text, so that one shingle goes in as a token.
                short.append((n, norm))
            # an empty text has no shingles and is similar to nothing: skipped
        t1 = pc()
        index.par_bulk_insert_docs(ids, texts)
        for n, norm in short:
            raw.insert_tokens(n, [norm])
        t2 = pc()
        # Every document of this batch and of the earlier ones is indexed, so
        # querying the batch now finds each pair (j < i) when i is queried.
        found = index.par_bulk_query(texts, return_similarity=True) if texts else []
        found += [raw.query_tokens_return_similarity([norm]) for _, norm in short]
        for i, hits in zip(ids + [n for n, _ in short], found):
            for j, e in hits:
                if j < i:
                    pairs.append((j, i, e))
        st.add("read+normalise", t1 - t0)
        st.add("minhash+insert", t2 - t1)
        st.add("minhash+query", pc() - t2)
        n_short += len(short)
        del texts
    info["short_docs"] = n_short
    # gaoya filters the band candidates by its own estimate inside query and
    # does not report how many there were.
    info["candidates"] = None
    return pairs


def run_assembled(root, docs, args, st: Stages, info: dict):
    import assembled
    return assembled.run_assembled(root, docs, args, st, info, verify=False)


def run_assembled_verify(root, docs, args, st: Stages, info: dict):
    import assembled
    return assembled.run_assembled(root, docs, args, st, info, verify=True)


PEERS = {"datasketch": run_datasketch, "rensa": run_rensa, "gaoya": run_gaoya,
         "assembled": run_assembled, "assembled-verify": run_assembled_verify}
# the distribution whose version is recorded for each peer
DISTRIBUTION = {"assembled": "fastsketchlsh", "assembled-verify": "fastsketchlsh"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Run a peer (assembled, datasketch, rensa or gaoya) end to end on a corpus.")
    ap.add_argument("peer", choices=sorted(PEERS))
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--k", type=int, default=5, help="shingle length in characters")
    ap.add_argument("--seed", type=int, default=None,
                    help="MinHash seed (default 1; the assembled peers: 42)")
    ap.add_argument("--bands", type=int, default=0,
                    help="LSH bands (rows = num_perm // bands); default: the library's / the "
                         "datasketch criterion")
    ap.add_argument("--shingler", choices=sorted(SHINGLERS), default="numpy",
                    help="how the Python side cuts shingles: 'numpy' (strided view, the "
                         "default, about 4x faster) or 'plain' (list comprehension)")
    ap.add_argument("--batch", type=int, default=None,
                    help="documents per sketch batch (default: 1000 for rensa and gaoya, "
                         "8192 for the assembled peers)")
    ap.add_argument("--threads", type=int, default=2,
                    help="gaoya: rayon threads (RAYON_NUM_THREADS); assembled: numba's and "
                         "FastSketchLSH's threads")
    ap.add_argument("--id-container", choices=("set", "vec", "smallvec"), default="vec",
                    help="gaoya: bucket type; 'vec' is the one its docs advise when "
                         "nothing is removed")
    args = ap.parse_args(argv)
    assembled = args.peer.startswith("assembled")
    if args.seed is None and not assembled:
        args.seed = 1
    if args.batch is None:
        args.batch = 8192 if assembled else 1000
    if args.bands and args.num_perm % args.bands and args.peer != "datasketch":
        ap.error(f"{args.peer} needs --bands to divide --num-perm")

    pc = time.perf_counter
    t_start = pc()
    st = Stages()
    t0 = pc()
    docs = list_docs(args.corpus, members=True)
    st.add("list", pc() - t0)
    info = {"peer": args.peer, "docs": len(docs), "threshold": args.threshold,
            "num_perm": args.num_perm, "k": args.k, "shingler": args.shingler}
    try:
        import importlib.metadata as md
        info["version"] = md.version(DISTRIBUTION.get(args.peer, args.peer))
    except Exception:  # pragma: no cover - version is informative only
        pass
    pairs = PEERS[args.peer](args.corpus, docs, args, st, info)
    t0 = pc()
    pairs.sort()
    with open(args.out, "w", encoding="utf-8", newline="\n") as fh:
        for i, j, *values in pairs:
            a, b = ordered(docs[i], docs[j])  # JSON Lines members: index order is not name order
            fh.write("\t".join([a, b] + [f"{v:.6f}" for v in values]) + "\n")
    st.add("write", pc() - t0)
    total = pc() - t_start
    info["pairs"] = len(pairs)
    info["stages_s"] = {k: round(v, 3) for k, v in st.t.items()}
    info["total_s"] = round(total, 3)
    for name, v in st.t.items():
        print(f"{args.peer}: {name:<13} {v:9.2f} s", file=sys.stderr)
    mb = corpus_bytes(args.corpus, docs) / 1e6
    print(f"{args.peer}: {'total':<13} {total:9.2f} s  ({len(docs)} docs, {mb:.1f} MB, "
          f"{info['candidates'] if info['candidates'] is not None else 'unreported'} candidate "
          f"pairs, {len(pairs)} pairs >= {args.threshold}, "
          f"bands={info['bands']} rows={info['rows']})", file=sys.stderr)
    print("peers-json: " + json.dumps(info), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

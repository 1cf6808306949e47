"""Scoring for run_bench.py: recall, precision and reported-Jaccard checks against exact truth.

The truth is every pair with exact Jaccard >= T: found by brute force when
the corpus has at most --brute-max documents, otherwise the union of all
tools' output pairs (plus, if .MANIFEST.json is present, every pair inside a
planted cluster) re-scored exactly (truth.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import MANIFEST_NAME, at_least, ordered  # noqa: E402

SIMDOC_TOOLS = ("simdoc", "simdoc-base")
# tools whose pair file has an exact Jaccard column (the 2nd after the names), checked here
JACCARD_TOOLS = SIMDOC_TOOLS + ("assembled-verify",)




def j_band(inter: int, union: int, threshold: float) -> str:
    if inter == union:
        return "1.0"
    j = inter / union
    edges = [threshold] + [e for e in (0.85, 0.9, 0.95) if e > threshold] + [1.0]
    for lo, hi in zip(edges[:-1], edges[1:]):
        if j < hi:
            return f"[{lo:.2f},{hi:.2f})"
    return "1.0"


def planted_cluster_pairs(manifest: Path) -> set[tuple[str, str]]:
    """All pairs inside each planted cluster (a source and its derived documents).

    Siblings derived from one source are often near-duplicates of each other
    too; the manifest lists only (source, derived), so they are added here.
    """
    clusters: dict[str, list[str]] = {}
    for p in json.loads(manifest.read_text(encoding="utf-8")).get("pairs", []):
        clusters.setdefault(p["source"], [p["source"]]).append(p["derived"])
    out = set()
    for members in clusters.values():
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                if members[i] != members[j]:
                    out.add(ordered(members[i], members[j]))
    return out


def score(args, corpus: Path, docs: list[str], outputs: dict[str, dict]) -> dict:
    from truth import brute_force, exact_counts

    t0 = time.perf_counter()
    docset = set(docs)
    union_pairs: set[tuple[str, str]] = set()
    for pairs in outputs.values():
        union_pairs.update(pairs)
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    info: dict = {}
    if len(docs) <= args.brute_max:
        info["method"] = "brute force over all pairs"
        for a, b, inter, union in brute_force(corpus, args.threshold, args.k, docs=docs):
            counts[(a, b)] = (inter, union)
        truth = set(counts)
    else:
        info["method"] = ("union of tools' output pairs and of all pairs within planted "
                          "clusters (if .MANIFEST.json), re-scored exactly")
        cand = {p for p in union_pairs if p[0] in docset and p[1] in docset}
        man = corpus / MANIFEST_NAME
        if man.exists():
            planted = planted_cluster_pairs(man)
            info["planted_cluster_pairs"] = len(planted)
            cand.update(p for p in planted if p[0] in docset and p[1] in docset)
        info["pairs_scored"] = len(cand)
        counts = exact_counts(corpus, cand, args.k)
        truth = {p for p, (i, u) in counts.items() if at_least(i, u, args.threshold)}
    info["truth_pairs"] = len(truth)
    bands: dict[str, int] = {}
    for p in truth:
        key = j_band(*counts[p], args.threshold)
        bands[key] = bands.get(key, 0) + 1
    info["truth_by_jaccard"] = dict(sorted(bands.items()))

    per_tool = {}
    for tool, pairs in outputs.items():
        out = set(pairs)
        unknown = sum(1 for a, b in out if a not in docset or b not in docset)
        true_found = out & truth
        found_bands: dict[str, int] = {}
        for p in true_found:
            key = j_band(*counts[p], args.threshold)
            found_bands[key] = found_bands.get(key, 0) + 1
        r = {
            "output_pairs": len(out),
            "true_pairs_found": len(true_found),
            "false_positives": len(out) - len(true_found),
            "recall": len(true_found) / len(truth) if truth else None,
            "precision": len(true_found) / len(out) if out else None,
            "recall_by_jaccard": {k: round(found_bands.get(k, 0) / v, 4)
                                  for k, v in info["truth_by_jaccard"].items()},
            "unknown_docs_pairs": unknown,
        }
        if tool in JACCARD_TOOLS:
            # the tool's own exact Jaccard column, checked against ours
            bad = 0
            checked = 0
            for p, extra in pairs.items():
                if len(extra) >= 2 and p in counts:
                    try:
                        j = float(extra[1])
                    except ValueError:
                        continue
                    i, u = counts[p]
                    checked += 1
                    if abs(j - i / u) > 1e-4:
                        bad += 1
            r["reported_jaccard_checked"] = checked
            r["reported_jaccard_mismatches"] = bad
        per_tool[tool] = (r, true_found)
    checks = {}
    if "simdoc" in per_tool:
        simdoc_true = per_tool["simdoc"][1]
        for tool, (_, tf) in per_tool.items():
            if tool in SIMDOC_TOOLS:
                continue
            missing = len(tf - simdoc_true)
            checks[tool] = {"peer_true_pairs": len(tf), "missing_from_simdoc": missing,
                            "allowed": int(0.01 * len(tf)),
                            "ok": missing <= 0.01 * len(tf)}
    info["seconds"] = round(time.perf_counter() - t0, 2)
    return {"truth": info, "tools": {t: r for t, (r, _) in per_tool.items()},
            "superset_check": checks}

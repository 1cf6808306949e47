"""Look documents up in an index without adding them: "have we seen this before?".

Each query document is shingled with the index's parameters, signed with the
index's stored hash family and banded with its b and r; documents sharing a
bucket in any band are candidates, scored by estimate and verified exactly
against the stored shingle sets. Nothing in the index changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from simdoc.errors import UsageError
from simdoc.lsh import band_keys
from simdoc.pipeline import open_index
from simdoc.shingling import ShingleSets, ShingleSpec, shingle_texts
from simdoc.similarity import pair_estimates, pair_jaccard
from simdoc.store import IndexStore


@dataclass
class Match:
    query: str
    doc: str
    estimated: float
    jaccard: float | None


def _sorted_band_keys(keys: np.ndarray, buckets: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(keys[t])[np.asarray(buckets[t])] for t in range(keys.shape[0])]


def query_documents(
    index: str | os.PathLike,
    documents: list[tuple[str, str]],
    threshold: float | None = None,
    verify: bool = True,
    all_candidates: bool = False,
) -> tuple[list[Match], list[str]]:
    """Near-duplicates in the index of each (query id, text).

    Returns the matches, ordered by query (as given), then similarity
    descending, then document id, and warnings (e.g. a query with no shingles).
    The threshold defaults to the one the index was banded for.
    """
    store = IndexStore(index)
    with store.reading():
        loaded = open_index(index)
        shingle = loaded.stage("shingle")
        ix = loaded.stage("index")
        loaded.stage("signature")
        t = threshold if threshold is not None else ix["params"].get("threshold")
        if t is None or not 0.0 < float(t) <= 1.0:
            raise UsageError(f"--threshold must be in (0, 1], got {t!r}")
        p = shingle["params"]
        spec = ShingleSpec(p["unit"], p["k"], p["lowercase"])
        qsets = shingle_texts([text for _, text in documents], spec)
        qsigs = loaded.hasher().signatures(qsets)
        bands, rows = ix["params"]["bands"], ix["params"]["rows"]
        qkeys = band_keys(qsigs, bands, rows)
        keys, buckets = loaded.bands()
        sorted_keys = _sorted_band_keys(keys, buckets)
        sigs = loaded.signatures()
        sets = loaded.shingle_sets()
        doc_ids = loaded.doc_ids()
        rep = loaded.representatives()
        folded = bool(np.any(rep != np.arange(len(rep))))
        matches: list[Match] = []
        warnings: list[str] = []
        for q, (qid, _) in enumerate(documents):
            if qsets.sizes()[q] == 0:
                warnings.append(f"{qid}: no shingles (empty or too short for the index's shingles); nothing to match")
                continue
            found = _candidates(qkeys[:, q], sorted_keys, buckets)
            if not len(found):
                continue
            if folded:  # buckets hold one representative per group of exact copies
                found = np.flatnonzero(np.isin(rep, found))
            matches.extend(_score(qid, q, qsets, qsigs, found, sets, sigs, doc_ids, t, verify, all_candidates))
    return matches, warnings


def _candidates(qkey: np.ndarray, sorted_keys: list[np.ndarray], buckets: np.ndarray) -> np.ndarray:
    found = []
    for t, key in enumerate(qkey):
        lo = np.searchsorted(sorted_keys[t], key, side="left")
        hi = np.searchsorted(sorted_keys[t], key, side="right")
        if hi > lo:
            found.append(np.asarray(buckets[t][lo:hi]))
    return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)


def _score(qid, q, qsets, qsigs, found, sets, sigs, doc_ids, threshold, verify, all_candidates) -> list[Match]:
    est = pair_estimates(np.vstack([qsigs[q : q + 1], np.asarray(sigs[found])]), np.zeros(len(found), np.int64), np.arange(1, len(found) + 1))
    jac = None
    if verify:
        # One small CSR: the query row, then the candidates' stored rows.
        rows = [qsets.row(q)] + [np.asarray(sets.row(int(j))) for j in found]
        counts = [qsets.row_counts(q)] + [np.asarray(sets.row_counts(int(j))) for j in found]
        indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
        local = ShingleSets(indptr, np.concatenate(rows), np.concatenate(counts))
        jac = pair_jaccard(local, np.zeros(len(found), np.int64), np.arange(1, len(found) + 1))
    score = jac if verify else est
    keep = np.ones(len(found), bool) if all_candidates else score >= threshold
    order = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-round(float(score[i]), 4), doc_ids[found[i]]))
    return [
        Match(qid, doc_ids[found[i]], float(est[i]), None if jac is None else float(jac[i])) for i in order
    ]


"""Look documents up in an index without adding them: "have we seen this before?".

Each query document is shingled with the index's parameters, signed with the
index's stored hash family and banded with its b and r; documents sharing a
bucket in any band are candidates, scored by estimate and verified exactly:
the query and the candidate documents, re-read from the corpus (index format 3
keeps no shingle sets), are shingled to 64-bit hashes and compared. A
candidate whose document changed since it was indexed, or is gone, is skipped
with a warning naming it. Nothing in the index changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from simdoc.lsh import band_keys, check_threshold
from simdoc.params import Threshold, choose_threshold
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import shingle_texts
from simdoc.similarity import pair_estimates, pair_jaccard
from simdoc.stages.reread import reader_of
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import open_index


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
) -> tuple[list[Match], list[str], Threshold]:
    """Near-duplicates in the index of each (query id, text).

    Returns the matches, ordered by query (as given), then similarity
    descending, then document id; warnings (e.g. a query with no shingles,
    or a candidate document that changed since it was indexed); and the
    threshold used: the one asked, else the index's, else the default
    (:func:`simdoc.params.choose_threshold`).
    """
    store = IndexStore(index)
    with store.reading():
        loaded = open_index(index)
        loaded.stage("shingle")
        ix = loaded.stage("index")
        # Buckets or signatures of another build would name other documents: a mix of two
        # builds, never an answer of either (a query changes nothing, so it cannot rebuild them).
        loaded.check_built_from("signature", "index")
        chosen = choose_threshold(None if threshold is None else check_threshold(threshold), "set", ix["params"])
        t = chosen.value
        spec = loaded.spec()
        texts = [text for _, text in documents]
        # Signatures from the window stream, as the build computes them; 64-bit sets to verify.
        stream = shingle_texts(texts, spec, form="stream")
        qsigs = loaded.hasher().signatures(stream)
        empty = np.diff(stream.indptr) == 0
        qsets = shingle_texts(texts, spec, form="sets64") if verify else None
        bands, rows = ix["params"]["bands"], ix["params"]["rows"]
        qkeys = band_keys(qsigs, bands, rows)
        keys, buckets = loaded.bands()
        sorted_keys = _sorted_band_keys(keys, buckets)
        sigs = loaded.signatures()
        doc_ids = loaded.doc_ids()
        rep = loaded.representatives()
        folded = bool(np.any(rep != np.arange(len(rep))))
        looked_up = _DocumentSets(reader_of(loaded), rep, doc_ids) if verify else None
        matches: list[Match] = []
        warnings: list[str] = []
        for q, (qid, _) in enumerate(documents):
            if empty[q]:
                warnings.append(f"{qid}: no shingles (empty or too short for the index's shingles); nothing to match")
                continue
            found = _candidates(qkeys[:, q], sorted_keys, buckets)
            if not len(found):
                continue
            if folded:  # buckets hold one representative per group of exact copies
                found = np.flatnonzero(np.isin(rep, found))
            matches.extend(_score(qid, q, qsets, qsigs, found, looked_up, sigs, doc_ids, t, verify, all_candidates))
        if looked_up is not None:
            warnings.extend(looked_up.warnings)
    return matches, warnings, chosen


class _DocumentSets:
    """Candidate documents' 64-bit shingle sets, re-read from the corpus once per run.

    Exact copies share their representative's text (same identity), so only
    the representative is read. A document that changed since it was indexed,
    or is gone, gives None and one warning naming it.
    """

    def __init__(self, reader, rep: np.ndarray, doc_ids: list[str]) -> None:
        self.reader = reader
        self.rep = rep
        self.doc_ids = doc_ids
        self.sets: dict[int, ShingleSets | None] = {}
        self.warnings: list[str] = []

    def get(self, docs: np.ndarray) -> list[ShingleSets | None]:
        heads = [int(self.rep[d]) for d in docs]
        missing = sorted({h for h in heads if h not in self.sets})
        if missing:
            got = self.reader.read_sets(missing)
            for h in missing:
                row = got.get(h)
                self.sets[h] = row
                if row is None:
                    self.warnings.append(
                        f"{self.doc_ids[h]}: changed or gone since it was indexed; not compared "
                        "(run `simdoc pairs CORPUS` to update the index)"
                    )
        return [self.sets[h] for h in heads]


def _candidates(qkey: np.ndarray, sorted_keys: list[np.ndarray], buckets: np.ndarray) -> np.ndarray:
    found = []
    for t, key in enumerate(qkey):
        lo = np.searchsorted(sorted_keys[t], key, side="left")
        hi = np.searchsorted(sorted_keys[t], key, side="right")
        if hi > lo:
            found.append(np.asarray(buckets[t][lo:hi]))
    return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)


def _score(qid, q, qsets, qsigs, found, looked_up, sigs, doc_ids, threshold, verify, all_candidates) -> list[Match]:
    jac = None
    if verify:
        rows = looked_up.get(found)
        readable = np.array([r is not None for r in rows], dtype=bool)
        found = found[readable]
        rows = [r for r in rows if r is not None]
        # One small CSR: the query row, then the candidates' re-read rows.
        parts = [qsets.slice(q, q + 1)] + rows
        indptr = np.concatenate([[0], np.cumsum([len(r.data) for r in parts])])
        data = np.concatenate([r.data.astype(np.uint64) for r in parts])
        counts = np.concatenate([np.asarray(r.counts, dtype=np.uint32) for r in parts])
        local = ShingleSets(indptr, data, counts)
        jac = pair_jaccard(local, np.zeros(len(found), np.int64), np.arange(1, len(found) + 1))
    if not len(found):
        return []
    est = pair_estimates(np.vstack([qsigs[q : q + 1], np.asarray(sigs[found])]), np.zeros(len(found), np.int64), np.arange(1, len(found) + 1))
    score = jac if verify else est
    keep = np.ones(len(found), bool) if all_candidates else score >= threshold
    order = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-round(float(score[i]), 4), doc_ids[found[i]]))
    return [
        Match(qid, doc_ids[found[i]], float(est[i]), None if jac is None else float(jac[i])) for i in order
    ]

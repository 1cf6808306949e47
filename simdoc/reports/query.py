"""Look documents up in an index without adding them: "have we seen this before?".

Each query document is shingled with the index's parameters, signed with the
index's stored hash family and banded with its b and r; documents sharing a
bucket in any band are candidates, scored by estimate and verified exactly:
the query and the candidate documents, re-read from the corpus (index format 3
keeps no shingle sets), are shingled to 64-bit hashes and compared. A
candidate whose document changed since it was indexed, or is gone, is skipped
with a warning naming it. Nothing in the index changes.

Queries stream (:func:`iter_matches`): they are taken a batch at a time and
their matches given before the next batch is read, so that memory is bounded
by a batch and the candidates' cache, not by the number of queries. Nor by
their length: a query longer than :data:`simdoc.corpus.streaming.LARGE_CHARS`
is signed a piece at a time, and a pair too large to compare whole (a long
query, or a long candidate) is compared in passes over hash ranges, as
`pairs` verifies one (:func:`simdoc.similarity.jaccard_in_passes`). A
query given as a :class:`simdoc.corpus.long_text.LongText` (a long file, or
long text on stdin) is never held: it is read again, a chunk at a time, to
be signed and for each pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from simdoc import kernel_choice
from simdoc.corpus import streaming
from simdoc.corpus.long_text import LongText
from simdoc.corpus.streaming import Part, sets64_of_texts, windows_in_pieces
from simdoc.lsh import DEFAULT_RECALL, band_keys, candidate_probability, check_threshold
from simdoc.minhash import SignatureFold
from simdoc.params import Threshold, choose_threshold
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import jaccard_in_passes, pair_estimates, pair_jaccard, pair_passes
from simdoc.stages.reread import reader_of
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import LoadedIndex, open_index


@dataclass
class Match:
    query: str
    doc: str
    estimated: float
    jaccard: float | None


def _sorted_band_keys(keys: np.ndarray, buckets: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(keys[t])[np.asarray(buckets[t])] for t in range(keys.shape[0])]


# Queries are shingled, signed and scored a batch at a time, and their matches given as
# each batch is done, so that memory does not grow with the number of queries: a batch
# holds at most this many characters of query text (or BATCH_QUERIES queries), and the
# shingling workspace it needs, ~50 bytes a character.
BATCH_BYTES = 1 << 20
BATCH_QUERIES = 1024
# The candidates' re-read shingle sets are kept across batches up to this many bytes
# (a document that many queries find is read once), then dropped, oldest first.
CACHE_BYTES = 64 << 20


def query_documents(
    index: str | os.PathLike,
    documents: Iterable[tuple[str, str | LongText]],
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
    :func:`iter_matches` gives the same matches as they are found.
    """
    warnings: list[str] = []
    chosen: list[Threshold] = []
    matches = list(iter_matches(
        index, documents, threshold, verify, all_candidates, warn=warnings.append, chosen=chosen.append,
    ))
    return matches, warnings, chosen[0]


def iter_matches(
    index: str | os.PathLike,
    documents: Iterable[tuple[str, str | LongText]],
    threshold: float | None = None,
    verify: bool = True,
    all_candidates: bool = False,
    *,
    warn: Callable[[str], None],
    chosen: Callable[[Threshold], None] | None = None,
) -> Iterator[Match]:
    """The matches of :func:`query_documents`, in its order, a batch of queries at a time.

    ``documents`` is consumed as the matches are taken: memory is bounded by
    a batch (:data:`BATCH_BYTES`) and the candidates' cache
    (:data:`CACHE_BYTES`), whatever the number of queries. Warnings go to
    ``warn`` as they arise; the threshold used goes to ``chosen`` before the
    first match. The index is held for reading (its files are not deleted
    under it) until the iterator is exhausted or closed.
    """
    store = IndexStore(index)
    with store.reading():
        looked = _Lookup(open_index(index), threshold, verify, all_candidates, warn)
        if chosen is not None:
            chosen(looked.chosen)
        for batch in _batches(documents):
            yield from looked.batch(batch)


def _batches(documents: Iterable[tuple[str, str | LongText]]) -> Iterator[list[tuple[str, str | LongText]]]:
    batch: list[tuple[str, str | LongText]] = []
    size = 0
    for qid, text in documents:
        batch.append((qid, text))
        size += len(text) if isinstance(text, str) else 0  # a LongText is not held
        if size >= BATCH_BYTES or len(batch) >= BATCH_QUERIES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class _Lookup:
    """One index opened for queries: its bands sorted by key, signatures, ids and exact copies."""

    def __init__(self, loaded: LoadedIndex, threshold: float | None, verify: bool, all_candidates: bool, warn) -> None:
        loaded.stage("shingle")
        ix = loaded.stage("index")
        # Buckets or signatures of another build would name other documents: a mix of two
        # builds, never an answer of either (a query changes nothing, so it cannot rebuild them).
        loaded.check_built_from("signature", "index")
        self.chosen = choose_threshold(None if threshold is None else check_threshold(threshold), "set", ix["params"])
        self.threshold, self.verify, self.all_candidates, self.warn = self.chosen.value, verify, all_candidates, warn
        self.spec = loaded.spec()
        self.hasher = loaded.hasher()
        self.bands, self.rows = ix["params"]["bands"], ix["params"]["rows"]
        # A query cannot band the index again for a lower threshold: say what its banding misses.
        p = float(candidate_probability(self.threshold, self.bands, self.rows))
        if threshold is not None and p < min(DEFAULT_RECALL, candidate_probability(ix["params"]["threshold"], self.bands, self.rows)):
            warn(
                f"the index at {loaded.store.path} is banded for J={ix['params']['threshold']:g} (bands={self.bands} rows={self.rows}): "
                f"a match at J={self.threshold:g} is found with probability {p:.3f}; `simdoc index --index "
                f"{loaded.store.path} --threshold {self.threshold:g}` bands it for that threshold"
            )
        keys, self.buckets = loaded.bands()
        self.sorted_keys = _sorted_band_keys(keys, self.buckets)
        self.sigs = loaded.signatures()
        self.doc_ids = loaded.docs().ids  # each made when asked for: a few a query (all: ~1 s at 10^6 records)
        self.rep = loaded.representatives()
        self.folded = bool(np.any(self.rep != np.arange(len(self.rep))))
        self.looked_up = _DocumentSets(reader_of(loaded), self.rep, self.doc_ids, warn) if verify else None
        self.sizes = loaded.docs().columns["size"] if verify else None

    def batch(self, documents: list[tuple[str, str | LongText]]) -> Iterator[Match]:
        texts = [text for _, text in documents]
        # A few queries (a file looked up from a shell loop) are signed by the numpy reference,
        # numba not loaded (simdoc.kernel_choice): that load was ~0.7 s of a 1.1 s lookup.
        with kernel_choice.reads(sum(_bytes_of(t) for t in texts)):
            qsigs, n_windows, unread = self._signatures(texts)
            # 64-bit sets to verify, of the queries shingled whole (a long one is compared in passes).
            whole = [q for q, t in enumerate(texts) if _short(t)] if self.verify else []
            qsets = shingle_texts([texts[q] for q in whole], self.spec, form="sets64") if whole else None
            qkeys = band_keys(qsigs, self.bands, self.rows)
        row_of = {q: i for i, q in enumerate(whole)}
        for q, (qid, text) in enumerate(documents):
            if q in unread:  # its reading said why
                continue
            if n_windows[q] == 0:
                self.warn(f"{qid}: no shingles (empty or too short for the index's shingles); nothing to match")
                continue
            found = _candidates(qkeys[:, q], self.sorted_keys, self.buckets)
            if not len(found):
                continue
            if self.folded:  # buckets hold one representative per group of exact copies
                found = np.flatnonzero(np.isin(self.rep, found))
            query = _Query(qid, q, text, int(n_windows[q]), None if q not in row_of else qsets.slice(row_of[q], row_of[q] + 1))
            read = _bytes_of(text) + (int(np.asarray(self.sizes[found]).sum()) if self.verify else 0)
            with kernel_choice.reads(read):  # the query and the candidates it reads again
                matches = _score(
                    query, qsigs, found, self.looked_up, self.sigs, self.doc_ids, self.threshold, self.verify,
                    self.all_candidates, self.spec,
                )
            yield from matches

    def _signatures(self, texts: list[str | LongText]) -> tuple[np.ndarray, np.ndarray, set[int]]:
        """The queries' signatures and window counts, from the window stream as the build computes
        them, and which queries could not be read; a query longer than LARGE_CHARS signed a piece
        at a time (the same bytes), a LongText as it is read."""
        sigs = np.zeros((len(texts), self.hasher.num_perm), dtype=np.uint32)
        n_windows = np.zeros(len(texts), dtype=np.int64)
        unread: set[int] = set()
        short = np.array([q for q, t in enumerate(texts) if _short(t)], dtype=np.int64)
        if len(short):
            stream = shingle_texts([texts[q] for q in short.tolist()], self.spec, form="stream")
            sigs[short] = self.hasher.signatures(stream)
            n_windows[short] = np.diff(stream.indptr)
        for q, text in enumerate(texts):
            if _short(text):
                continue
            fold = SignatureFold(self.hasher)

            def add(data: np.ndarray, _counts: np.ndarray, fold: SignatureFold = fold) -> None:
                fold.add(data)

            if isinstance(text, str):
                windows_in_pieces(text, self.spec, add)
            elif text.shingle(self.spec, "stream", self.warn, sink=add) is None:
                unread.add(q)
                continue
            sigs[q], n_windows[q] = fold.result(), fold.n
        return sigs, n_windows, unread


def _bytes_of(text: str | LongText) -> int:
    """About how many bytes shingling a query reads (a LongText, read as it goes: as many as a large stage)."""
    return len(text) if isinstance(text, str) else kernel_choice.SMALL_BYTES


def _short(text: str | LongText) -> bool:
    """Whether a query is shingled with its batch (else a piece at a time, and compared in passes)."""
    return isinstance(text, str) and len(text) <= streaming.LARGE_CHARS


@dataclass
class _Query:
    """One query being scored: its text, window count and, unless it is long, its 64-bit set."""

    qid: str
    row: int  # its row of the batch's signatures
    text: str | LongText  # a LongText is read again for each pass
    n_windows: int
    set64: ShingleSets | None  # None: too long to hold, compared in passes


class _DocumentSets:
    """Candidate documents' 64-bit shingle sets, re-read from the corpus, kept up to CACHE_BYTES.

    Exact copies share their representative's text (same identity), so only
    the representative is read, while both files keep the stat recorded. A document that changed since it was indexed,
    or is gone, gives None and one warning naming it, once per run.
    """

    def __init__(self, reader, rep: np.ndarray, doc_ids: Sequence[str], warn: Callable[[str], None]) -> None:
        self.reader = reader
        self.rep = rep
        self.doc_ids = doc_ids
        self.warn = warn
        self.sets: dict[int, ShingleSets | None] = {}  # in the order read: the oldest go first
        self.bytes = 0
        self.warned: set[int] = set()

    def jaccards(self, query: _Query, found: np.ndarray, spec: ShingleSpec) -> tuple[np.ndarray, np.ndarray]:
        """Exact set Jaccard of the query with each candidate, and which could be compared.

        A pair too large to compare whole (:func:`simdoc.similarity.pair_passes`), or a query
        too long to hold its set, is compared in passes over hash ranges, as `pairs` verifies
        such a pair: both re-shingled each pass, one range of hashes kept.
        """
        jac = np.zeros(len(found))
        readable = np.ones(len(found), dtype=bool)
        n_shingles = self.reader.table.columns["n_shingles"]
        heads = self._heads(found)
        in_passes = np.array(
            [query.set64 is None or pair_passes(query.n_windows, int(n_shingles[h])) > 1 for h in heads], dtype=bool
        )
        whole = np.flatnonzero(~in_passes)
        if len(whole):
            rows = self.get(found[whole])
            readable[whole] = [r is not None for r in rows]
            rows = [r for r in rows if r is not None]
            # One small CSR: the query row, then the candidates' re-read rows.
            parts = [query.set64] + rows
            indptr = np.concatenate([[0], np.cumsum([len(r.data) for r in parts])])
            data = np.concatenate([r.data.astype(np.uint64) for r in parts])
            counts = np.concatenate([np.asarray(r.counts, dtype=np.uint32) for r in parts])
            local = ShingleSets(indptr, data, counts)
            jac[whole[readable[whole]]] = pair_jaccard(local, np.zeros(len(rows), np.int64), np.arange(1, len(rows) + 1))
        done: dict[int, tuple[float, float] | None] = {}  # exact copies share their representative's passes
        for i in np.flatnonzero(in_passes).tolist():
            h = heads[i]

            def read(part: Part, h: int = h) -> tuple[ShingleSets | None, ShingleSets | None]:
                text = query.text  # a LongText is read again: None if it changed since it was signed
                if isinstance(text, str):
                    mine = sets64_of_texts([text], spec, part)
                else:
                    mine = text.shingle(spec, "sets64", self.warn, part)
                return mine, None if mine is None else self.reader.read_sets([h], part=part).get(h)

            if isinstance(query.text, LongText) and query.text.changed:  # said once; nothing more compared
                readable[i] = False
                continue
            if h not in done:
                known_bad = h in self.sets and self.sets[h] is None
                done[h] = None if known_bad else jaccard_in_passes(read, query.n_windows, int(n_shingles[h]))
            got = done[h]
            if got is None:
                readable[i] = False
                if not (isinstance(query.text, LongText) and query.text.changed):
                    self._unread(h)
            else:
                jac[i] = got[0]
        return jac, readable

    def _heads(self, docs: np.ndarray) -> list[int]:
        """The document to read for each of ``docs``: its representative, unless the stat of the
        copy's file or of its representative's moved since it was indexed (no scan proved them
        unchanged): then itself, so that its own digest decides (see DocumentReader.read_as)."""
        return self.reader.read_as(np.asarray(docs, dtype=np.int64), self.rep).tolist()

    def get(self, docs: np.ndarray) -> list[ShingleSets | None]:
        heads = self._heads(docs)
        missing = sorted({h for h in heads if h not in self.sets})
        if missing:
            self._make_room(set(heads))
            got = self.reader.read_sets(missing)
            for h in missing:
                row = got.get(h)
                if row is not None:  # a copy: a slice would keep the whole read alive
                    row = ShingleSets(row.indptr.copy(), row.data.copy(), row.counts.copy())
                    self.bytes += row.data.nbytes + row.counts.nbytes
                else:
                    self._unread(h)
                self.sets[h] = row
        return [self.sets[h] for h in heads]

    def _unread(self, h: int) -> None:
        """Warn, once per run, that a candidate could not be compared."""
        if h not in self.warned:
            self.warned.add(h)
            self.warn(
                f"{self.doc_ids[h]}: changed or gone since it was indexed; not compared "
                "(run `simdoc pairs CORPUS` to update the index)"
            )

    def _make_room(self, wanted: set[int]) -> None:
        """Drop the oldest sets not ``wanted`` now while the cache holds more than CACHE_BYTES."""
        for h in list(self.sets):
            if self.bytes <= CACHE_BYTES:
                return
            if h in wanted:
                continue
            row = self.sets.pop(h)
            if row is not None:
                self.bytes -= row.data.nbytes + row.counts.nbytes


def _candidates(qkey: np.ndarray, sorted_keys: list[np.ndarray], buckets: np.ndarray) -> np.ndarray:
    found = []
    for t, key in enumerate(qkey):
        lo = np.searchsorted(sorted_keys[t], key, side="left")
        hi = np.searchsorted(sorted_keys[t], key, side="right")
        if hi > lo:
            found.append(np.asarray(buckets[t][lo:hi]))
    return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)


def _score(query: _Query, qsigs, found, looked_up, sigs, doc_ids, threshold, verify, all_candidates, spec) -> list[Match]:
    jac = None
    if verify:
        jac, readable = looked_up.jaccards(query, found, spec)
        found, jac = found[readable], jac[readable]
    if not len(found):
        return []
    q = query.row
    est = pair_estimates(np.vstack([qsigs[q : q + 1], np.asarray(sigs[found])]), np.zeros(len(found), np.int64), np.arange(1, len(found) + 1))
    score = jac if verify else est
    keep = np.ones(len(found), bool) if all_candidates else score >= threshold
    order = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-round(float(score[i]), 4), doc_ids[found[i]]))
    return [
        Match(query.qid, doc_ids[found[i]], float(est[i]), None if jac is None else float(jac[i])) for i in order
    ]

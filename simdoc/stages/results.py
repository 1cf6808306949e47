"""Scored pairs: candidates from the buckets, their estimates and exact Jaccards, in print order.

:func:`score_candidates` turns an index's buckets into the pairs to print;
:class:`PairsResult` holds them with the groups of exact copies, whose pairs
it generates lazily, merged into print order, and the :class:`StageResult`
of each stage the run brought up to date.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from simdoc.buckets import BucketStats, iter_candidates
from simdoc.corpus.objects import still_there
from simdoc.exact import expand_pairs, group_members
from simdoc.lsh import BandingReport
from simdoc.memory import release
from simdoc.params import Threshold
from simdoc.similarity import estimate_rules_out, pair_estimates
from simdoc.stages.common import progress_bar
from simdoc.stages.reread import DocumentReader, reader_of
from simdoc.stages.verify import verify_pairs
from simdoc.store.docnames import Column
from simdoc.store.doctable import Strings
from simdoc.store.verified import VerifiedPairs, pair_keys

if TYPE_CHECKING:
    from tqdm import tqdm

    from simdoc.store.loaded import LoadedIndex


@dataclass
class StageResult:
    stage: str
    built: bool  # False: it was already up to date
    seconds: float = 0.0
    detail: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said on stderr without -q, not warnings (e.g. a default used)
    repeated: list[str] = field(default_factory=list)  # warnings given by an earlier run: --verbose shows them


@dataclass
class Pair:
    doc_a: str
    doc_b: str
    estimated: float
    jaccard: float | None  # None when not verified
    new: str | None = None  # with new_only: which side is new since the last --new report: a, b or both


@dataclass
class PairsResult:
    """Scored pairs, sorted by similarity descending then names, plus run facts."""

    doc_ids: list[str]
    left: np.ndarray
    right: np.ndarray
    estimated: np.ndarray
    jaccard: np.ndarray | None
    threshold: float
    measure: str
    n_candidates: int
    stats: BucketStats
    stages: list[StageResult] = field(default_factory=list)
    banding: BandingReport | None = None
    all_candidates: bool = False
    n_docs: int = 0
    n_skipped: int = 0
    n_damaged: int = 0  # files read only in part, damaged or cut short (simdoc.store.manifest.damaged_files)
    seconds: float = 0.0
    changed: np.ndarray | None = None  # with new_only: per document, added or changed since the last --new report
    groups: list[np.ndarray] = field(default_factory=list)  # exact copies: every pair inside is printed
    group_value: tuple[float, float | None] = (1.0, 1.0)  # (estimated, jaccard) of a pair inside a group
    generation: int = 0  # the index update these pairs come from (see simdoc.stages.pairs.mark_reported)
    build: str = ""  # the docs table's build they come from (the shingle stage's build_id)
    index: object = None  # the index directory they come from
    chosen: Threshold | None = None  # where the threshold comes from (asked, the index's, the default)

    def cut(self) -> str:
        """Which pairs these are, as a summary line says it."""
        if self.all_candidates:
            return "all candidates"
        return self.chosen.describe() if self.chosen is not None else f"{self.measure} jaccard >= {self.threshold:g}"

    def _touched_groups(self) -> list[np.ndarray]:
        """The groups of copies with a pair to print: all of them, or with --new those with a
        member changed (a nightly run of a crawl with none: no Python loop over its copies)."""
        if self.changed is None or not self.groups:
            return self.groups
        if not self.changed.any():
            return []
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        hit = np.logical_or.reduceat(self.changed[np.concatenate(self.groups)], np.cumsum(sizes) - sizes)
        return [g for g, h in zip(self.groups, hit.tolist()) if h]

    def n_group_pairs(self) -> int:
        total = 0
        for g in self._touched_groups():
            m = len(g)
            # With --new: pairs with at least one changed member = all pairs - pairs of unchanged ones.
            u = m if self.changed is None else m - int(np.count_nonzero(self.changed[g]))
            total += m * (m - 1) // 2 - (u * (u - 1) // 2 if self.changed is not None else 0)
        return total

    def __len__(self) -> int:
        return len(self.left) + self.n_group_pairs()

    def _group_pairs(self) -> Iterator[tuple[int, int]]:
        """Pairs inside the groups of exact copies, in (doc_a, doc_b) order, generated lazily."""
        groups = self._touched_groups()
        if not groups:
            return
        group_of = {}
        for g in groups:
            for pos, d in enumerate(g.tolist()):
                group_of[d] = (g, pos)
        for a in sorted(group_of):
            g, pos = group_of[a]
            for b in g[pos + 1 :].tolist():
                if self.changed is None or self.changed[a] or self.changed[b]:
                    yield a, b

    def index_pairs(self) -> Iterator[tuple[int, int, float, float | None]]:
        """(left, right, estimated, jaccard) as document numbers, in print order."""
        est_g, jac_g = self.group_value
        primary = self.jaccard if self.jaccard is not None else self.estimated
        top = float(f"{jac_g if self.jaccard is not None else est_g:.4f}")
        # Scored pairs that print the same value as a pair of copies are merged with them by names.
        n_top = int(np.count_nonzero(as_printed(primary) >= top)) if len(primary) else 0

        def scored(lo: int, hi: int) -> Iterator[tuple]:
            # A slice at a time, as Python numbers (tolist): an element at a time was ~1 us a pair.
            for s in range(lo, hi, _NAMES_AT_ONCE):
                e = min(hi, s + _NAMES_AT_ONCE)
                jac = [None] * (e - s) if self.jaccard is None else self.jaccard[s:e].tolist()
                yield from zip(self.left[s:e].tolist(), self.right[s:e].tolist(), self.estimated[s:e].tolist(), jac)

        copies = ((a, b, est_g, jac_g) for a, b in self._group_pairs())
        yield from heapq.merge(copies, scored(0, n_top), key=lambda r: (r[0], r[1]))
        yield from scored(n_top, len(self.left))

    def __iter__(self) -> Iterator[Pair]:
        for record in self.records():
            yield Pair(*record)

    def records(self) -> Iterator[tuple[str, str, float, float | None, str | None]]:
        """The pairs as :class:`Pair` gives them, as tuples (doc_a, doc_b, estimated, jaccard, new),
        in print order: what the CLI writes (no object a pair)."""
        ids = self.doc_ids
        sides = {(True, False): "a", (False, True): "b", (True, True): "both"}
        rows = self.index_pairs()
        # The names of a chunk of pairs gathered in one go from a stored table (Strings, or
        # format 5's Column): a memory-mapped lookup per name was most of printing 10^5 pairs.
        while chunk := list(itertools.islice(rows, _NAMES_AT_ONCE)):
            a_docs, b_docs = [r[0] for r in chunk], [r[1] for r in chunk]
            if isinstance(ids, (Strings, Column)):
                names = ids.take(np.array(a_docs + b_docs, dtype=np.int64))
                left, right = names[: len(chunk)], names[len(chunk) :]
            else:
                left, right = [ids[a] for a in a_docs], [ids[b] for b in b_docs]
            if self.changed is None:
                new = [None] * len(chunk)
            else:
                new = [sides[k] for k in zip(self.changed[a_docs].tolist(), self.changed[b_docs].tolist())]
            yield from zip(left, right, [r[2] for r in chunk], [r[3] for r in chunk], new)


_NAMES_AT_ONCE = 1 << 12  # pairs whose names are looked up together when they are given

# Candidate pairs scored at once: bounds memory (~64 bytes a pair), and gives verification
# many pairs of a component of the candidate graph at once (see simdoc.stages.verify).
SCORE_PAIRS = 1 << 20


@dataclass
class Scoring:
    """What to compute for candidate pairs and which to keep."""

    threshold: float
    measure: str = "set"
    verify: bool = True
    all_candidates: bool = False
    # Keep pairs with at least one of these documents (--new): a bool per document, or anything
    # that gives one for an array of documents (simdoc.stages.dask_pairs.AddedAfter).
    only_docs: np.ndarray | None = None
    threads: int = 1  # verify on this many processes
    # The index is used without its corpus (no scan proved its files unchanged): a pair from the
    # verified-pairs table is taken only while both files still have the stat recorded; one
    # whose file moved is verified again from the documents (their digest decides).
    recheck: bool = False


@dataclass
class Verifier:
    """Exact Jaccards of candidate pairs: from the verified-pairs table, else from the documents.

    ``stale`` and ``gone`` collect the documents that could not be compared
    (their bytes changed since they were indexed, or they cannot be read):
    their pairs are left out.
    """

    reader: DocumentReader
    table: VerifiedPairs
    identities: np.ndarray
    num_perm: int
    scheme: str
    n_verified: int = 0
    n_cached: int = 0
    stale: set = field(default_factory=set)
    gone: set = field(default_factory=set)
    # A bar on stderr of the pairs read again and compared (the stage that takes longest on
    # templated corpora); its total grows as each batch of candidates brings pairs to verify.
    progress: bool = False
    bar: tqdm | None = None

    @classmethod
    def of_index(cls, loaded: LoadedIndex) -> Verifier:
        """A verifier of ``loaded``'s pairs: its documents, its verified-pairs table, its signature parameters."""
        sig = loaded.stage("signature")["params"]
        return cls(reader_of(loaded), loaded.verified_pairs(), loaded.docs().identities(), sig["num_perm"], sig.get("scheme", "oph"))

    def _bar(self, more: int):
        """The update of the progress bar, its total raised by ``more`` pairs; None without a bar."""
        if not self.progress:
            return None
        if self.bar is None:
            self.bar = progress_bar(more, "verify", True, unit=" pairs")
        else:
            self.bar.total += more
            self.bar.refresh()
        return self.bar.update

    def close(self) -> None:
        """Take the progress bar off stderr (it leaves nothing behind)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def jaccard(self, signatures: np.ndarray, left: np.ndarray, right: np.ndarray, est: np.ndarray, how: Scoring) -> tuple[np.ndarray, np.ndarray]:
        """(jaccard by ``how.measure``, ok) of the pairs; 0 where the estimate rules the threshold out."""
        jac = np.zeros(len(left))
        ok = np.ones(len(left), dtype=bool)
        todo = np.ones(len(left), dtype=bool)
        if how.measure == "set" and not how.all_candidates and len(left):
            # Only the pairs whose estimate is low enough can be ruled out: their documents' bins
            # are counted, not those of every candidate (in the main process, before verification).
            every = np.ones(len(left), dtype=bool)
            low = np.flatnonzero(estimate_rules_out(est, every, every, self.num_perm, "classic", how.threshold))
            if len(low) and self.scheme != "classic":
                # Per document of these pairs only: a scoring task on a cluster holds a few of n.
                docs = np.unique(np.concatenate([left[low], right[low]]))
                dense = filled_bins(signatures, docs) == self.num_perm
                dense_l, dense_r = dense[np.searchsorted(docs, left[low])], dense[np.searchsorted(docs, right[low])]
                low = low[estimate_rules_out(est[low], dense_l, dense_r, self.num_perm, self.scheme, how.threshold)]
            todo[low] = False
        idx = np.flatnonzero(todo)
        keys = pair_keys(self.identities, left[idx], right[idx])
        found, cached = self.table.lookup(keys)
        if how.recheck and found.any():
            self._recheck(left[idx], right[idx], found)
        col = 0 if how.measure == "set" else 1
        jac[idx[found]] = cached[found, col]
        self.n_cached += int(found.sum())
        miss = idx[~found]
        if len(miss):
            got = verify_pairs(self.reader, left[miss], right[miss], how.threads, progress=self._bar(len(miss)))
            self.n_verified += int(got.ok.sum())
            jac[miss] = got.set_jaccard if col == 0 else got.bag_jaccard
            ok[miss[~got.ok]] = False
            self.stale |= got.stale
            self.gone |= got.gone
            good = got.ok
            self.table.add(keys[~found][good], np.stack([got.set_jaccard[good], got.bag_jaccard[good]], axis=1))
        return jac, ok

    def recheck_copies(self, groups: list[np.ndarray]) -> list[np.ndarray]:
        """The groups of exact copies without the members whose text is no longer the one indexed.

        A pair of copies is printed unread (the two texts had one digest). Without a scan
        (``pairs --index`` alone) a member whose file's stat moved since it was indexed is
        read again, as a stored pair of it is verified again (:meth:`_recheck`): one that is
        not the text indexed goes into ``stale`` (``gone`` if it cannot be read) and out of
        its group, so that its pairs are left out, as the warning says, not printed at 1."""
        if not groups:
            return groups
        docs = np.concatenate(groups)
        moved = docs[self.reader.moved(docs)]
        bad: set[int] = set()
        for a in range(0, len(moved), RECHECK_COPIES):  # a few documents' sets held at a time
            _, rows = self.reader.read_batch(moved[a : a + RECHECK_COPIES].tolist())
            bad.update(d for d, r in rows.items() if r < 0)
        if not bad:
            return groups
        stale = {d for d in bad if still_there(self.reader.path_of(d))}
        self.stale |= stale
        self.gone |= bad - stale
        out = [g[~np.isin(g, np.fromiter(bad, dtype=np.int64))] for g in groups]
        return [g for g in out if len(g) > 1]

    def _recheck(self, left: np.ndarray, right: np.ndarray, found: np.ndarray) -> None:
        """Unmark (in ``found``) the stored pairs of a document whose file's stat moved since it
        was indexed (a stat per file, once per run): they are verified again instead."""
        at = np.flatnonzero(found)
        docs = np.unique(np.concatenate([left[at], right[at]]))
        moved = docs[self.reader.moved(docs)]  # a file's stat asked once a run (DocumentReader.moved)
        if len(moved):
            found[at[np.isin(left[at], moved) | np.isin(right[at], moved)]] = False


def score_pairs(
    loaded: LoadedIndex, left: np.ndarray, right: np.ndarray, how: Scoring, members=None, verifier: Verifier | None = None
) -> tuple[tuple, int]:
    """Expand folded copies, filter, estimate, verify and threshold one batch of candidate pairs.

    Returns ((left, right, est, jac), number of candidates) ; ``jac`` is None
    without verification. Used by the local engine and by each Dask partition.
    """
    if members is not None:
        left, right = expand_pairs(left, right, members)
    if how.only_docs is not None:
        mine = how.only_docs[left] | how.only_docs[right]
        left, right = left[mine], right[mine]
    n_candidates = len(left)
    signatures = loaded.signatures()
    est = pair_estimates(signatures, left, right)
    jac = None
    if how.verify:
        if verifier is None:
            verifier = Verifier.of_index(loaded)
        jac, ok = verifier.jaccard(signatures, left, right, est, how)
        left, right, est, jac = left[ok], right[ok], est[ok], jac[ok]
    if not how.all_candidates:
        keep = (jac if how.verify else est) >= how.threshold
        left, right, est = left[keep], right[keep], est[keep]
        jac = jac[keep] if how.verify else None
    return (left, right, est, jac), n_candidates


def filled_bins(signatures: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Distinct values in each given signature row: a lower bound of its OPH bins filled by the
    document's own shingles (a bin filled by densification repeats another bin's value)."""
    out = np.empty(len(docs), dtype=np.int64)
    for a in range(0, len(docs), FILLED_BINS_ROWS):
        # A block of rows at a time, its memory-mapped pages let go after it (simdoc.memory):
        # the documents of 10^5 candidates touch most pages of a 512 MB matrix.
        rows = np.sort(np.asarray(signatures[docs[a : a + FILLED_BINS_ROWS]]), axis=1)
        out[a : a + FILLED_BINS_ROWS] = 1 + np.count_nonzero(rows[:, 1:] != rows[:, :-1], axis=1)
        release(signatures)
    return out


RECHECK_COPIES = 64  # copies whose file moved, read again at once by Verifier.recheck_copies
FILLED_BINS_ROWS = 1 << 11  # sorted rows: a few MB of the matrix mapped (see simdoc.similarity.RELEASE_ROWS)


def in_print_order(parts: list[tuple], verify: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Concatenate scored batches and sort them as printed: similarity (4 decimals) descending, then names."""
    parts = [p for p in parts if len(p[0])]
    if parts:
        left = np.concatenate([p[0] for p in parts])
        right = np.concatenate([p[1] for p in parts])
        est = np.concatenate([p[2] for p in parts])
        jac = np.concatenate([p[3] for p in parts]) if verify else None
    else:
        left = right = np.zeros(0, np.int64)
        est = np.zeros(0)
        jac = np.zeros(0) if verify else None
    # Document numbers follow sorted ids, so ordering by number orders by name.
    order = np.lexsort((right, left, -as_printed(jac if verify else est)))
    return left[order], right[order], est[order], (jac[order] if verify else None)


def as_printed(values: np.ndarray) -> np.ndarray:
    """The values as the writers print them (f"{x:.4f}"), to sort by. np.round scales by 10^4
    inexactly: 83/800 (0.103749999... in binary) prints 0.1037 but np.round gives 0.1038."""
    out = np.round(values, 4)
    near = np.flatnonzero(np.abs(values * 1e4 % 1.0 - 0.5) < 1e-6)  # only a near-half can differ
    out[near] = [float(f"{v:.4f}") for v in values[near].tolist()]
    return out


def score_candidates(
    loaded: LoadedIndex,
    threshold: float,
    measure: str = "set",
    verify: bool = True,
    all_candidates: bool = False,
    only_docs: np.ndarray | None = None,
    threads: int = 1,
    verifier: Verifier | None = None,
    recheck: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, int, BucketStats]:
    """Candidates from the buckets, scored; kept if above the threshold (or all).

    ``only_docs`` (bool per document) keeps only pairs with at least one such document;
    ``threads`` verify batches of pairs at once; ``recheck``: see :class:`Scoring`.
    """
    rep = loaded.representatives()
    # --new: the buckets of the documents added or changed alone (a representative stands for its copies).
    touching = None if only_docs is None else np.bincount(rep[only_docs], minlength=len(rep)) > 0
    # A --new run that finds nothing new prints no pair: it reads no bucket and no signature (a
    # quiet night at 10^5 documents: ~45 ms), and says the largest buckets the index stage kept.
    if touching is not None and not touching.any() and (quiet := loaded.bucket_stats()) is not None:
        return (*in_print_order([], verify), 0, quiet)
    keys, buckets = loaded.bands()
    members = group_members(rep)
    loaded.signatures()  # loaded (and so checked) even when every pair is a pair of folded copies
    if verify and verifier is None:
        verifier = Verifier.of_index(loaded)
    how = Scoring(threshold, measure, verify, all_candidates, only_docs, threads, recheck)
    stats = BucketStats()
    parts: list[tuple] = []
    n_candidates = 0
    pending: list[tuple[np.ndarray, np.ndarray]] = []
    held = 0

    def score() -> None:
        nonlocal n_candidates, held
        # The band keys and buckets read at random so far leave this process's resident size
        # before verification forks (they stay in the page cache): ~200 MB at 10^6 documents.
        release(keys, buckets)
        left = np.concatenate([p[0] for p in pending])
        right = np.concatenate([p[1] for p in pending])
        scored, n = score_pairs(loaded, left, right, how, members, verifier)
        parts.append(scored)
        n_candidates += n
        pending.clear()
        held = 0

    # Bands yield a few thousand pairs each; scoring them together gives the verifying
    # threads enough batches to share.
    for left, right in iter_candidates(keys, buckets, stats, touching=touching):
        pending.append((left, right))
        held += len(left)
        if held >= SCORE_PAIRS:
            score()
    if pending:
        score()
    return (*in_print_order(parts, verify), n_candidates, stats)



"""What an index holds: documents, shingles per document, and the sizes of its LSH buckets.

``simdoc stats`` describes a built index. A few huge buckets mean exact
copies or boilerplate, and quadratic candidate work; the summary says which
band keys they are and whether the signatures are current. Everything here
computes data or returns lines of plain text; nothing prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from simdoc.lsh import s_curve_threshold
from simdoc.output import escape_name
from simdoc.store.manifest import skipped_counts
from simdoc.wording import count

if TYPE_CHECKING:
    from simdoc.store.loaded import LoadedIndex


@dataclass(frozen=True)
class LargeBucket:
    """A shared bucket, listed once however many bands hold the same documents together.

    ``band`` is the first band that holds it and ``bands`` how many do (a
    group of exact copies is one bucket in every band). ``copies`` is True
    when all its documents are exact copies of one another.
    """

    size: int
    band: int
    sample: str  # the member with the smallest document number
    bands: int = 1
    copies: bool = False


@dataclass(frozen=True)
class BucketSummary:
    """The LSH buckets of an index (documents with no shingles are in none).

    Attributes
    ----------
    bands, rows : int
    threshold : float
    current : bool
        False if the buckets were built from older signatures.
    n_buckets : int
        Buckets over all bands, singletons included.
    n_shared : int
        Buckets that hold two or more documents.
    histogram : tuple of (low, high, count)
        Buckets per size range: 1, 2, 3-4, 5-8, 9-16, ...; empty ranges left out.
    largest : tuple of LargeBucket
        The largest shared buckets, by size descending, then band, then sample.
    signatures_current : bool
        False if the signatures themselves were built from older shingles
        (``simdoc shingle`` ran on its own): ``simdoc signature`` comes first.
    explicit : bool
        True if bands and rows were chosen by hand (``--bands``/``--rows``);
        without a ``--threshold`` too, ``threshold`` is the S-curve midpoint.
    """

    bands: int
    rows: int
    threshold: float
    current: bool
    n_buckets: int
    n_shared: int
    histogram: tuple[tuple[int, int, int], ...]
    largest: tuple[LargeBucket, ...]
    signatures_current: bool = True
    explicit: bool = False

    @property
    def banding(self) -> str:
        """The banding in words: for which threshold, or by hand (then the S-curve midpoint)."""
        if not self.explicit:
            return f"bands={self.bands} rows={self.rows} (threshold {self.threshold:g})"
        midpoint = s_curve_threshold(self.bands, self.rows)
        # By hand without --threshold, the stored threshold is the midpoint itself (6 decimals).
        given = "" if abs(self.threshold - round(midpoint, 6)) < 1e-9 else f" for threshold {self.threshold:g}"
        return f"bands={self.bands} rows={self.rows} (chosen by hand{given}; S-curve midpoint {midpoint:.3f})"

    @property
    def next_step(self) -> str:
        """The command that brings the buckets up to date."""
        if not self.signatures_current:
            return "`simdoc signature --index ...`, then `simdoc index --index ...`"
        return "`simdoc index --index ...`"


@dataclass(frozen=True)
class IndexStats:
    """Documents, shingles per document and (if built) the bucket summary of an index.

    The shingle counts are with repeats (each document's bag size, the docs
    table's ``n_shingles``): index format 3 keeps no shingle sets to count
    distinct shingles in.
    """

    n_docs: int
    n_empty: int
    n_skipped: int
    shingles_min: int
    shingles_median: float
    shingles_mean: float
    shingles_max: int
    shingles_total: int
    buckets: BucketSummary | None = field(default=None)
    n_left_out: int = 0  # records of WARC or JSON Lines files left out (HTTP status, revisit, broken, --min-length)

    def as_dict(self) -> dict:
        return asdict(self)


def bucket_sizes(
    keys: np.ndarray, buckets: np.ndarray, weight: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per band, the size and first position (in ``buckets[band]``) of every bucket.

    Parameters
    ----------
    keys : ndarray of shape (bands, n_docs), dtype uint64
    buckets : ndarray of shape (bands, n_nonempty), dtype int64
        Per band, documents sorted by key (runs of equal keys are buckets).
    weight : ndarray of shape (n_docs,), optional
        Documents each bucket member stands for: exact copies are folded onto
        one representative (simdoc.exact), and a bucket's size counts them all.
    """
    out = []
    for t in range(keys.shape[0]):
        order = np.asarray(buckets[t])
        if len(order) == 0:
            out.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
            continue
        sk = keys[t][order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        if weight is None:
            sizes = np.diff(np.append(starts, len(order)))
        else:
            sizes = np.add.reduceat(weight[order], starts).astype(np.int64)
        out.append((sizes, starts))
    return out


def size_histogram(sizes: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """Count sizes in the ranges 1, 2, 3-4, 5-8, 9-16, ... (powers of two); empty ranges left out.

    >>> size_histogram(np.array([1, 1, 2, 3, 4, 5, 9]))
    ((1, 1, 2), (2, 2, 1), (3, 4, 2), (5, 8, 1), (9, 16, 1))
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) == 0:
        return ()
    # frexp(x)[1] is the bit length of x: 1 -> 1, 2..3 -> 2, 4..7 -> 3; size 1 (x = 0) -> 0.
    bins = np.frexp((sizes - 1).astype(np.float64))[1]
    counts = np.bincount(bins)
    out = []
    for e, n in enumerate(counts):
        if n:
            low, high = (1, 1) if e == 0 else (2 ** (e - 1) + 1, 2**e)
            out.append((low, high, int(n)))
    return tuple(out)


def summarise_buckets(
    keys: np.ndarray, buckets: np.ndarray, doc_ids: Sequence[str], top: int = 5, weight: np.ndarray | None = None
) -> tuple[int, int, tuple[tuple[int, int, int], ...], tuple[LargeBucket, ...]]:
    """Bucket count, shared-bucket count, size histogram and the ``top`` largest shared buckets.

    The same documents bucketed together in several bands are one entry
    (with the number of bands), so a group of exact copies, which shares a
    bucket in every band, is listed once.
    """
    per_band = bucket_sizes(keys, buckets, weight)
    all_sizes = np.concatenate([s for s, _ in per_band]) if per_band else np.zeros(0, np.int64)
    big: list[tuple[int, int, int, int]] = []  # (-size, band, first document number, bucket number in its band)
    for t, (sizes, starts) in enumerate(per_band):
        shared = np.flatnonzero(sizes >= 2)
        if len(shared) == 0 or top <= 0:
            continue
        # Only this band's top few can be among the overall top: a band's buckets are disjoint,
        # so a bucket ranked below `top` others of its own band is below `top` distinct ones.
        pick = shared[np.argsort(-sizes[shared], kind="stable")[:top]]
        order = np.asarray(buckets[t])
        # The bucket's members are in document order (stable sort), so its first is its smallest.
        big.extend((-int(sizes[i]), t, int(order[starts[i]]), int(i)) for i in pick)
    big.sort(key=lambda x: (x[0], x[1], doc_ids[x[2]]))

    def members(t: int, i: int) -> np.ndarray:
        starts = per_band[t][1]
        end = starts[i + 1] if i + 1 < len(starts) else len(buckets[t])
        return np.asarray(buckets[t][starts[i] : end])

    chosen: list[tuple[int, int, int, int]] = []
    for cand in big:
        if len(chosen) >= max(top, 0):
            break
        same = [c for c in chosen if c[0] == cand[0] and c[2] == cand[2]]  # equal size, equal first member
        if any(np.array_equal(members(c[1], c[3]), members(cand[1], cand[3])) for c in same):
            continue
        chosen.append(cand)
    # How many bands hold each chosen bucket: in every band, find the bucket of its first member
    # (one pass over the band for all of them) and compare the members.
    firsts = np.array([c[2] for c in chosen], dtype=np.int64)
    n_bands = [0] * len(chosen)
    for u in range(len(per_band)):
        order = np.asarray(buckets[u])
        at = np.flatnonzero(np.isin(order, firsts))
        where = dict(zip(order[at].tolist(), np.searchsorted(per_band[u][1], at, side="right") - 1))
        for k, (_, t, first, i) in enumerate(chosen):
            if first in where and np.array_equal(members(t, i), members(u, int(where[first]))):
                n_bands[k] += 1
    largest = [
        LargeBucket(-neg, t, doc_ids[first], n_bands[k], copies=len(members(t, i)) == 1)
        for k, (neg, t, first, i) in enumerate(chosen)
    ]
    return len(all_sizes), int(np.count_nonzero(all_sizes >= 2)), size_histogram(all_sizes), tuple(largest)


def index_stats(loaded: LoadedIndex, top: int = 5) -> IndexStats:
    """Statistics of an opened index; the bucket part only if its LSH stage is built.

    Parameters
    ----------
    loaded : LoadedIndex
        From :func:`simdoc.store.loaded.open_index`; needs the shingle stage.
    top : int
        How many of the largest buckets to list.
    """
    shingle = loaded.stage("shingle")
    # Shingles with repeats (the bag's size), from the docs table: the index keeps no shingle sets.
    sizes = np.asarray(loaded.docs().n_shingles, dtype=np.int64)
    n = len(sizes)
    stages = loaded.manifest["stages"]
    summary = None
    if stages.get("index") is not None:
        sig, idx = stages.get("signature") or {}, stages["index"]
        sig_current = sig.get("built_from") == shingle.get("build_id")
        current = idx.get("built_from") == sig.get("build_id") and sig_current
        params = idx["params"]
        if current:
            keys, buckets = loaded.bands()
            rep = loaded.representatives()
            weight = np.bincount(rep, minlength=len(rep))
            n_buckets, n_shared, hist, largest = summarise_buckets(keys, buckets, loaded.docs().ids, top, weight)  # ids made for the few shown
        else:  # the arrays may not even match today's documents: describe nothing but the fact
            n_buckets, n_shared, hist, largest = 0, 0, (), ()
        summary = BucketSummary(
            params["bands"], params["rows"], params["threshold"], current, n_buckets, n_shared, hist, largest, sig_current,
            bool(params.get("explicit")),
        )
    return IndexStats(
        n_docs=n,
        n_empty=int(np.count_nonzero(sizes == 0)),
        n_skipped=skipped_counts(shingle)[0],
        n_left_out=skipped_counts(shingle)[1],
        shingles_min=int(sizes.min()) if n else 0,
        shingles_median=float(np.median(sizes)) if n else 0.0,
        shingles_mean=round(float(sizes.mean()), 2) if n else 0.0,
        shingles_max=int(sizes.max()) if n else 0,
        shingles_total=int(sizes.sum()),
        buckets=summary,
    )


def format_stats(stats: IndexStats, bar_width: int = 40) -> list[str]:
    """The statistics as lines of text; the histogram's bars are on a log scale."""
    s = stats
    extra = [f"{s.n_empty} with no shingles"]
    if s.n_skipped or s.n_left_out:
        what = [count(s.n_skipped, "file skipped")] if s.n_skipped else []
        what += [count(s.n_left_out, "record") + " left out"] if s.n_left_out else []
        extra.append(", ".join(what) + ": `simdoc stats --skipped` lists them")
    lines = [
        f"documents: {s.n_docs} ({', '.join(extra)})",
        f"shingles per document (with repeats): min {s.shingles_min}, median {s.shingles_median:g}, "
        f"mean {s.shingles_mean:.2f}, max {s.shingles_max}; {s.shingles_total} in all",
    ]

    b = s.buckets
    if b is None:
        lines.append("buckets: none yet (run `simdoc index --index ...` or `simdoc pairs`)")
        return lines
    lines.append(f"banding: {b.banding}")
    if not b.current:
        why = "the signatures changed since" if b.signatures_current else "the shingles changed since"
        lines.append(f"buckets: out of date ({why}; run {b.next_step})")
        return lines
    lines.append(f"buckets: {b.n_buckets} in {count(b.bands, 'band')}, {b.n_shared} shared by two or more documents")
    lines.append("bucket sizes (buckets per size, bars on a log scale):")
    top = max((n for _, _, n in b.histogram), default=0)
    for low, high, n in b.histogram:
        label = f"{low}" if low == high else f"{low}-{high}"
        bar = "#" * max(1, int(round(bar_width * np.log1p(n) / np.log1p(top))))
        lines.append(f"{label:>11}  {n:>8}  {bar}")
    if b.largest:
        lines.append("largest shared buckets (each once; bands: how many hold the same documents together):")
        lines.append(f"{'size':>11}  {'band':>8}  {'bands':>8}  sample member")
        for big in b.largest:
            note = "  (a group of exact copies)" if big.copies else ""
            lines.append(f"{big.size:>11}  {big.band:>8}  {big.bands:>8}  {escape_name(big.sample)}{note}")  # as tsv prints it
    else:
        lines.append("largest shared buckets: none (no two documents share a bucket)")
    return lines

"""What a banding choice will do, and what an index holds.

``tune`` answers "which bands and rows for this threshold, and how many
similar pairs will I miss?" before anything is built: the candidate
probability ``P(s) = 1 - (1 - s**r)**b`` (MMDS §3.4.2) at several
similarities, the false-negative rate ``1 - P(T)`` at the threshold T, the
false-positive rate ``P(T - 0.2)`` of pairs well below it, and the S-curve
drawn as text. ``stats`` describes a built index: documents, shingles per
document, and the sizes of the LSH buckets (a few huge buckets mean exact
copies or boilerplate, and quadratic candidate work).

Everything here computes data or returns lines of plain text; nothing prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from simdoc.errors import UsageError
from simdoc.lsh import (
    DEFAULT_RECALL,
    candidate_probability,
    check_bands_rows,
    check_threshold,
    choose_bands_rows,
    s_curve_threshold,
)
from simdoc.minhash import DEFAULT_NUM_PERM
from simdoc.wording import count

if TYPE_CHECKING:
    from simdoc.store.loaded import LoadedIndex

FP_OFFSET = 0.2  # the false-positive rate is reported this far below the threshold
GRID = tuple(round(0.1 * i, 1) for i in range(1, 11))


def _r(x: float) -> float:
    # 6 decimals: stable text across platforms whose pow() differs in the last bit.
    return round(float(x), 6)


# ---------------------------------------------------------------- tune


@dataclass(frozen=True)
class TuneReport:
    """Banding for a threshold and what it does to pairs of each similarity.

    Attributes
    ----------
    threshold : float
    num_perm : int
    bands, rows : int
    explicit : bool
        True if bands and rows were given rather than chosen.
    midpoint : float
        ``(1/b)**(1/r)``, where the S-curve is steepest.
    probabilities : tuple of (similarity, probability)
        P(candidate) at 0.1, 0.2, ..., 1.0, at T and at T - 0.2, ascending.
    false_negative_rate : float
        ``1 - P(T)``: the share of pairs exactly at the threshold that never
        become candidates (pairs above it are missed less often).
    false_positive_at : float or None
        ``T - 0.2``, None when that is below 0.
    false_positive_rate : float or None
        ``P(T - 0.2)``: the share of pairs that far below the threshold that
        still become candidates (and are then discarded by verification).
    """

    threshold: float
    num_perm: int
    bands: int
    rows: int
    explicit: bool
    midpoint: float
    probabilities: tuple[tuple[float, float], ...]
    false_negative_rate: float
    false_positive_at: float | None
    false_positive_rate: float | None

    @property
    def recall_reached(self) -> bool:
        """Whether P(T) reaches the recall simdoc aims for (0.95)."""
        return 1.0 - self.false_negative_rate >= DEFAULT_RECALL - 1e-12

    def as_dict(self) -> dict:
        d = asdict(self)
        d["probabilities"] = [{"similarity": s, "probability": p} for s, p in self.probabilities]
        return d


def tune(
    threshold: float,
    num_perm: int = DEFAULT_NUM_PERM,
    bands: int | None = None,
    rows: int | None = None,
) -> TuneReport:
    """The banding ``index`` would choose for ``threshold`` (or the one given), and its rates.

    Parameters
    ----------
    threshold : float
        Jaccard threshold T in (0, 1].
    num_perm : int
        Signature length n; ``bands * rows <= n``.
    bands, rows : int, optional
        Evaluate this banding instead of choosing one (give both or neither).

    Examples
    --------
    >>> r = tune(0.8, 128)
    >>> (r.bands, r.rows, round(r.false_negative_rate, 4), r.false_positive_at)
    (13, 7, 0.0469, 0.6)
    """
    t = check_threshold(threshold)
    if num_perm < 1:
        raise UsageError(f"--num-perm must be at least 1, got {num_perm}")
    if (bands is None) != (rows is None):
        raise UsageError("--bands and --rows go together: give both, or neither and let --threshold choose")
    explicit = bands is not None
    if explicit:
        check_bands_rows(bands, rows, num_perm)
    else:
        bands, rows = choose_bands_rows(t, num_perm)
    fp_at = round(t - FP_OFFSET, 10)
    fp_at = None if fp_at < 0 else fp_at
    points = sorted(set(GRID) | {round(t, 10)} | ({fp_at} if fp_at is not None and fp_at > 0 else set()))
    probs = tuple((s, _r(candidate_probability(s, bands, rows))) for s in points)
    return TuneReport(
        threshold=t,
        num_perm=num_perm,
        bands=bands,
        rows=rows,
        explicit=explicit,
        midpoint=_r(s_curve_threshold(bands, rows)),
        probabilities=probs,
        false_negative_rate=_r(1.0 - candidate_probability(t, bands, rows)),
        false_positive_at=fp_at,
        false_positive_rate=None if fp_at is None else _r(candidate_probability(fp_at, bands, rows)),
    )


def format_tune(report: TuneReport) -> list[str]:
    """The report as lines of text (without the chart)."""
    r = report
    how = "given" if r.explicit else "chosen"
    lines = [
        f"threshold T={r.threshold:g}, num_perm={r.num_perm}: bands b={r.bands}, rows r={r.rows} ({how};"
        f" {r.bands * r.rows} of {r.num_perm} signature rows banded)",
        f"S-curve midpoint (1/b)^(1/r) = {r.midpoint:.4f}",
        f"false-negative rate at J={r.threshold:g}: {r.false_negative_rate:.4f}  (1 - P(T): pairs at T that never become candidates)",
    ]
    if r.false_positive_at is None:
        lines.append(f"false-positive rate at J=T-{FP_OFFSET:g}: n/a (T-{FP_OFFSET:g} < 0)")
    else:
        lines.append(
            f"false-positive rate at J={r.false_positive_at:g}: {r.false_positive_rate:.4f}"
            f"  (P(T-{FP_OFFSET:g}): pairs there that still become candidates)"
        )
    lines.append("")
    lines.append("similarity  P(candidate)")
    for s, p in r.probabilities:
        mark = "  <- T" if s == round(r.threshold, 10) else "  <- T-0.2" if s == r.false_positive_at else ""
        lines.append(f"{s:>10.2f}  {p:.4f}{mark}")
    return lines


def render_s_curve(bands: int, rows: int, threshold: float | None = None, width: int = 51, height: int = 11) -> list[str]:
    """The S-curve ``P(s) = 1 - (1 - s**r)**b`` for s in [0, 1] as lines of ASCII text.

    Column c stands for s = c / (width - 1) and row k (counted from the
    bottom) for P = k / (height - 1); the curve is ``*``, joined vertically
    where it is steep. The threshold's column is ``|``, with ``^ T=...``
    under the axis.

    Parameters
    ----------
    bands, rows : int
    threshold : float, optional
        Column to mark.
    width, height : int
        Plot area in characters (at least 11 and 3).

    Returns
    -------
    list of str
        ``height + 2`` lines (3 with a threshold), no trailing blanks.
    """
    if width < 11 or height < 3:
        raise ValueError(f"the plot needs width >= 11 and height >= 3, got {width}x{height}")
    s = np.linspace(0.0, 1.0, width)
    level = np.rint(np.asarray(candidate_probability(s, bands, rows)) * (height - 1)).astype(int)
    grid = [[" "] * width for _ in range(height)]  # grid[k]: row k from the bottom
    for c in range(width):
        grid[0][c] = "-"
    tc = None if threshold is None else int(round(threshold * (width - 1)))
    if tc is not None:
        for k in range(height):
            grid[k][tc] = "+" if k == 0 else "|"
    for c in range(width):
        lo, hi = level[c], level[c]
        if c:  # join to the previous column so a steep curve stays one line
            lo, hi = min(lo, level[c - 1] + 1), max(hi, level[c - 1] - 1)
        for k in range(lo, hi + 1):
            grid[k][c] = "*"
    labels = {height - 1: "1.0", 0: "0.0"}
    if (height - 1) % 2 == 0:
        labels[(height - 1) // 2] = "0.5"
    lines = []
    for k in range(height - 1, -1, -1):
        axis = "+" if k == 0 else "|"
        lines.append(f"{labels.get(k, ''):>4} {axis}{''.join(grid[k])}".rstrip())
    ticks = [" "] * (width + 6)
    for v in (0.0, 1.0, 0.2, 0.4, 0.6, 0.8):  # the ends first; a middle label that would touch another is left out
        text = f"{v:.1f}"
        c = 6 + int(round(v * (width - 1)))
        start = c if v < 1.0 else c - len(text) + 1
        if all(ch == " " for ch in ticks[max(start - 1, 0) : start + len(text) + 1]):
            ticks[start : start + len(text)] = text
    lines.append("".join(ticks).rstrip())
    if tc is not None:
        label = f"T={threshold:g}"
        c = 6 + tc
        if tc + 2 + len(label) < width:
            lines.append(" " * c + "^ " + label)
        else:
            lines.append(" " * (c - len(label) - 1) + label + " ^")
    return lines


# ---------------------------------------------------------------- stats


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
    keys: np.ndarray, buckets: np.ndarray, doc_ids: list[str], top: int = 5, weight: np.ndarray | None = None
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
            n_buckets, n_shared, hist, largest = summarise_buckets(keys, buckets, loaded.doc_ids(), top, weight)
        else:  # the arrays may not even match today's documents: describe nothing but the fact
            n_buckets, n_shared, hist, largest = 0, 0, (), ()
        summary = BucketSummary(
            params["bands"], params["rows"], params["threshold"], current, n_buckets, n_shared, hist, largest, sig_current
        )
    return IndexStats(
        n_docs=n,
        n_empty=int(np.count_nonzero(sizes == 0)),
        n_skipped=len(shingle.get("skipped", [])),
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
    if s.n_skipped:
        extra.append(count(s.n_skipped, "file skipped") + ": `simdoc stats --skipped` lists them")
    lines = [
        f"documents: {s.n_docs} ({', '.join(extra)})",
        f"shingles per document (with repeats): min {s.shingles_min}, median {s.shingles_median:g}, "
        f"mean {s.shingles_mean:.2f}, max {s.shingles_max}; {s.shingles_total} in all",
    ]

    b = s.buckets
    if b is None:
        lines.append("buckets: none yet (run `simdoc index --index ...` or `simdoc pairs`)")
        return lines
    lines.append(f"banding: bands={b.bands} rows={b.rows} (threshold {b.threshold:g})")
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
            lines.append(f"{big.size:>11}  {big.band:>8}  {big.bands:>8}  {big.sample}{note}")
    else:
        lines.append("largest shared buckets: none (no two documents share a bucket)")
    return lines

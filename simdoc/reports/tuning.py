"""What a banding choice will do: ``simdoc tune``.

``tune`` answers "which bands and rows for this threshold, and how many
similar pairs will I miss?" before anything is built: the candidate
probability ``P(s) = 1 - (1 - s**r)**b`` (MMDS §3.4.2) at several
similarities, the false-negative rate ``1 - P(T)`` at the threshold T, the
false-positive rate ``P(T - 0.2)`` of pairs well below it, and the S-curve
drawn as text. What a built index holds is :mod:`simdoc.reports.stats`.

Everything here computes data or returns lines of plain text; nothing prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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



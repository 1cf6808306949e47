"""The index stage: band the signatures into LSH buckets (`simdoc index`, and `simdoc pairs`).

:func:`resolve_banding` chooses bands b and rows r: by hand (``--bands``/``--rows``),
the index's, or for the threshold (:func:`simdoc.lsh.choose_bands_rows`).
:func:`_index_plan` adds what a `simdoc pairs` run asks (its threshold, a bag
threshold's set equivalent) and says whether the stored buckets already have
it. Exact copies are folded onto their first member before banding, so only
representatives are in the buckets.

Banding is a few sorts of the band keys: with the local engine it runs in
this process, on the engine's ``jobs`` threads; on a Dask cluster the
workers compute and write the keys and buckets
(:mod:`simdoc.stages.dask_index`), and this process only the groups of
exact copies.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from simdoc.engines import DaskEngine, Engine
from simdoc.engines.local import LocalEngine
from simdoc.errors import IndexError_
from simdoc.exact import representatives
from simdoc.lsh import (
    DEFAULT_RECALL,
    BandingReport,
    candidate_probability,
    check_bands_rows,
    choose_bands_rows,
    s_curve_threshold,
)
from simdoc.params import BandingParams, PairsParams, Threshold, choose_threshold
from simdoc.stages.banding import band_here, band_kept, can_merge
from simdoc.stages.common import build_id
from simdoc.stages.results import StageResult
from simdoc.store.loaded import LoadedIndex, open_index
from simdoc.version import __version__


def resolve_banding(
    stored: dict | None,
    num_perm: int,
    threshold: float | None,
    bands: int | None,
    rows: int | None,
    recall: float = DEFAULT_RECALL,
) -> tuple[dict, Threshold | None]:
    """The banding parameters to use, from what was asked (checked: see BandingParams) and what
    the index holds; and the threshold chosen when none was asked (None when the stored banding stays)."""
    if bands is not None:
        check_bands_rows(bands, rows, num_perm)  # b*r against the signature length, which only the index knows
        t = threshold if threshold is not None else s_curve_threshold(bands, rows)
        return {"bands": bands, "rows": rows, "threshold": round(t, 6), "explicit": True}, None
    # A hand-chosen banding stays until a different threshold is asked for: `--threshold`
    # alone means "band for this threshold", whatever was chosen before.
    keep = threshold is None or (stored is not None and stored.get("explicit") and round(threshold, 6) == stored["threshold"])
    if stored is not None and keep:
        if stored["bands"] * stored["rows"] <= num_perm:
            return {k: stored[k] for k in ("bands", "rows", "threshold", "explicit")}, None
    chosen = choose_threshold(threshold, "set", stored)
    b, r = choose_bands_rows(chosen.value, num_perm, recall)
    return {"bands": b, "rows": r, "threshold": chosen.value, "explicit": False}, chosen


def build_index(
    index: str | os.PathLike,
    params: BandingParams = BandingParams(),
    *,
    pairs: PairsParams | None = None,
    engine: Engine | None = None,
    wait: float = 0.0,
) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures (holding the writer lock).

    With ``pairs``, banded for those pairs' threshold (see :func:`_index_plan`).
    Banding runs in this process, on ``engine.jobs`` threads (default: all
    cores), or on the workers of a Dask engine. Buckets the last published
    manifest shows up to date are left alone without taking the lock, so
    that a reader never waits for a writer.
    """
    engine = engine or LocalEngine()
    loaded = open_index(index)
    # Signatures older than the shingles would be banded as if current: name the stage to run.
    loaded.check_built_from("signature")
    plan = _index_plan(loaded, params, pairs)
    if plan.current:
        return StageResult("index", False, 0.0, "up to date", notes=plan.notes), plan.report
    with loaded.store.writing(wait):
        return _build_index(index, params, pairs, engine)


def index_up_to_date(index: str | os.PathLike, params: BandingParams) -> tuple[StageResult, BandingReport] | None:
    """The result of an index stage with nothing to do, if the published manifest shows one; else None.

    Neither the lock nor an engine is needed to know it: a command can ask
    first, and connect to a cluster only when there is work for it.
    """
    loaded = open_index(index)
    loaded.check_built_from("signature")
    plan = _index_plan(loaded, params)
    return (StageResult("index", False, 0.0, "up to date", notes=plan.notes), plan.report) if plan.current else None


@dataclass
class _Plan:
    params: dict  # the banding parameters asked for
    report: BandingReport
    current: bool  # the stored buckets already have them
    notes: list[str]  # to say on stderr: the default threshold chosen


def _index_plan(loaded: LoadedIndex, banding: BandingParams, pairs: PairsParams | None = None) -> _Plan:
    """The banding parameters asked for, their report, and whether the stored buckets already have them.

    With ``pairs`` (a `simdoc pairs` run), the threshold is the pairs' (a bag
    threshold banded at its set equivalent), unless that is not one asked for:
    then the stored banding of that measure stays as it is (the index's own
    threshold, or a banding chosen by hand with --bands/--rows).
    """
    sig_stage = loaded.stage("signature")
    stored = loaded.manifest["stages"].get("index")
    held = stored["params"] if stored else None
    threshold, bag_threshold = banding.threshold, None
    notes: list[str] = []
    if pairs is not None:
        pairs = pairs if pairs.chosen is not None else pairs.resolved(held)
        # Bands and rows given by hand are banded with the pairs' threshold recorded if one was
        # asked or held; a stored banding longer than the signatures (a smaller --num-perm) cannot stay.
        keep = (
            banding.bands is None and pairs.chosen.source != "asked" and bool(held)
            and held.get("measure", "set") == pairs.measure
            and held["bands"] * held["rows"] <= sig_stage["params"]["num_perm"]
        )
        threshold = None if keep else pairs.banding_threshold
        if banding.bands is not None and pairs.chosen.source == "default" and pairs.measure == "set":
            threshold = None  # by hand, no --threshold: the index holds none (README), as `simdoc index` makes it
        bag_threshold = pairs.cut if pairs.measure == "bag" else None
    params, chosen = resolve_banding(held, sig_stage["params"]["num_perm"], threshold, banding.bands, banding.rows)
    if pairs is None and chosen is not None and chosen.source == "default":
        # (A pairs run says it in its summary.)
        notes.append(f"index: no --threshold given and none in the index: banded for the default {chosen.value:g}")
    params["measure"] = "bag" if bag_threshold is not None else "set"
    if bag_threshold is not None:
        params["bag_threshold"] = bag_threshold
    report = BandingReport.of(params["bands"], params["rows"], params["threshold"])
    current = bool(stored) and stored["params"] == params and stored.get("built_from") == sig_stage["build_id"]
    return _Plan(params, report, current, notes)


def _build_index(
    index: str | os.PathLike, banding: BandingParams, pairs: PairsParams | None, engine: Engine
) -> tuple[StageResult, BandingReport]:
    """Bring the band keys and buckets up to date with the signatures (under the writer lock)."""
    t0 = time.perf_counter()
    loaded = open_index(index)
    loaded.check_built_from("signature")
    plan = _index_plan(loaded, banding, pairs)
    if plan.current:
        return StageResult("index", False, time.perf_counter() - t0, "up to date", notes=plan.notes), plan.report
    result = _index_stage(loaded, plan, engine, t0)
    loaded.store.write_manifest(loaded.manifest)
    return result, plan.report


def _index_stage(loaded: LoadedIndex, plan: _Plan, engine: Engine, t0: float) -> StageResult:
    """Band the signatures of ``loaded`` as ``plan`` says and put the index stage into its manifest (not published)."""
    params = plan.params
    sig_stage = loaded.stage("signature")
    build = build_id(sig_stage["build_id"], params, __version__)
    names = {"bands": f"bands.{build}.npy", "buckets": f"buckets.{build}.npy", "groups": f"groups.{build}.npy"}
    docs = loaded.docs()
    # Exact copies are folded onto their first member: only representatives are banded.
    rep = representatives(docs.identities(), docs.n_shingles > 0)
    banded = (docs.n_shingles > 0) & (rep == np.arange(len(rep)))
    files = {names["groups"]: loaded.store.save_array(names["groups"], rep)}
    on_cluster = None
    if isinstance(engine, DaskEngine):
        from simdoc.stages.dask_index import band_on_cluster  # (a cluster's alone)

        on_cluster = band_on_cluster(loaded, params, names, int(banded.sum()), engine)
    if on_cluster is not None:
        written, sizes = on_cluster
        files.update(written)
    else:
        old = _old_banding(loaded, params)
        if old is not None:  # an update that kept most rows: the last build's buckets merged
            written, sizes = band_kept(loaded.store, loaded.signatures(), params["bands"], params["rows"], banded, names, *old)
        else:
            # Written as they are made: the keys and buckets are never held whole (simdoc.stages.banding).
            written, sizes = band_here(loaded.store, loaded.signatures(), params["bands"], params["rows"], banded, names, engine.jobs)
        files.update(written)
    loaded.manifest["stages"]["index"] = {
        "params": params,
        "built_from": sig_stage["build_id"],
        "build_id": build,
        # Pairs inside each band's buckets: the volume a Dask run sizes its scoring tasks by.
        "bucket_pairs": sizes[:, 0].tolist(),
        # Each band's largest bucket and buckets of 10,000 or more: said by a night with nothing new,
        # which reads no bucket (simdoc.stages.results.score_candidates).
        "largest_bucket": sizes[:, 1].tolist(),
        "large_buckets": sizes[:, 2].tolist(),
        "banded": int(np.count_nonzero(banded)),
        "roles": names,
        "files": files,
    }
    return StageResult(
        "index",
        True,
        time.perf_counter() - t0,
        plan.report.describe(),
        warnings=_recall_warnings(plan.params, sig_stage["params"]["num_perm"]) + _volume_warnings(sizes[:, 0], int(banded.sum())),
        notes=plan.notes,
    )


# Candidate pairs in the buckets, at most, above which a build says what verifying them will take:
# as many as this, and this many a document banded (a corpus of near-duplicates at t = 0.8 has ~1).
MANY_CANDIDATES, MANY_A_DOCUMENT = 10_000_000, 1_000


def _volume_warnings(pairs: np.ndarray, banded: int) -> list[str]:
    """A banding whose buckets hold a number of candidate pairs that grows as the square of the
    documents (a threshold near 0 over similar texts: -t 0.001 over 10^4 documents makes ~5*10^7),
    said before they are verified: each pair reads its two documents again (~25 us a core), and a
    run with no terminal to show a bar would otherwise sit silent for minutes or hours."""
    most, least = min(int(pairs.sum()), banded * (banded - 1) // 2), int(pairs.max(initial=0))
    if most < MANY_CANDIDATES or most < MANY_A_DOCUMENT * max(banded, 1):
        return []
    return [
        f"index: the buckets hold {least:,} to {most:,} candidate pairs (its fullest band's to all bands' sum, at most every pair) for "
        f"{banded:,} documents, each to be "
        "verified by reading its two documents again: this takes long (a higher --threshold makes fewer; "
        "`simdoc tune` shows the curve, `--all-candidates | wc -l` counts them)"
    ]


def _recall_warnings(params: dict, num_perm: int) -> list[str]:
    """A banding chosen for a threshold that no b*r <= num_perm can make a candidate with
    probability DEFAULT_RECALL (the README's promise): said when it is built, as `tune` says it,
    since the pairs at the threshold that are never candidates are missed without a trace."""
    if params["explicit"]:
        return []
    t, b, r = params["threshold"], params["bands"], params["rows"]
    p = candidate_probability(t, b, r)
    if p >= DEFAULT_RECALL:
        return []
    return [
        f"index: bands={b} rows={r}, the best for J={t:g} with --num-perm {num_perm}, make a pair at J={t:g} a "
        f"candidate with probability {p:.3f}, below {DEFAULT_RECALL}: {1 - p:.0%} of such pairs are never candidates "
        "(raise --num-perm; `simdoc tune` shows the curve)"
    ]


def _old_banding(loaded: LoadedIndex, params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The keys and buckets of the index stage ``loaded``'s manifest still names (the last build's),
    with the rows of the new build kept from it, if they can be merged (:func:`band_kept`): banded
    as ``params`` says, from the signatures the kept rows were copied from. Else None (damaged
    files too: the bands are then sorted again)."""
    kept, stage = loaded.kept, loaded.manifest["stages"].get("index")
    if kept is None or not stage or stage.get("params") != params or stage.get("built_from") != kept.signature_build:
        return None
    try:
        keys, buckets = loaded.bands()
    except (IndexError_, OSError, ValueError):
        return None
    if keys.ndim != 2 or keys.shape[0] != params["bands"] or not can_merge(kept.old_of_new, keys.shape[1]):
        return None
    return keys, buckets, kept.old_of_new


def add_index_stage(
    loaded: LoadedIndex, banding: BandingParams, pairs: PairsParams | None = None, engine: Engine | None = None
) -> tuple[StageResult, BandingReport] | None:
    """Band the signatures of ``loaded`` into its manifest, not published, unless its buckets are current.

    For a stage that publishes the buckets with its own files (the fused
    shingle stage of `simdoc pairs`: a reader never sees new documents with
    old buckets). None: nothing to do.
    """
    plan = _index_plan(loaded, banding, pairs)
    if plan.current:
        return None
    return _index_stage(loaded, plan, engine or LocalEngine(1), time.perf_counter()), plan.report

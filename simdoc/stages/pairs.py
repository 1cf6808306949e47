"""The pairs stage: bring every stage up to date, then score the candidates (`simdoc pairs`).

:func:`find_pairs` is the library's call (simdoc.find_pairs), with the
flags of `simdoc pairs` as keywords; :func:`run_pairs` is the same with the
parameters already made (:class:`simdoc.params.Params`) and an engine given,
as the commands call it. A run given the corpus reads it where it changed
(:func:`refresh_signatures`: the fused shingle stage, with the buckets of a
new build published together with it); without it, the index is used as it
is. The candidates are then scored in this process
(:func:`simdoc.stages.results.score_candidates`) or, on a Dask engine, on
the cluster (:mod:`simdoc.stages.dask_pairs`), and verified against the
documents. A document that changed between indexing and verification is
read again and the pairs scored again (at most MAX_REINDEX times).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from simdoc.corpus.object_spill import spilling
from simdoc.corpus.objects import is_url
from simdoc.engines import DaskEngine, Engine, open_engine
from simdoc.engines.local import LocalEngine
from simdoc.errors import UsageError
from simdoc.exact import groups_of, key_halves
from simdoc.lsh import BandingReport
from simdoc.params import (
    BandingParams,
    PairsParams,
    Params,
    ShingleParams,
    SignatureParams,
)
from simdoc.stages.common import build_id, default_index_path, mismatch
from simdoc.stages.index import add_index_stage, build_index
from simdoc.stages.results import PairsResult, StageResult, Verifier, score_candidates
from simdoc.stages.shingle import build_shingles
from simdoc.stages.signature import build_signatures, signature_params
from simdoc.store.directory import IndexStore
from simdoc.store.doctable import DocsTable
from simdoc.store.loaded import LoadedIndex, open_index
from simdoc.store.manifest import damaged_files, skipped_counts
from simdoc.store.npyfiles import crc32
from simdoc.store.verified import VerifiedPairs


def find_pairs(
    corpus: str | os.PathLike | list | None = None,
    index: str | os.PathLike | None = None,
    *,
    threshold: float | None = None,
    measure: str = "set",
    verify: bool = True,
    all_candidates: bool = False,
    unit: str | None = None,
    k: int | None = None,
    lowercase: bool | None = None,
    num_perm: int | None = None,
    seed: int | None = None,
    scheme: str | None = None,
    bands: int | None = None,
    rows: int | None = None,
    jobs: int | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    new_only: bool = False,
    max_bytes: int | None = None,
    follow_symlinks: bool | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    main_content: bool | None = None,
    unicode: str | None = None,
    min_length: int | None = None,
    all_responses: bool | None = None,
    scheduler: str | None = None,
    wait_workers: float | None = None,
) -> PairsResult:
    """Near-duplicate pairs of a corpus, building or refreshing its index first.

    The keywords are the flags of `simdoc pairs` (see :mod:`simdoc.params`
    for what each means and its default). With ``corpus``, every stage that
    is missing or out of date is (re)built; without it, the index is used as
    it is (missing signature or index stages are still built, as they need
    only the index). ``new_only`` keeps the pairs with a document added or
    changed since the last ``--new`` report written in full (:func:`mark_reported`).
    """
    params = Params(
        shingle=ShingleParams(
            unit=unit, k=k, lowercase=lowercase, max_bytes=max_bytes, follow_symlinks=follow_symlinks,
            include=include, exclude=exclude, text_field=text_field, id_field=id_field,
            main_content=main_content, all_responses=all_responses, unicode=unicode, min_length=min_length,
        ),
        signature=SignatureParams(num_perm=num_perm, seed=seed, scheme=scheme),
        banding=BandingParams(bands=bands, rows=rows),
        pairs=PairsParams(threshold=threshold, measure=measure, verify=verify, all_candidates=all_candidates, new_only=new_only),
    )
    index = pairs_index(corpus, index)
    with open_engine(jobs, scheduler, wait_workers, index=index, corpus=corpus, needs_corpus=verify) as engine:
        return run_pairs(corpus, index, params, engine=engine, rebuild=rebuild, progress=progress, wait=wait)


def pairs_index(corpus: str | os.PathLike | list | None, index: str | os.PathLike | None) -> Path:
    """The index a pairs run uses: ``index``, else the corpus's default one.

    Without a corpus it must be there: checked before anything is made or
    a cluster is connected to.
    """
    if corpus is None and index is None:
        raise UsageError("give a CORPUS, an --index, or both")
    index = Path(index) if index is not None else default_index_path(corpus)
    if corpus is None:
        open_index(index)
    return index


MAX_REINDEX = 2  # times a run re-reads documents that changed while it verified them


def run_pairs(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike | None,
    params: Params,
    *,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
) -> PairsResult:
    """:func:`find_pairs` with the parameters made (and so checked) already, on ``engine``
    (default: a LocalEngine on all cores)."""
    t0 = time.perf_counter()
    index = pairs_index(corpus, index)
    engine = engine or LocalEngine()
    store = IndexStore(index)
    # A run given the corpus writes the index, and after scoring the pairs it verified: it
    # holds the writer lock throughout. Without a corpus the index is only read (missing
    # derived stages are still built, under the lock, by the stage functions).
    writer = store.writing(wait) if corpus is not None else contextlib.nullcontext()
    force: set[str] = set()
    # The objects of a URL corpus read by the scan are kept for verification's reads of them, in
    # this run (simdoc.corpus.object_spill): a nightly update fetches each changed object once.
    keep = isinstance(corpus, str) and is_url(corpus) and not isinstance(engine, DaskEngine)
    spill = spilling() if keep else contextlib.nullcontext()
    with writer, spill:
        # The threshold is settled once, from the index as the run finds it: its stored
        # threshold, unless another was asked for (a run re-reading documents keeps it).
        held = store.read_manifest(discard_damaged=rebuild).get("stages", {}).get("index")
        params = replace(params, pairs=params.pairs.resolved(held["params"] if held else None))
        for attempt in range(MAX_REINDEX + 1):
            stages, report = _refresh_for_pairs(
                corpus, index, params, engine=engine, rebuild=rebuild and attempt == 0, progress=progress,
                force_read=force, wait=wait,
            )
            t_score = time.perf_counter()
            with store.reading():
                # Without the corpus no scan proved the files unchanged: stored pairs are rechecked.
                scored = _score(open_index(index), params.pairs, engine, progress, recheck=corpus is None)
            verifier, docs = scored.verifier, scored.docs
            stale = verifier.stale if verifier is not None else set()
            if stale and corpus is not None and attempt < MAX_REINDEX:
                # Changed between indexing and verification: index them again, then score again.
                force = {docs.sources[d] or docs.ids[d] for d in stale}
                continue
            break
        if verifier is not None:
            stages.append(_verify_result(verifier, docs, time.perf_counter() - t_score))
            if corpus is not None and verifier.table.grew:
                _save_verified(store, verifier.table, docs)
    return scored.result(params.pairs, stages, report, time.perf_counter() - t0, index)


@dataclass
class _Scored:
    """The candidates of one index, scored, with what the result needs of that index."""

    loaded: LoadedIndex
    docs: DocsTable
    changed: np.ndarray | None  # with new_only: per document, added or changed since the last --new report
    verifier: Verifier | None
    scores: tuple  # left, right, estimated, jaccard, number of candidates, bucket stats
    groups: list[np.ndarray]  # the exact copies (read under the reader's lock, as the rest)

    def result(self, want: PairsParams, stages: list[StageResult], report: BandingReport, seconds: float, index: Path) -> PairsResult:
        shingle = self.loaded.stage("shingle")
        left, right, est, jac, n_cand, stats = self.scores
        result = PairsResult(
            self.docs.ids, left, right, est, jac, want.cut, want.measure, n_cand, stats, stages, report,
            all_candidates=want.all_candidates,
            n_docs=shingle["n_docs"],
            n_skipped=skipped_counts(shingle)[0],
            n_damaged=damaged_files(shingle),
            seconds=seconds,
            changed=self.changed,
            groups=self.groups,
            group_value=(1.0, (0.5 if want.measure == "bag" else 1.0) if want.verify else None),
        )
        result.generation = int(self.loaded.manifest.get("generation", 0))
        result.build = shingle.get("build_id", "")
        result.index = index
        result.chosen = want.chosen
        # Pairs of exact copies were candidates too (they share every bucket).
        result.n_candidates += result.n_group_pairs()
        return result


def _score(loaded: LoadedIndex, want: PairsParams, engine: Engine, progress: bool = False, recheck: bool = False) -> _Scored:
    """The candidates of ``loaded`` scored and filtered as ``want`` says: on the cluster of a
    Dask engine, else here on ``engine.jobs`` threads (with a bar of the pairs verified if
    ``progress``; ``recheck``: see :class:`simdoc.stages.results.Scoring`)."""
    loaded.check_built_from("signature", "index")
    docs = loaded.docs()
    reported = int(loaded.manifest.get("reported_generation", 0))
    changed = docs.added > reported if want.new_only else None
    verifier = Verifier.of_index(loaded) if want.verify else None
    if isinstance(engine, DaskEngine):
        from simdoc.stages import dask_pairs  # (a cluster's alone)

        scores = dask_pairs.score_candidates(
            engine.client, str(loaded.store.path), want.cut, want.measure, want.verify, want.all_candidates, changed,
            verifier, recheck=recheck,
        )
    else:
        if verifier is not None:
            verifier.progress = progress
        try:
            scores = score_candidates(
                loaded, want.cut, want.measure, want.verify, want.all_candidates, changed, engine.jobs, verifier, recheck
            )
        finally:
            if verifier is not None:
                verifier.close()
    groups = groups_of(loaded.representatives())
    if recheck and verifier is not None:  # no scan proved the copies unchanged either
        groups = verifier.recheck_copies(groups)
    return _Scored(loaded, docs, changed, verifier, scores, groups)


def _verify_result(verifier: Verifier, docs: DocsTable, seconds: float) -> StageResult:
    warnings = [
        f"{docs.ids[d]}: changed since it was indexed; its pairs are left out (run `simdoc pairs CORPUS` to index it again)"
        for d in sorted(verifier.stale)
    ]
    warnings += [f"{docs.ids[d]}: could not be read again; its pairs are left out" for d in sorted(verifier.gone)]
    detail = f"{verifier.n_verified} pairs verified from the documents, {verifier.n_cached} from the verified-pairs table"
    return StageResult("verify", verifier.n_verified > 0, seconds, detail, warnings)


def _save_verified(store: IndexStore, table: VerifiedPairs, docs: DocsTable) -> None:
    """Publish the verified-pairs table, keeping only pairs of texts the corpus still holds."""
    manifest = store.read_manifest()
    shingle = manifest["stages"]["shingle"]
    present_hi = key_halves(docs.identities())[0]
    keys, jac = table.merged(present_hi)
    build = build_id(shingle["build_id"], len(keys), crc32(keys.tobytes()), crc32(jac.tobytes()))
    names = {"keys": f"verified.keys.{build}.npy", "jaccard": f"verified.jaccard.{build}.npy"}
    files = {names["keys"]: store.save_array(names["keys"], keys), names["jaccard"]: store.save_array(names["jaccard"], jac)}
    manifest["stages"]["verified"] = {
        "params": shingle["params"], "reading_rules": shingle.get("reading_rules", 1), "built_from": shingle["build_id"], "roles": names, "files": files,
    }
    store.write_manifest(manifest)


def mark_reported(index: str | os.PathLike, generation: int, wait: float = 0.0) -> None:
    """Record that a ``--new`` report of the index's update ``generation`` was written in full.

    The next ``--new`` run reports the documents added after it: none when
    nothing changed, and those of a run killed before its report completed.
    """
    store = IndexStore(index)
    with store.writing(wait):
        manifest = store.read_manifest()
        if int(manifest.get("reported_generation", 0)) < generation <= int(manifest.get("generation", 0)):
            manifest["reported_generation"] = generation
            store.write_manifest(manifest)


def refresh_signatures(
    corpus: str | os.PathLike | list | None,
    index: str | os.PathLike,
    shingle: ShingleParams,
    signature: SignatureParams,
    *,
    engine: Engine | None = None,
    rebuild: bool = False,
    progress: bool = False,
    wait: float = 0.0,
    force_read: set[str] | None = None,
    before_publish: Callable[[LoadedIndex], None] | None = None,
) -> list[StageResult]:
    """Bring the shingle and signature stages up to date, as `simdoc pairs` does.

    With ``corpus``, the fused stage: the documents are read once and signed
    as they are read, and no shingle sets are stored. Without it, the index
    is used as it is, and the shingle parameters given must be the index's.
    """
    stages: list[StageResult] = []
    if corpus is not None:
        # The signature parameters are settled first, so that the shingle workers can
        # compute the signatures of what they read (a parameter mismatch fails here, early).
        manifest = IndexStore(index).read_manifest(discard_damaged=rebuild)
        stored_sig = manifest["stages"].get("signature")
        signer = signature_params(stored_sig, signature, index, rebuild)
        stages.append(
            build_shingles(
                corpus, index, shingle, signature=signer, engine=engine, rebuild=rebuild, progress=progress, wait=wait,
                force_read=force_read, before_publish=before_publish,
            )
        )
    else:
        mismatch("shingle", open_index(index).stage("shingle")["params"], shingle.asked(), Path(index), False)
    stages.append(build_signatures(index, signature, engine=engine, progress=progress, wait=wait))
    return stages


def _refresh_for_pairs(
    corpus, index: Path, params: Params, *, engine: Engine, rebuild: bool, progress: bool, force_read: set[str], wait: float
) -> tuple[list[StageResult], BandingReport]:
    """Run the stages find_pairs needs; returns (stage results, banding report)."""
    banded: list[tuple[StageResult, BandingReport]] = []

    def band_new_build(loaded: LoadedIndex) -> None:
        # The buckets of the new documents go into the manifest that publishes them: a
        # reader (or a run killed in between) never finds new documents with old buckets.
        done = add_index_stage(loaded, params.banding, params.pairs, engine)
        if done is not None:
            banded.append(done)

    stages = refresh_signatures(
        corpus, index, params.shingle, params.signature, engine=engine, rebuild=rebuild, progress=progress, wait=wait,
        force_read=force_read, before_publish=band_new_build,
    )
    if banded:  # built with the shingles, published by the same manifest
        result, report = banded[0]
    else:
        result, report = build_index(index, params.banding, pairs=params.pairs, engine=engine, wait=wait)
    stages.append(result)
    return stages, report

"""An index directory, opened for reading: its manifest and memory-mapped arrays.

:func:`open_index` opens the index at a path; :class:`LoadedIndex` hands out
what each stage stored (the docs table, signatures, band keys and buckets,
the verified pairs), each array checked as it is loaded (see simdoc.store.directory).
Reports, the pairs scorer and both engines read an index through this
module only; it imports no stage and no engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from simdoc.buckets import BucketStats
from simdoc.errors import CorruptIndex, IndexError_
from simdoc.minhash import DEFAULT_SCHEME, MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec
from simdoc.store.directory import MANIFEST, IndexStore
from simdoc.store.doctable import COLUMN_ROLES, FORMAT_3_MISSING, FORMAT_4_NAMES, NAME_ROLES, STATUSES, DocsTable
from simdoc.store.verified import VerifiedPairs


@dataclass
class KeptRows:
    """The rows of a new build whose signature rows were copied from the build it replaces."""

    old_of_new: np.ndarray  # int64, a row of the new build each: its row in the old build, -1 if signed anew
    signature_build: str  # the build_id of the old build's signature stage


@dataclass
class LoadedIndex:
    """Memory-mapped view of an index directory's arrays."""

    store: IndexStore
    manifest: dict
    _docs: DocsTable | None = field(default=None, repr=False)
    lazy_ids: bool = False  # the docs table's ids and sources decoded row by row (see DocsTable.from_arrays)
    # A new build not yet published, whose manifest still names the old index stage: its rows kept
    # (the index stage then merges the old buckets instead of sorting every band again).
    kept: KeptRows | None = field(default=None, repr=False)

    def stage(self, name: str) -> dict:
        stage = self.manifest["stages"].get(name)
        if stage is None:
            hint = {
                "shingle": "run `simdoc pairs CORPUS` (or `simdoc shingle CORPUS --index ...`) first",
                "signature": "run `simdoc pairs CORPUS` (or `simdoc signature --index ...`) first",
                "index": "run `simdoc index --index ...` first",
            }[name]
            raise IndexError_(f"the index at {self.store.path} has no {name} stage yet", hint=hint)
        return stage

    def check_built_from(self, *stages: str) -> None:
        """Each named stage was built from the current build of the stage before it.

        A run killed between two stages, or an earlier stage rebuilt on its
        own, leaves later stages describing other documents: using them would
        print pairs that belong to neither build.
        """
        before = {"signature": "shingle", "index": "signature"}
        for name in stages:
            prev = before[name]
            made_from = self.stage(name).get("built_from")
            if made_from != self.stage(prev).get("build_id"):
                step = {"signature": "simdoc signature --index ...", "index": "simdoc index --index ..."}[name]
                raise IndexError_(
                    f"the {name} stage of the index at {self.store.path} was built from another {prev} build",
                    hint=f"run `{step}` (or `simdoc pairs CORPUS`) to bring it up to date",
                )

    def _array(self, stage: str, role: str) -> np.ndarray:
        st = self.stage(stage)
        name = st["roles"].get(role)
        if name is None or name not in st["files"]:
            raise CorruptIndex(str(self.store.path / MANIFEST), f"the {stage} stage names no {role} file")
        return self.store.load_array(name, st["files"][name])

    def docs(self) -> DocsTable:
        """The docs table (loaded once)."""
        if self._docs is None:
            roles = self.stage("shingle")["roles"]
            # A format-3 table has no stat columns of format 4: read as unknown (DocsTable.from_arrays).
            # Format 4 and 3 stored every row's id and source (FORMAT_4_NAMES), format 5 a member's key.
            names = NAME_ROLES if NAME_ROLES[0] in roles else FORMAT_4_NAMES
            wanted = names + tuple(r for r in COLUMN_ROLES if r in roles or r not in FORMAT_3_MISSING)
            arrays = {role: self._array("shingle", role) for role in wanted}
            self._docs = DocsTable.from_arrays(arrays, str(self.store.path), lazy=self.lazy_ids)
        return self._docs

    def doc_ids(self) -> list[str]:
        return list(self.docs().ids)

    def doc_records(self, docs: np.ndarray | None = None) -> list[dict]:
        """One dict per document (id, size, mtime_ns, digest, status, n_shingles, added, and source
        if it is a member of a file), of every document or of ``docs`` (numbers), in that order.

        Gathered a column at a time: a row object per document was most of ``dedup --index``'s
        55 s at 10^6 records, which needs only the documents of its clusters."""
        t = self.docs()
        rows = np.arange(len(t), dtype=np.int64) if docs is None else np.asarray(docs, dtype=np.int64)
        c = t.columns
        ids, sources = t.ids.take(rows), t.sources.take(rows)
        digests = np.asarray(c["digest"])[rows]
        statuses = [STATUSES[s] for s in np.asarray(c["status"])[rows].tolist()]
        ints = {name: np.asarray(c[name])[rows].tolist() for name in ("size", "mtime_ns", "n_shingles", "added")}
        out = []
        for k, (doc_id, source) in enumerate(zip(ids, sources)):
            rec = {"id": doc_id, "size": ints["size"][k], "mtime_ns": ints["mtime_ns"][k], "digest": digests[k].tobytes().hex(),
                   "status": statuses[k], "n_shingles": ints["n_shingles"][k], "added": ints["added"][k]}
            if source:
                rec["source"] = source
            out.append(rec)
        return out

    def has_shingle_sets(self) -> bool:
        return "indptr" in self.stage("shingle").get("roles", {})

    def shingle_sets(self) -> ShingleSets:
        """The stored shingle sets: only after `simdoc shingle` ran as a stage of its own."""
        if not self.has_shingle_sets():
            raise IndexError_(
                f"the index at {self.store.path} keeps no shingle sets (`simdoc pairs` verifies from the documents)",
                hint="run `simdoc shingle CORPUS --index ...` to store them",
            )
        return ShingleSets(self._array("shingle", "indptr"), self._array("shingle", "data"), self._array("shingle", "counts"))

    def signatures(self) -> np.ndarray:
        return self._array("signature", "signatures")

    def hasher(self) -> MinHasher:
        st = self.stage("signature")
        family = self._array("signature", "family")
        p = st["params"]
        return MinHasher(p["num_perm"], p["seed"], a=family[0], b=family[1], scheme=p.get("scheme", DEFAULT_SCHEME))

    def bands(self) -> tuple[np.ndarray, np.ndarray]:
        return self._array("index", "bands"), self._array("index", "buckets")

    def bucket_stats(self) -> BucketStats | None:
        """The buckets' sizes as a walk of them counts them (:meth:`BucketStats.of_bands`), from the
        index stage's manifest entry; None where it has none (made by an older simdoc)."""
        st = self.stage("index")
        if not all(k in st for k in ("largest_bucket", "large_buckets", "banded")):
            return None
        return BucketStats.of_bands(st["largest_bucket"], st["large_buckets"], st["banded"])

    def representatives(self) -> np.ndarray:
        """rep[i]: the first document with exactly document i's text (see simdoc.exact)."""
        return np.asarray(self._array("index", "groups"))

    def spec(self) -> ShingleSpec:
        p = self.stage("shingle")["params"]
        return ShingleSpec(p["unit"], p["k"], p["lowercase"], p.get("unicode", "none"))

    def verified_pairs(self) -> VerifiedPairs:
        st = self.manifest["stages"].get("verified")
        shingle = self.stage("shingle")
        # Texts read under other rules (simdoc.corpus.reading_rules.READING_RULES) may differ with the same identity.
        if st is None or st.get("params") != shingle["params"] or st.get("reading_rules", 1) != shingle.get("reading_rules", 1):
            return VerifiedPairs()
        return VerifiedPairs(np.asarray(self._array("verified", "keys")), np.asarray(self._array("verified", "jaccard")))


def open_index(index: str | os.PathLike, lazy_ids: bool = False) -> LoadedIndex:
    """The index at ``index``; ``lazy_ids``: for a process that reads few rows of its docs table."""
    store = IndexStore(index)
    if not store.exists():
        raise IndexError_(f"no simdoc index at {index}", hint="build one with `simdoc pairs CORPUS --index ...`")
    return LoadedIndex(store, store.read_manifest(), lazy_ids=lazy_ids)


def readable_docs(store: IndexStore, manifest: dict) -> DocsTable | None:
    """The docs table of ``manifest``'s shingle stage, or None if it has none or it cannot be read
    (what a --rebuild replaces: a damaged one is no reason to fail)."""
    if manifest["stages"].get("shingle") is None:
        return None
    try:
        return LoadedIndex(store, manifest).docs()
    except (IndexError_, OSError, ValueError):
        return None

"""simdoc check: verify an index completely, file by file and array against array."""

from __future__ import annotations

import os

import numpy as np

from simdoc.errors import IndexError_
from simdoc.lsh import band_keys
from simdoc.minhash import DEFAULT_SCHEME, MinHasher
from simdoc.pipeline import LoadedIndex
from simdoc.shingling import COUNT_SATURATED
from simdoc.store import IndexStore
from simdoc.wording import count


def _count_saturated(counts: np.ndarray, chunk: int = 1 << 24) -> int:
    """How many stored counts are saturated (255), read a chunk at a time (the array can be gigabytes)."""
    from simdoc.memory import read_ranges

    total = 0
    for lo in range(0, len(counts), chunk):
        hi = min(len(counts), lo + chunk)
        total += int(np.count_nonzero(read_ranges(counts, np.array([lo]), np.array([hi])) == COUNT_SATURATED))
    return total


def check_index(index: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Verify an index completely: every file against the manifest, then the arrays' meaning.

    Returns (facts, problems): what was checked, and each thing found wrong,
    precise enough to act on. An empty ``problems`` means the index is sound.
    """
    store = IndexStore(index)
    if not store.exists():
        raise IndexError_(f"no simdoc index at {index}", hint="build one with `simdoc shingle CORPUS --index ...`")
    facts: list[str] = []
    problems: list[str] = []
    with store.reading():
        manifest = store.read_manifest()
        loaded = LoadedIndex(store, manifest)
        stages = manifest["stages"]
        for stage_name, stage in stages.items():
            for name, info in stage.get("files", {}).items():
                try:
                    if name.endswith(".npy"):
                        store.load_array(name, info, force=True)
                    else:
                        store.read_jsonl(name, info)
                    facts.append(f"{name}: {count(info.get('bytes') or 0, 'byte')}, crc32 ok")
                except IndexError_ as exc:
                    problems.append(exc.message)
        if problems:
            return facts, problems
        shingle = stages.get("shingle")
        if shingle is None:
            problems.append("no shingle stage")
            return facts, problems
        n = shingle["n_docs"]
        docs = loaded.doc_records()
        if len(docs) != n:
            problems.append(f"docs table has {count(len(docs), 'document')}, the manifest says {n}")
        ids = [d.get("id") for d in docs]
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            problems.append("document ids are not unique and sorted")
        sets = loaded.shingle_sets()
        indptr = np.asarray(sets.indptr)
        if len(indptr) != n + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(sets.data):
            problems.append("shingle offsets (indptr) are not a valid CSR index for the data")
        elif any(int(d.get("n_shingles", -1)) != int(c) for d, c in zip(docs, np.diff(indptr))):
            problems.append("docs table shingle counts disagree with the shingle offsets")
        if sets.overflow is not None:
            pos, big = sets.overflow[:, 0], sets.overflow[:, 1]
            if len(pos) and (
                np.any(np.diff(pos) <= 0) or pos[0] < 0 or pos[-1] >= len(sets.data)
                or np.any(big < COUNT_SATURATED) or np.any(np.asarray(sets.counts[pos]) != COUNT_SATURATED)
            ):
                problems.append("the shingle count overflow table does not match the saturated counts")
            elif _count_saturated(sets.counts) != len(pos):
                problems.append("some shingle counts of 255 have no entry in the overflow table")
        facts.append(f"shingle: {count(n, 'document')}, {count(len(sets.data), 'shingle')}")
        sig_stage = stages.get("signature")
        sig_current = bool(sig_stage) and sig_stage.get("built_from") == shingle["build_id"]
        if sig_stage and not sig_current:
            facts.append("signature: out of date (built from older shingles; the next pairs run rebuilds it)")
        if sig_current:
            sigs = loaded.signatures()
            if sigs.shape[0] != n:
                problems.append(f"signatures have {count(sigs.shape[0], 'row')} for {count(n, 'document')}")
            family = loaded._array("signature", "family")
            sp = sig_stage["params"]
            expected = MinHasher(sp["num_perm"], sp["seed"], scheme=sp.get("scheme", DEFAULT_SCHEME))
            if not np.array_equal(family, expected.family()):
                problems.append("the stored hash family does not match its seed")
        ix = stages.get("index")
        if ix and not (sig_current and ix.get("built_from") == sig_stage.get("build_id")):
            facts.append("index: out of date (built from older signatures; the next pairs run rebuilds it)")
        elif ix:
            keys, buckets = loaded.bands()
            # Buckets hold the documents with shingles, one per group of exact copies.
            rep = loaded.representatives()
            if rep.shape != (n,) or np.any(rep > np.arange(n)) or np.any(rep[rep] != rep):
                problems.append("the exact-copy groups (groups.*.npy) are not a valid grouping of the documents")
                rep = np.arange(n)
            eligible = int(np.count_nonzero((np.diff(indptr) > 0) & (rep == np.arange(n))))
            if keys.shape != (ix["params"]["bands"], n) or buckets.shape != (ix["params"]["bands"], eligible):
                problems.append(
                    f"band arrays have shapes {keys.shape} and {buckets.shape}, expected "
                    f"({ix['params']['bands']}, {n}) and ({ix['params']['bands']}, {eligible})"
                )
            elif buckets.size and (buckets.min() < 0 or buckets.max() >= n):
                problems.append("buckets refer to documents that do not exist")
            else:
                sigs = loaded.signatures()
                sample = np.unique(np.linspace(0, n - 1, num=min(n, 64)).astype(np.int64))
                want = band_keys(np.asarray(sigs[sample]), ix["params"]["bands"], ix["params"]["rows"])
                if not np.array_equal(want, np.asarray(keys[:, sample])):
                    problems.append("band keys do not match the signatures")
            facts.append(f"index: {count(ix['params']['bands'], 'band')} x {count(ix['params']['rows'], 'row')}")
    return facts, problems

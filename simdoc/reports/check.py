"""simdoc check: verify an index completely, file by file and array against array.

Index formats 3 and 4 (see :mod:`simdoc.store.doctable`, :mod:`simdoc.store.verified`) keep the
docs table as columns, the signatures, the band keys, buckets and exact-copy
groups, the verified-pairs table, and shingle sets only when ``simdoc
shingle`` ran as a stage of its own. Every file is checked against the
manifest (size, dtype, shape, CRC-32, read in full), then the arrays against
each other and against the ``built_from`` chain shingle → signature → index.

A later stage built from an earlier build of the stage before it is *out of
date*, not damaged: ``simdoc shingle`` or ``simdoc signature`` run on their
own leave one (``simdoc pairs`` publishes the three stages of an update by
one manifest), readers refuse it, and the next ``simdoc pairs`` rebuilds it.
That is reported as a fact (:func:`out_of_date`, shown without -v); a chain
that cannot be followed (a stage with no build id, or one naming none it was
built from) is a problem.
"""

from __future__ import annotations

import os

import numpy as np

from simdoc import kernel_choice
from simdoc.errors import IndexError_
from simdoc.exact import representatives
from simdoc.lsh import band_keys
from simdoc.minhash import DEFAULT_SCHEME, MinHasher
from simdoc.store.directory import IndexStore
from simdoc.store.loaded import LoadedIndex
from simdoc.store.locks import lock_file_problems
from simdoc.wording import count

OUT_OF_DATE = ": out of date"  # the facts naming a stage built from an older build of the one before


def out_of_date(facts: list[str]) -> list[str]:
    """The facts of :func:`check_index` that name a stage as out of date (shown even without -v)."""
    return [f for f in facts if OUT_OF_DATE in f]


def check_index(index: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Verify an index completely: every file against the manifest, then the arrays' meaning.

    Returns (facts, problems): what was checked, and each thing found wrong,
    precise enough to act on. An empty ``problems`` means the index is sound.
    """
    store = IndexStore(index)
    if not store.exists():
        raise IndexError_(f"no simdoc index at {index}", hint="build one with `simdoc pairs CORPUS --index ...`")
    facts: list[str] = []
    problems: list[str] = []
    with store.reading():
        manifest = store.read_manifest()
        loaded = LoadedIndex(store, manifest)
        problems.extend(lock_file_problems(store.path))  # sound data that no writer could update is no sound index
        stages = manifest["stages"]
        for stage_name, stage in stages.items():
            for role, name in stage.get("roles", {}).items():
                if name not in stage.get("files", {}):
                    problems.append(f"the {stage_name} stage names {name} for {role} but lists no such file")
            for name, info in stage.get("files", {}).items():
                try:
                    if not name.endswith(".npy"):  # format 3 keeps arrays only
                        problems.append(f"{name}: not a .npy array, which is all an index of this format holds")
                        continue
                    store.load_array(name, info, force=True)
                    facts.append(f"{name}: {count(info.get('bytes') or 0, 'byte')}, crc32 ok")
                except IndexError_ as exc:
                    problems.append(exc.message)
        if problems:
            return facts, problems
        shingle = stages.get("shingle")
        if shingle is None:
            problems.append("no shingle stage")
            return facts, problems
        for name in ("shingle", "signature", "index"):
            st = stages.get(name)
            if st is not None and not st.get("build_id"):
                problems.append(f"the {name} stage has no build id")
            if st is not None and name != "shingle" and not st.get("built_from"):
                problems.append(f"the {name} stage does not say which build it was made from")
        if problems:
            return facts, problems
        n = shingle["n_docs"]
        docs = _check_docs(loaded, n, problems)
        if docs is None:
            return facts, problems
        nonempty = np.asarray(docs.n_shingles) > 0
        if "n_empty" in shingle and int(np.count_nonzero(~nonempty)) != shingle["n_empty"]:
            problems.append(
                f"docs table has {int(np.count_nonzero(~nonempty))} documents with no shingles, the manifest says {shingle['n_empty']}"
            )
        if loaded.has_shingle_sets():
            _check_shingle_sets(loaded, docs, n, facts, problems)
        facts.append(f"shingle: {n} documents, {int(np.asarray(docs.n_shingles).sum())} shingles with repeats")
        sig_stage = stages.get("signature")
        sig_current = bool(sig_stage) and sig_stage.get("built_from") == shingle["build_id"]
        if sig_stage and not sig_current:
            facts.append(f"signature{OUT_OF_DATE} (built from another shingle build: readers refuse it until the next `simdoc pairs` rebuilds it)")
        if sig_current:
            sigs = loaded.signatures()
            sp = sig_stage["params"]
            if sigs.shape != (n, sp["num_perm"]):
                problems.append(f"signatures have shape {sigs.shape}, expected ({n}, {sp['num_perm']})")
            family = loaded._array("signature", "family")
            expected = MinHasher(sp["num_perm"], sp["seed"], scheme=sp.get("scheme", DEFAULT_SCHEME))
            if not np.array_equal(family, expected.family()):
                problems.append("the stored hash family does not match its seed")
            facts.append(f"signature: {n} x {sp['num_perm']}")
        ix = stages.get("index")
        if ix and not (sig_current and ix.get("built_from") == sig_stage.get("build_id")):
            facts.append(f"index{OUT_OF_DATE} (built from other signatures: readers refuse it until the next `simdoc pairs` rebuilds it)")
        elif ix:
            _check_index_stage(loaded, docs, ix, n, nonempty, problems)
            facts.append(f"index: {ix['params']['bands']} bands x {ix['params']['rows']} rows")
        if stages.get("verified") is not None:
            _check_verified(loaded, facts, problems)
    return facts, problems


def _check_docs(loaded: LoadedIndex, n: int, problems: list[str]):
    """The docs table, if its columns agree with each other and with ``n``; else None (problems noted)."""
    from simdoc.errors import CorruptIndex

    try:
        docs = loaded.docs()
    except CorruptIndex as exc:
        problems.append(exc.message)
        return None
    if len(docs) != n:
        problems.append(f"docs table has {len(docs)} documents, the manifest says {n}")
        return None
    for c in ("digest", "file_digest", "identity"):
        if docs.columns[c].shape != (n, 16):
            problems.append(f"docs column {c} has shape {docs.columns[c].shape}, expected ({n}, 16)")
            return None
    from simdoc.corpus.read import identities
    from simdoc.store.doctable import HOW

    # Column by column, a block of ids at a time: a string or a hash a document was 30 s at 10^6
    # records. What is hashed is ~24 bytes a document: a small index's by hashlib, numba not loaded.
    with kernel_choice.reads(24 * n):
        expected = identities(np.asarray(docs.digest), np.asarray(docs.how), HOW, docs.ids.take)
    wrong = int((expected != np.asarray(docs.identities())).any(axis=1).sum())
    if wrong:
        problems.append(f"{wrong} documents' identities do not follow from their digests")
    if not _ids_sorted(docs.ids, n):
        problems.append("document ids are not unique and sorted")
    if np.any(np.asarray(docs.n_shingles) < 0):
        problems.append("docs table holds negative shingle counts")
    member = np.asarray(docs.offset) >= 0
    names = docs.names  # a row has a source if its run's file name is not empty
    has_source = np.repeat(np.diff(np.asarray(names.files[1])) > 0, np.diff(np.asarray(names.rows)))
    if not np.array_equal(member, has_source):
        problems.append("docs table: a member of a JSON Lines or WARC file must have a source file and an offset, a file neither")
    return docs


def _ids_sorted(ids, n: int, block: int = 1 << 16) -> bool:
    """Whether the ``n`` ids are strictly increasing, made a block at a time (with the last of the
    block before) so that memory does not grow with the index."""
    for a in range(0, max(n - 1, 0), block):
        some = ids.take(np.arange(a, min(a + block + 1, n), dtype=np.int64))
        if any(x >= y for x, y in zip(some, some[1:])):
            return False
    return True


def _check_shingle_sets(loaded: LoadedIndex, docs, n: int, facts: list[str], problems: list[str]) -> None:
    """The shingle sets `simdoc shingle` stores: a CSR of n rows whose counts add up to the bags."""
    sets = loaded.shingle_sets()
    indptr = np.asarray(sets.indptr)
    if len(indptr) != n + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(sets.data):
        problems.append("shingle offsets (indptr) are not a valid CSR index for the data")
        return
    counts = np.asarray(sets.counts, dtype=np.int64)
    bags = np.zeros(n, dtype=np.int64)
    rows = np.flatnonzero(np.diff(indptr) > 0)
    if len(rows):
        bags[rows] = np.add.reduceat(counts, indptr[rows])
    if not np.array_equal(bags, np.asarray(docs.n_shingles)):
        problems.append("docs table shingle counts disagree with the stored shingle sets")
    facts.append(f"shingle sets: {len(sets.data)} distinct shingles")


def _check_index_stage(loaded: LoadedIndex, docs, ix: dict, n: int, nonempty: np.ndarray, problems: list[str]) -> None:
    keys, buckets = loaded.bands()
    bands = ix["params"]["bands"]
    # Buckets hold the documents with shingles, one per group of exact copies.
    rep = np.asarray(loaded.representatives())
    if rep.shape != (n,) or np.any(rep > np.arange(n)) or np.any(rep < 0) or np.any(rep[rep] != rep):
        problems.append("the exact-copy groups (groups.*.npy) are not a valid grouping of the documents")
        rep = np.arange(n)
    elif not np.array_equal(rep, representatives(docs.identities(), nonempty)):
        problems.append("the exact-copy groups (groups.*.npy) do not group the documents whose texts are identical")
    eligible = int(np.count_nonzero(nonempty & (rep == np.arange(n))))
    if keys.shape != (bands, n) or buckets.shape != (bands, eligible):
        problems.append(
            f"band arrays have shapes {keys.shape} and {buckets.shape}, expected ({bands}, {n}) and ({bands}, {eligible})"
        )
    elif buckets.size and (buckets.min() < 0 or buckets.max() >= n):
        problems.append("buckets refer to documents that do not exist")
    else:
        sigs = loaded.signatures()
        sample = np.unique(np.linspace(0, n - 1, num=min(n, 64)).astype(np.int64))
        want = band_keys(np.asarray(sigs[sample]), bands, ix["params"]["rows"])
        if not np.array_equal(want, np.asarray(keys[:, sample])):
            problems.append("band keys do not match the signatures")


def _check_verified(loaded: LoadedIndex, facts: list[str], problems: list[str]) -> None:
    keys = np.asarray(loaded._array("verified", "keys"))
    jac = np.asarray(loaded._array("verified", "jaccard"))
    if keys.ndim != 2 or keys.shape[1] != 4 or jac.shape != (len(keys), 2):
        problems.append(f"the verified-pairs table has shapes {keys.shape} and {jac.shape}, expected (m, 4) and (m, 2)")
        return
    if len(keys) > 1:
        hi, lo = keys[:, 0], keys[:, 1]
        if np.any((hi[1:] < hi[:-1]) | ((hi[1:] == hi[:-1]) & (lo[1:] <= lo[:-1]))):
            problems.append("the verified-pairs table is not sorted by key, one entry per key")
    if len(jac) and (np.any(~np.isfinite(jac)) or np.any(jac < 0) or np.any(jac[:, 0] > 1) or np.any(jac[:, 1] > 0.5)):
        problems.append("the verified-pairs table holds Jaccards outside [0, 1] (set) or [0, 0.5] (bag)")
    facts.append(f"verified: {len(keys)} pairs")

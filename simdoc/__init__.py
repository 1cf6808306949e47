"""simdoc: find near-duplicate documents with shingling, MinHash and LSH banding.

The library underneath the ``simdoc`` command. Each step is usable on its own::

    import simdoc
    sets = simdoc.shingle_texts(["a rose is a rose", "a rose is a flower"])
    sigs = simdoc.MinHasher(num_perm=128, seed=1).signatures(sets)
    simdoc.estimate_jaccard(sigs[0], sigs[1]), simdoc.jaccard(sets.row(0), sets.row(1))

an index of documents held in memory::

    index = simdoc.LSHIndex(threshold=0.7)
    index.insert("fox", "The quick brown fox jumps over the lazy dog")
    index.query("the quick brown fox jumps over the lazy dog!")     # ['fox']

and the whole pipeline over a folder, with the index kept on disk, with what
the commands ``pairs``, ``clusters``, ``dedup`` and ``query`` print, as data::

    for pair in simdoc.find_pairs("corpus/", index="corpus.idx", threshold=0.7):
        print(pair.doc_a, pair.doc_b, pair.estimated, pair.jaccard)
    for cluster in simdoc.find_clusters("corpus/", index="corpus.idx", threshold=0.7):
        print(cluster.cluster_id, cluster.members)
    simdoc.dedup("corpus/", index="corpus.idx", threshold=0.95, keep="newest").paths()
    simdoc.query("corpus.idx", [("draft", "text of a draft ...")]).matches
"""

# Where each public name lives. They are imported when first used (PEP 562), so that
# `import simdoc` costs nothing: the simdoc command (simdoc.__main__) must set up its
# signal handling before numpy and the pipeline load, and every module of the package
# imports this one first; a Ctrl-C before that can only be Python's own traceback, so
# this module imports nothing at all. dir() and so help(simdoc) list them all, loaded or not.
_HOMES = {
    "__version__": "simdoc.version",
    "IndexMatch": "simdoc.lshindex",
    "LSHIndex": "simdoc.lshindex",
    "SimdocError": "simdoc.errors",
    "MinHasher": "simdoc.minhash",
    "ShingleSets": "simdoc.shinglesets",
    "ShingleSpec": "simdoc.shingling",
    "bag_jaccard": "simdoc.similarity",
    "candidate_probability": "simdoc.lsh",
    "choose_bands_rows": "simdoc.lsh",
    "dedup": "simdoc.reports.library",
    "estimate_jaccard": "simdoc.similarity",
    "find_clusters": "simdoc.reports.library",
    "find_pairs": "simdoc.stages.pairs",
    "jaccard": "simdoc.similarity",
    "query": "simdoc.reports.library",
    "s_curve_threshold": "simdoc.lsh",
    "shingle_texts": "simdoc.shingling",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'simdoc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

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

import importlib

from simdoc.errors import SimdocError
from simdoc.lsh import candidate_probability, choose_bands_rows, s_curve_threshold
from simdoc.lshindex import IndexMatch, LSHIndex
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import bag_jaccard, estimate_jaccard, jaccard
from simdoc.version import __version__

__all__ = [
    "IndexMatch",
    "LSHIndex",
    "MinHasher",
    "ShingleSets",
    "ShingleSpec",
    "SimdocError",
    "__version__",
    "bag_jaccard",
    "candidate_probability",
    "choose_bands_rows",
    "dedup",
    "estimate_jaccard",
    "find_clusters",
    "find_pairs",
    "jaccard",
    "query",
    "s_curve_threshold",
    "shingle_texts",
]


# The pipeline pulls in file I/O, the index store and multiprocessing (about twice the import
# time of the maths): these names are loaded on first use, and listed by dir() and help() all
# the same (PEP 562 __getattr__ and __dir__).
_LAZY = {
    "find_pairs": "simdoc.stages.pairs",
    "find_clusters": "simdoc.reports.library",
    "dedup": "simdoc.reports.library",
    "query": "simdoc.reports.library",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simdoc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

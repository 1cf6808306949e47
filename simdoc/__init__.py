"""simdoc: find near-duplicate documents with shingling, MinHash and LSH banding.

The library underneath the ``simdoc`` command. Each step is usable on its own::

    import simdoc
    sets = simdoc.shingle_texts(["a rose is a rose", "a rose is a flower"])
    sigs = simdoc.MinHasher(num_perm=128, seed=1).signatures(sets)
    simdoc.estimate_jaccard(sigs[0], sigs[1]), simdoc.jaccard(sets.row(0), sets.row(1))

and the whole pipeline over a folder, with the index kept on disk::

    for pair in simdoc.find_pairs("corpus/", index="corpus.idx", threshold=0.7):
        print(pair.doc_a, pair.doc_b, pair.estimated, pair.jaccard)
"""

from simdoc.errors import SimdocError
from simdoc.lsh import candidate_probability, choose_bands_rows, s_curve_threshold
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import bag_jaccard, estimate_jaccard, jaccard
from simdoc.version import __version__

__all__ = [
    "MinHasher",
    "ShingleSets",
    "ShingleSpec",
    "SimdocError",
    "__version__",
    "bag_jaccard",
    "candidate_probability",
    "choose_bands_rows",
    "estimate_jaccard",
    "find_pairs",
    "jaccard",
    "s_curve_threshold",
    "shingle_texts",
]


def __getattr__(name: str):
    # The pipeline pulls in file I/O and multiprocessing; load it only when asked.
    if name == "find_pairs":
        from simdoc.stages.pairs import find_pairs

        return find_pairs
    raise AttributeError(name)

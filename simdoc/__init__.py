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

from simdoc.version import __version__

# Where each public name lives. They are imported when first used (PEP 562), so that
# `import simdoc` costs nothing: the simdoc command (simdoc.__main__) must set up its
# signal handling before numpy and the pipeline load, and every module of the package
# imports this one first.
_HOMES = {
    "SimdocError": "simdoc.errors",
    "MinHasher": "simdoc.minhash",
    "ShingleSets": "simdoc.shinglesets",
    "ShingleSpec": "simdoc.shingling",
    "bag_jaccard": "simdoc.similarity",
    "candidate_probability": "simdoc.lsh",
    "choose_bands_rows": "simdoc.lsh",
    "estimate_jaccard": "simdoc.similarity",
    "find_pairs": "simdoc.stages.pairs",
    "jaccard": "simdoc.similarity",
    "s_curve_threshold": "simdoc.lsh",
    "shingle_texts": "simdoc.shingling",
}

__all__ = sorted(["__version__", *_HOMES])


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'simdoc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # dir() and so help(simdoc) list every public name, loaded or not.
    return sorted(set(globals()) | set(__all__))

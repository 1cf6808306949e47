"""The four stages: shingle → signature → index → pairs, each kept in the index directory.

Each stage module brings its stage up to date, taking its parameters as an
object of :mod:`simdoc.params` and running its tasks on the engine it is
given (:mod:`simdoc.engines`). Parameters not asked for are the index's, else
the defaults; one that differs from the index's is a
:class:`~simdoc.errors.ParameterMismatch` unless ``rebuild``. The band
parameters are the exception: banding is cheap and derived from the
signatures, so asking for another threshold simply re-bands.

* :mod:`~simdoc.stages.shingle`: read the corpus where it changed; the docs table (and, fused, the signatures).
* :mod:`~simdoc.stages.scan`: the shingle stage's tasks (read a batch, shingle, sign).
* :mod:`~simdoc.stages.resume`: on a cluster, finished reading tasks' parts reused after a kill.
* :mod:`~simdoc.stages.signature`: the MinHash matrix of stored shingle sets.
* :mod:`~simdoc.stages.index`: the band keys and buckets.
* :mod:`~simdoc.stages.pairs`: every stage brought up to date, then the candidates scored (find_pairs).
* :mod:`~simdoc.stages.results`: candidates scored and verified, in print order.
* :mod:`~simdoc.stages.reread`: indexed documents read again, checked against their digests.
* :mod:`~simdoc.stages.verify`: candidate pairs compared exactly, component by component.
* :mod:`~simdoc.stages.dask_signatures`: on a Dask cluster, the signature rows copied into the index by the workers.
* :mod:`~simdoc.stages.dask_index`: on a Dask cluster, band keys by row range and buckets by key range, by the workers.
* :mod:`~simdoc.stages.dask_pairs`: candidates scored on a Dask cluster, each band cut into key ranges.
* :mod:`~simdoc.stages.dask_components`: connected components of the verified pairs on a Dask cluster.
* :mod:`~simdoc.stages.common`: the default index, build ids, the parameter check, progress bars.
"""

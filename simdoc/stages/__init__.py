"""The four stages: shingle → signature → index → pairs, each kept in the index directory.

* :mod:`~simdoc.stages.pipeline`: the stages and the local engine's orchestration.
* :mod:`~simdoc.stages.scan`: the shingle stage's task (read a batch, shingle, sign).
* :mod:`~simdoc.stages.results`: candidates scored and verified, in print order.
* :mod:`~simdoc.stages.reread`: indexed documents read again, checked against their digests.
* :mod:`~simdoc.stages.verify`: candidate pairs compared exactly, component by component.
* :mod:`~simdoc.stages.cluster_pairs`: candidates shuffled by band key and scored on a Dask cluster.
"""

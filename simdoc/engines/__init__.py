"""Executors of simdoc's stage functions.

The local engine (processes on this machine) lives in :mod:`simdoc.stages.pipeline`
and needs nothing extra; :mod:`simdoc.engines.dask` runs the same functions
on a Dask cluster (the optional extra ``dask``: ``pip install '.[dask]'``).
"""

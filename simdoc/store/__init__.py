"""The index directory: what is on disk, written atomically, read back checked.

* :mod:`~simdoc.store.directory`: :class:`IndexStore` (locks, publish, checked loads).
* :mod:`~simdoc.store.names`: which entries of an index directory are simdoc's own.
* :mod:`~simdoc.store.npyfiles`: checked .npy files: streamed writes, CRC-32, fault points.
* :mod:`~simdoc.store.manifest`: ``manifest.json``, its checksum and schema.
* :mod:`~simdoc.store.doctable`: the columnar docs table (where each document lives).
* :mod:`~simdoc.store.verified`: the verified-pairs table (exact Jaccards already computed).
* :mod:`~simdoc.store.loaded`: an index opened for reading (:func:`open_index`).
* :mod:`~simdoc.store.cache`: the indexes kept in ``$XDG_CACHE_HOME/simdoc``.
"""
